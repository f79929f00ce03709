// Sliding-window release end to end: the synthesized Mistral-style model (every
// layer slides, window 8; `glassbox-cli synth --arch mistral`) generates ~20
// windows' worth of tokens in KV pools far smaller than the sequence, giving
// blocks back as they leave the window, and every greedy token and top-8
// logit equals a run in a pool big enough for everything with release off.
// Models with global layers (gemma2, gemma3) keep their sliding layers in a
// window group: its blocks go back as they leave the window while the global
// layers keep everything, and the tokens and logits equal release off.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <variant>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "kv/scheduler.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "synthetic_fixture.h"
#include "runtime/engine.h"
#include "speculative/speculative_config.h"
#include "tokenizer/tokenizer.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_sliding_window_engine {

namespace {

struct Output {
  std::vector<gb::TokenId> tokens;
  std::vector<std::vector<std::pair<gb::TokenId, float>>> top;  // per token: top-8 (id, logit)
};

struct Run {
  std::map<uint64_t, Output> outputs;
  int32_t num_window_released = 0;  // WindowReleased events of real blocks
  int32_t num_prefix_hit_tokens = 0;
  int32_t num_blocks = 0;
  int32_t sliding_window = 0;
  int32_t num_window_blocks = 0;           // the window group's pool (0: none)
  int64_t num_window_group_released = 0;   // its WindowReleased events
  int32_t num_verifications = 0;           // SpeculativeEvents
  int32_t num_steps_with_window_counts = 0; // StepEvents that carry the window group's pool
  int32_t max_window_owned = 0;
  std::string error;
};

std::shared_ptr<const gb::Model> synth_model(const std::string& arch_name) {
  return gbtest::synthetic_arch_model(arch_name);
}

std::vector<gb::TokenId> make_prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<gb::TokenId> pick(3, 511);
  std::vector<gb::TokenId> p;
  while (static_cast<int>(p.size()) < n) p.push_back(pick(rng));
  return p;
}

// Greedy requests (ignore_eos: fixed lengths) through one engine.
Run run(const std::shared_ptr<const gb::Model>& model, const std::vector<std::vector<gb::TokenId>>& prompts,
        int max_tokens, gb::EngineConfig config, const std::string& speculative = "") {
  Run out;
  config.check_invariants = true;
  config.max_context = 256;
  auto tokenizer = gb::load_tokenizer(*model, "");
  GB_CHECK(tokenizer.ok());
  gb::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  gb::Engine engine(model, *tokenizer, gb::make_cpu_backend(model, cpu), config);
  if (auto st = engine.start(); !st) {
    out.error = st.error().message;
    return out;
  }
  out.num_blocks = engine.num_blocks();
  out.sliding_window = engine.scheduler().kv_cache().sliding_window();
  const gb::KvCacheManager* window = engine.scheduler().window_kv_cache();
  out.num_window_blocks = window ? window->num_blocks() : 0;
  std::vector<uint64_t> ids;
  for (const auto& p : prompts) {
    gb::GenerationRequest r;
    r.prompt_ids = p;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.top_n_record = 8;
    r.ignore_eos = true;
    if (!speculative.empty()) {
      auto spec = gb::parse_speculative_spec(speculative);
      GB_CHECK(spec.ok());
      spec->timing_fallback = false;
      r.speculative = *spec;
    }
    auto id = engine.submit(r);
    if (!id) {
      out.error = id.error().message;
      return out;
    }
    ids.push_back(id->value);
  }
  if (auto st = engine.run_until_idle(); !st) out.error = st.error().message;
  if (window) out.num_window_group_released = window->pool().num_window_released_total();
  for (const gb::TraceEvent& e : engine.drain_events()) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      Output& o = out.outputs[t->request.value];
      o.tokens.push_back(t->token);
      std::vector<std::pair<gb::TokenId, float>> top;
      for (const auto& c : t->record.top) top.emplace_back(c.id, c.logit);
      o.top.push_back(std::move(top));
    } else if (const auto* kv = std::get_if<gb::KvTraceEvent>(&e.body)) {
      out.num_window_released += kv->kv.kind == gb::KvEventKind::WindowReleased && kv->kv.block.value >= 0;
    } else if (const auto* step = std::get_if<gb::StepEvent>(&e.body)) {
      if (step->num_window_blocks_total) {
        ++out.num_steps_with_window_counts;
        out.max_window_owned = std::max(out.max_window_owned, step->num_window_blocks_owned.value_or(0));
        GB_CHECK(*step->num_window_blocks_total == out.num_window_blocks);
      }
    } else if (std::holds_alternative<gb::SpeculativeEvent>(e.body)) {
      ++out.num_verifications;
    } else if (const auto* a = std::get_if<gb::RequestAdmittedEvent>(&e.body)) {
      out.num_prefix_hit_tokens += a->num_cached_tokens;
    } else if (const auto* err = std::get_if<gb::ErrorEvent>(&e.body)) {
      out.error = err->message;
    }
  }
  return out;
}

// Same tokens; same top ids with logits within 1e-5 (chunk sizes differ
// between the runs, and a packed prefill may sum in another order).
std::string compare(const Output& got, const Output& want) {
  if (got.tokens != want.tokens) return "greedy tokens differ";
  for (size_t k = 0; k < want.top.size(); ++k)
    for (size_t j = 0; j < want.top[k].size(); ++j) {
      if (got.top[k][j].first != want.top[k][j].first) return "top ids differ at token " + std::to_string(k);
      if (std::abs(got.top[k][j].second - want.top[k][j].second) > 1e-5f)
        return "logit differs at token " + std::to_string(k) + " by " +
               std::to_string(got.top[k][j].second - want.top[k][j].second);
    }
  return {};
}

gb::EngineConfig pool(int32_t num_blocks, int32_t block_size, bool release, int32_t num_window_blocks = 0) {
  gb::EngineConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.release_window_blocks = release;
  c.num_window_blocks = num_window_blocks;
  c.max_seqs = 4;
  return c;
}

}  // namespace

GB_TEST(mistral_generation_in_a_tiny_pool_equals_a_big_pool_without_release) {
  const auto model = synth_model("mistral");
  QCOMPARE(model->config.sliding_window, 8);
  QCOMPARE(model->config.kv_release_window(), 8);
  const int kMaxTokens = 150;  // prompt 12 + 150 = 162 positions, ~20 windows
  const std::vector<gb::TokenId> prompt = make_prompt(12, 5);

  const Run big = run(model, {prompt}, kMaxTokens, pool(64, 4, false));
  QVERIFY2(big.error.empty(), big.error.c_str());
  QCOMPARE(big.sliding_window, 0);
  QCOMPARE(big.num_window_released, 0);
  const Output& want = big.outputs.begin()->second;
  QCOMPARE(static_cast<int>(want.tokens.size()), kMaxTokens);

  // (blocks, block size): the least pools that hold a window and a block, and
  // one with room to spare. 5 x 4 = 20 slots and 2 x 16 = 32 for 162 positions.
  for (const auto& [blocks, bs] : std::vector<std::pair<int32_t, int32_t>>{{5, 4}, {2, 16}, {4, 8}, {10, 1}}) {
    const std::string name = std::to_string(blocks) + " blocks of " + std::to_string(bs);
    const Run small = run(model, {prompt}, kMaxTokens, pool(blocks, bs, true));
    QVERIFY2(small.error.empty(), (name + ": " + small.error).c_str());
    QCOMPARE(small.sliding_window, 8);
    QVERIFY2(blocks * bs * 4 < 12 + kMaxTokens, name.c_str());
    QVERIFY2(small.num_window_released >= (12 + kMaxTokens - 8) / bs - 1, (name + ": " + std::to_string(small.num_window_released)).c_str());
    const std::string diff = compare(small.outputs.begin()->second, want);
    QVERIFY2(diff.empty(), (name + ": " + diff).c_str());
  }
}

GB_TEST(mistral_concurrent_requests_with_a_shared_prompt_release_and_hit) {
  const auto model = synth_model("mistral");
  const std::vector<gb::TokenId> shared = make_prompt(40, 9);
  std::vector<std::vector<gb::TokenId>> prompts;
  for (uint32_t i = 0; i < 3; ++i) {
    std::vector<gb::TokenId> p = shared;
    for (gb::TokenId t : make_prompt(3 + static_cast<int>(i), 20 + i)) p.push_back(t);
    prompts.push_back(std::move(p));
  }
  std::vector<Output> want;
  for (const auto& p : prompts) {
    const Run alone = run(model, {p}, 60, pool(64, 4, false));
    QVERIFY2(alone.error.empty(), alone.error.c_str());
    want.push_back(alone.outputs.begin()->second);
  }
  // 12 blocks of 4 (48 slots) for three requests of ~105 positions at once:
  // batched, preempted or queued, released as they go, prompt blocks re-found.
  const Run together = run(model, prompts, 60, pool(12, 4, true));
  QVERIFY2(together.error.empty(), together.error.c_str());
  QCOMPARE(together.outputs.size(), size_t{3});
  size_t i = 0;
  for (const auto& [id, out] : together.outputs) {
    const std::string diff = compare(out, want[i]);
    QVERIFY2(diff.empty(), ("request " + std::to_string(i) + ": " + diff).c_str());
    ++i;
  }
  QVERIFY(together.num_window_released > 50);
}

GB_TEST(models_with_global_layers_release_only_the_window_group_and_keep_every_token) {
  for (const char* arch : {"gemma2", "gemma3"}) {
    const auto model = synth_model(arch);
    QVERIFY(model->config.sliding_window > 0);
    QCOMPARE(model->config.kv_release_window(), 0);
    QVERIFY(model->config.has_window_group());
    const int32_t w = model->config.sliding_window;
    const int kMaxTokens = 120;
    const std::vector<gb::TokenId> prompt = make_prompt(10, 3);
    const Run off = run(model, {prompt}, kMaxTokens, pool(64, 4, false));
    QVERIFY2(off.error.empty(), off.error.c_str());
    QCOMPARE(off.num_window_blocks, 0);
    QCOMPARE(off.num_steps_with_window_counts, 0);  // no window group: the fields are absent
    QCOMPARE(static_cast<int>(off.outputs.begin()->second.tokens.size()), kMaxTokens);
    // Window pools from the least (a window and a block) to the planned one.
    for (const int32_t window_blocks : {(w + 3) / 4 + 1, (w + 3) / 4 + 3, 0}) {
      const std::string name = std::string(arch) + ", " + std::to_string(window_blocks) + " window blocks";
      const Run on = run(model, {prompt}, kMaxTokens, pool(64, 4, true, window_blocks));
      QVERIFY2(on.error.empty(), (name + ": " + on.error).c_str());
      QCOMPARE(on.sliding_window, 0);        // the global layers release nothing
      // Every step reports the window group's pool; it never held more than a
      // window and a block of 4 tokens plus the prompt's first chunk.
      QVERIFY2(on.num_steps_with_window_counts >= kMaxTokens, name.c_str());
      QVERIFY2(on.max_window_owned >= (w + 3) / 4 && on.max_window_owned <= on.num_window_blocks, name.c_str());
      QCOMPARE(on.num_window_released, 0);
      QVERIFY2(on.num_window_blocks > 0, name.c_str());
      if (window_blocks > 0) QCOMPARE(on.num_window_blocks, window_blocks);
      // 130 positions through a pool of a few blocks: nearly all released.
      QVERIFY2(on.num_window_group_released >= (10 + kMaxTokens - w) / 4 - 1,
               (name + ": " + std::to_string(on.num_window_group_released)).c_str());
      const std::string diff = compare(on.outputs.begin()->second, off.outputs.begin()->second);
      QVERIFY2(diff.empty(), (name + ": " + diff).c_str());
    }
  }
}

GB_TEST(window_group_concurrent_requests_with_a_shared_prompt_hit_in_both_groups) {
  const auto model = synth_model("gemma3");
  const std::vector<gb::TokenId> shared = make_prompt(40, 9);
  std::vector<std::vector<gb::TokenId>> prompts;
  for (uint32_t i = 0; i < 3; ++i) {
    std::vector<gb::TokenId> p = shared;
    for (gb::TokenId t : make_prompt(3 + static_cast<int>(i), 20 + i)) p.push_back(t);
    prompts.push_back(std::move(p));
  }
  std::vector<Output> want;
  for (const auto& p : prompts) {
    const Run alone = run(model, {p}, 50, pool(64, 4, false));
    QVERIFY2(alone.error.empty(), alone.error.c_str());
    want.push_back(alone.outputs.begin()->second);
  }
  // The first request alone, then the three at once in a window pool of
  // three windows: the shared prompt is a hit in both groups (the window
  // group's blocks before the window need not be cached), some wait or are
  // preempted for window blocks.
  gb::EngineConfig config = pool(160, 4, true, 3 * ((6 + 3) / 4 + 2));
  const Run together = run(model, prompts, 50, config);
  QVERIFY2(together.error.empty(), together.error.c_str());
  QCOMPARE(together.outputs.size(), size_t{3});
  size_t i = 0;
  for (const auto& [id, out] : together.outputs) {
    const std::string diff = compare(out, want[i]);
    QVERIFY2(diff.empty(), ("request " + std::to_string(i) + ": " + diff).c_str());
    ++i;
  }
  QVERIFY2(together.num_prefix_hit_tokens >= 2 * 40 - 8, std::to_string(together.num_prefix_hit_tokens).c_str());
  QVERIFY(together.num_window_group_released > 50);
}

GB_TEST(window_group_self_drafting_borrows_scratch_in_both_pools_and_keeps_the_tokens) {
  const auto model = synth_model("gemma3");
  const std::vector<gb::TokenId> prompt = make_prompt(11, 17);
  const Run plain = run(model, {prompt}, 60, pool(64, 4, false));
  QVERIFY2(plain.error.empty(), plain.error.c_str());
  for (const char* spec : {"self:3:k=3,fallback=off", "self:5:k=4,fallback=off", "ngram:n=2,k=4,fallback=off"}) {
    gb::EngineConfig config = pool(64, 4, true, 4);
    config.num_scratch_blocks = 3;
    const Run drafted = run(model, {prompt}, 60, config, spec);
    QVERIFY2(drafted.error.empty(), (std::string(spec) + ": " + drafted.error).c_str());
    QCOMPARE(drafted.num_window_blocks, 4 + 3);  // the lookahead reserve beside the window pool
    QVERIFY(drafted.num_window_group_released > 10);
    QVERIFY2(drafted.num_verifications > 5, spec);  // it did draft
    QVERIFY2(drafted.outputs.begin()->second.tokens == plain.outputs.begin()->second.tokens, spec);
  }
}

}  // namespace test_sliding_window_engine
