// Engine::inspect (runtime/inside.h, docs/inside.md) on every architecture
// (tiny-llama3 from ../shared and the synth models of tests/data/arch: qwen3,
// mistral, gemma2 and gemma3 with their sliding windows and soft-caps, phi3):
//  - attention rows: one per query head, over exactly the positions the layer
//    sees (its window for a sliding layer), non-negative, summing to 1;
//  - the residual leaving layer l is the one entering l + 1, bit for bit;
//  - the last layer's lens is the model's own next-token distribution, exactly;
//  - the capture forward's logits are those a plain generation computes for
//    the same prefix (its first sampled token's recorded top-20 logits);
//  - a second inspection reuses the cached prefix and gives the same report;
//  - bad positions, layers and top-k are errors, and the engine goes on.
// The comparison with transformers' own attention weights and hidden states is
// test_inside_references.cpp.
#include <cmath>
#include <random>
#include <variant>

#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "runtime/engine.h"
#include "runtime/inside.h"
#include "tokenizer/tokenizer.h"
#include "trace/trace_json.h"
#include "trace/trace_schema.h"

namespace test_inside {
namespace {

struct Loaded {
  std::shared_ptr<const gb::Model> model;
  std::shared_ptr<const gb::Tokenizer> tokenizer;
};

Loaded load(const std::string& path) {
  gb::LoadOptions options;
  options.context_length = 256;
  auto model = gb::load_model(path, options);
  GB_CHECK_MSG(model.ok(), model.ok() ? "" : model.error().message.c_str());
  auto tokenizer = gb::load_tokenizer(**model, "");
  GB_CHECK_MSG(tokenizer.ok(), tokenizer.ok() ? "" : tokenizer.error().message.c_str());
  return {*model, *tokenizer};
}

Loaded synth(const char* arch, uint64_t seed) {
  const std::string path = gbtest::temp_dir() + "/inside-" + arch + ".gguf";
  GB_CHECK(gb::write_synthetic_arch_model(*gb::find_synthetic_arch(arch), seed, path).ok());
  return load(path);
}

std::unique_ptr<gb::Engine> make_engine(const Loaded& m) {
  gb::EngineConfig config;
  config.kv_types = {gb::WeightType::F32, gb::WeightType::F32};
  config.max_seqs = 2;
  config.max_context = 256;
  config.check_invariants = true;
  auto engine = std::make_unique<gb::Engine>(m.model, m.tokenizer, gb::make_cpu_backend(m.model), config);
  GB_CHECK(engine->start().ok());
  return engine;
}

std::vector<gb::TokenId> random_prompt(const gb::ModelConfig& c, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<gb::TokenId> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + static_cast<gb::TokenId>(rng() % static_cast<uint32_t>(c.vocab_size - 3)));
  return ids;
}

// The first sampled token's recorded top-20 logits of a plain greedy run over `prompt`.
std::vector<std::pair<gb::TokenId, float>> plain_top(const Loaded& m, const std::vector<gb::TokenId>& prompt) {
  auto engine = make_engine(m);
  gb::GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 1;
  r.sampling.top_n_record = 20;
  r.ignore_eos = true;
  GB_CHECK(engine->submit(r).ok());
  GB_CHECK(engine->run_until_idle().ok());
  std::vector<std::pair<gb::TokenId, float>> top;
  for (const gb::TraceEvent& e : engine->drain_events())
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body))
      for (const auto& cand : t->record.top) top.emplace_back(cand.id, cand.logit);
  return top;
}

void check_report(const Loaded& m, const gb::InsideReport& r, const std::vector<gb::TokenId>& tokens, int32_t p,
                  const std::string& what) {
  const gb::ModelConfig& c = m.model->config;
  QCOMPARE(r.position, p);
  QCOMPARE(static_cast<int32_t>(r.context.size()), p + 1);
  QCOMPARE(static_cast<int32_t>(r.layers.size()), c.num_layers);
  QCOMPARE(r.target_is_next, p + 1 < static_cast<int32_t>(tokens.size()));
  if (r.target_is_next) QCOMPARE(r.target, tokens[static_cast<size_t>(p) + 1]);
  QVERIFY2(r.lens_error.empty(), r.lens_error.c_str());
  for (const gb::InsideLayer& l : r.layers) {
    const std::string at = what + " position " + std::to_string(p) + " layer " + std::to_string(l.layer);
    const int32_t window = c.is_sliding(l.layer) ? c.sliding_window : 0;
    QCOMPARE(l.window, window);
    QCOMPARE(l.first_position, window > 0 ? std::max(0, p - window + 1) : 0);
    QCOMPARE(static_cast<int32_t>(l.attention.size()), c.num_heads);
    for (const std::vector<float>& row : l.attention) {
      QCOMPARE(static_cast<int32_t>(row.size()), p - l.first_position + 1);
      double sum = 0.0;
      for (float w : row) {
        QVERIFY2(w >= 0.0f && std::isfinite(w), at.c_str());
        sum += w;
      }
      QVERIFY2(std::abs(sum - 1.0) < 1e-5, (at + ": row sums to " + std::to_string(sum)).c_str());
    }
    QCOMPARE(l.residual_in.size(), static_cast<size_t>(c.dim));
    if (l.layer + 1 < c.num_layers)
      QVERIFY2(l.residual_out == r.layers[static_cast<size_t>(l.layer) + 1].residual_in, at.c_str());
    double norm = 0.0;
    for (float v : l.residual_out) norm += static_cast<double>(v) * v;
    QVERIFY(std::abs(std::sqrt(norm) - l.residual_norm) <= 1e-9 * std::max(1.0, l.residual_norm));
    QVERIFY(l.cosine_to_previous >= -1.0 - 1e-12 && l.cosine_to_previous <= 1.0 + 1e-12);
    QCOMPARE(static_cast<int32_t>(l.lens_top.size()), 5);
    QVERIFY(l.target_rank >= 0 && l.target_rank < c.vocab_size);
  }
  // The last layer's lens is the model's own distribution: same ids, same probabilities.
  const gb::InsideLayer& last = r.layers.back();
  QCOMPARE(last.lens_top.size(), r.final_top.size());
  for (size_t i = 0; i < r.final_top.size(); ++i) {
    QCOMPARE(last.lens_top[i].id, r.final_top[i].id);
    QCOMPARE(last.lens_top[i].prob, r.final_top[i].prob);
  }
  // The last layer's target probability is the target's softmax probability
  // under the model's logits (computed here in one plain pass).
  {
    double top = -INFINITY, sum = 0.0;
    for (float v : r.logits) top = std::max(top, static_cast<double>(v));
    for (float v : r.logits) sum += std::exp(static_cast<double>(v) - top);
    const double want = std::exp(static_cast<double>(r.logits[static_cast<size_t>(r.target)]) - top) / sum;
    QVERIFY2(std::abs(last.target_prob - want) <= 1e-9 + 1e-9 * want,
             (what + ": target probability " + std::to_string(last.target_prob) + " vs " + std::to_string(want)).c_str());
  }
  // The capture forward computes what a plain forward over the prefix does.
  const std::vector<gb::TokenId> prefix(tokens.begin(), tokens.begin() + p + 1);
  const auto top = plain_top(m, prefix);
  QCOMPARE(top.size(), size_t{20});
  for (const auto& [id, logit] : top) {
    const float mine = r.logits[static_cast<size_t>(id)];
    QVERIFY2(std::abs(mine - logit) <= 1e-4f * std::max(1.0f, std::abs(logit)),
             (what + ": logit of " + std::to_string(id) + " " + std::to_string(mine) + " vs " + std::to_string(logit)).c_str());
  }
}

}  // namespace

GB_TEST(inside_reports_hold_their_invariants_on_every_architecture) {
  struct Case {
    const char* name;
    Loaded m;
  };
  std::vector<Case> cases;
  cases.push_back({"tiny-llama3", load(gbtest::shared_dir() + "/models/tiny-llama3/tiny-llama3-F16.gguf")});
  // The seeds of tools/make_arch_refs.py (any seed would do).
  cases.push_back({"qwen3", synth("qwen3", 3101)});
  cases.push_back({"mistral", synth("mistral", 3102)});
  cases.push_back({"gemma2", synth("gemma2", 3123)});
  cases.push_back({"gemma3", synth("gemma3", 3134)});
  cases.push_back({"phi3", synth("phi3", 3105)});
  int num_sliding_checked = 0;
  for (const Case& k : cases) {
    const gb::ModelConfig& c = k.m.model->config;
    auto engine = make_engine(k.m);
    const std::vector<gb::TokenId> tokens = random_prompt(c, 21, 7);
    gb::InsideOptions o;
    o.residuals = true;
    for (int32_t p : {0, 7, 20}) {
      auto r = engine->inspect(tokens, p, o);
      QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
      check_report(k.m, *r, tokens, p, k.name);
      for (const gb::InsideLayer& l : r->layers) num_sliding_checked += l.window > 0 && l.first_position > 0;
    }
    QVERIFY(engine->retained_requests().empty());  // each inspection gave its blocks back
    QVERIFY(engine->check_kv_ownership({}).ok());
  }
  QVERIFY(num_sliding_checked > 0);  // windows narrower than the context were seen
}

GB_TEST(inside_reuses_the_cached_prefix_and_repeats_itself) {
  const Loaded m = load(gbtest::shared_dir() + "/models/tiny-llama3/tiny-llama3-F16.gguf");
  auto engine = make_engine(m);
  const std::vector<gb::TokenId> tokens = random_prompt(m.model->config, 60, 11);
  gb::InsideOptions o;
  o.residuals = true;
  auto first = engine->inspect(tokens, 50, o);
  QVERIFY(first.ok());
  QCOMPARE(first->reused_tokens, 0);
  QCOMPARE(first->recomputed_tokens, 51);
  auto second = engine->inspect(tokens, 50, o);
  QVERIFY(second.ok());
  QCOMPARE(second->reused_tokens, 48);  // three whole blocks of 16; the last token is always recomputed
  QCOMPARE(second->recomputed_tokens, 3);
  for (size_t l = 0; l < first->layers.size(); ++l) {
    QVERIFY(first->layers[l].attention == second->layers[l].attention);
    QVERIFY(first->layers[l].residual_out == second->layers[l].residual_out);
  }
  QVERIFY(first->logits == second->logits);
  // The inspections' requests say what they are, and that survives the trace.
  int32_t num_inspect_requests = 0;
  for (const gb::TraceEvent& e : engine->drain_events())
    if (const auto* s = std::get_if<gb::RequestSubmittedEvent>(&e.body)) {
      QVERIFY(s->purpose.has_value() && *s->purpose == "inspect");
      ++num_inspect_requests;
      const nlohmann::json j = gb::to_json(e);
      QVERIFY(gb::validate_trace_json_line(j).ok());
      auto back = gb::trace_event_from_json(j);
      QVERIFY(back.ok() && gb::trace_events_equal(*back, e));
      nlohmann::json old = j;  // a trace written before the field existed still reads
      old.erase("purpose");
      QVERIFY(gb::validate_trace_json_line(old).ok());
      auto old_back = gb::trace_event_from_json(old);
      QVERIFY(old_back.ok() && !std::get<gb::RequestSubmittedEvent>(old_back->body).purpose.has_value());
    }
  QCOMPARE(num_inspect_requests, 2);
  // A generation running beside an inspection is not disturbed by it.
  gb::GenerationRequest g;
  g.prompt_ids = tokens;
  g.sampling.temperature = 0.0f;
  g.sampling.max_tokens = 8;
  g.ignore_eos = true;
  QVERIFY(engine->submit(g).ok());
  QVERIFY(engine->step().ok());
  QVERIFY(engine->inspect(tokens, 30, o).ok());
  QVERIFY(engine->run_until_idle().ok());
  int32_t sampled = 0, callers = 0, inspections = 0;
  for (const gb::TraceEvent& e : engine->drain_events()) {
    if (const auto* f = std::get_if<gb::RequestFinishedEvent>(&e.body); f && f->num_generated == 8) ++sampled;
    if (const auto* s = std::get_if<gb::RequestSubmittedEvent>(&e.body)) ++(s->purpose ? inspections : callers);
  }
  QCOMPARE(sampled, 1);
  QCOMPARE(callers, 1);  // the caller's request has no purpose, the inspection's has
  QCOMPARE(inspections, 1);
  QVERIFY(engine->check_kv_ownership({}).ok());
}

GB_TEST(inside_refuses_bad_positions_layers_and_top_k) {
  const Loaded m = load(gbtest::shared_dir() + "/models/tiny-llama3/tiny-llama3-F16.gguf");
  auto engine = make_engine(m);
  const std::vector<gb::TokenId> tokens = random_prompt(m.model->config, 10, 3);
  gb::InsideOptions o;
  QVERIFY(!engine->inspect(tokens, -1, o).ok());
  QVERIFY(!engine->inspect(tokens, 10, o).ok());
  QVERIFY(!engine->inspect({}, 0, o).ok());
  gb::InsideOptions layers = o;
  layers.last_layer = m.model->config.num_layers;
  QVERIFY(!engine->inspect(tokens, 3, layers).ok());
  gb::InsideOptions top = o;
  top.top_k = 0;
  QVERIFY(!engine->inspect(tokens, 3, top).ok());
  const std::vector<gb::TokenId> bad = {1, 2, m.model->config.vocab_size};
  QVERIFY(!engine->inspect(bad, 2, o).ok());
  QVERIFY(!gb::parse_inside_layers("3-1", o).ok());
  QVERIFY(!gb::parse_inside_layers("x", o).ok());
  QVERIFY(gb::parse_inside_layers("1-1", o).ok() && o.first_layer == 1 && o.last_layer == 1);
  // Still usable, and nothing is left holding blocks.
  auto r = engine->inspect(tokens, 9, gb::InsideOptions{});
  QVERIFY(r.ok());
  QVERIFY(!r->target_is_next);  // the last position: the lens ranks the model's own choice
  QCOMPARE(r->target, r->final_top.front().id);
  QCOMPARE(r->layers.back().target_rank, 0);
  QVERIFY(engine->retained_requests().empty());
  QVERIFY(engine->check_kv_ownership({}).ok());
}

}  // namespace test_inside
