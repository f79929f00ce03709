// Architecture references for qwen3, mistral (llama with a sliding window),
// gemma2, gemma3 and phi3 (LongRoPE 128k style): 16 greedy tokens and the top-20
// logits of every greedy step must match HF transformers (float32) within 1e-3,
// through the Engine on the CPU backend, on two kinds of file:
// - synthesized (tests/data/arch, tools/make_arch_refs.py): the small random model
//   is re-created here with the same synth code and seed as `glassbox-cli synth
//   --arch NAME --seed S`; transformers ran on the file's own tensors, the
//   converter's conventions undone by the script;
// - converted (tests/data/converted, tools/make_converted_refs.py): tiny files
//   written by llama.cpp's own convert_hf_to_gguf.py from transformers
//   checkpoints, the reference being transformers on the original checkpoint
//   (independent of Glassbox in file and in forward pass).
// Each case also checks that the variation it is about is really in play (the
// config says so, and turning it off changes the logits), so the test can fail.
#include <limits>
#include <algorithm>
#include <cstdio>
#include <map>
#include <filesystem>
#include <functional>

#include "cpu/weight_type.h"
#include "gb_test.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "core/sha256.h"
#include "runtime/inside.h"
#include "runtime/text_scorer.h"
#include "../tokenizer/tokenizer_test_support.h"
#include "arch_ref_support.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_arch_synth_refs {

namespace {

using nlohmann::json;

struct Loaded {
  std::shared_ptr<const gb::Model> model;
  std::shared_ptr<const gb::Tokenizer> tokenizer;
  json ref;
};

// Where a reference's file comes from.
enum class Source { Synth, Converted };

// Loads the model a reference was made from: synthesized again (synth) or the
// committed file (converted); either way its bytes must be those the reference
// names.
Loaded load(const std::string& arch_name, Source source, std::string& error) {
  Loaded out;
  const std::string dir = source == Source::Synth ? GLASSBOX_ARCH_REF_DIR : GLASSBOX_CONVERTED_REF_DIR;
  out.ref = gbtest::read_json(dir + "/" + arch_name + ".json");
  std::string path;
  const char* remake = nullptr;
  if (source == Source::Synth) {
    const gb::SyntheticArch* arch = gb::find_synthetic_arch(out.ref["arch"].get<std::string>());
    if (arch == nullptr) {
      error = "synth does not know arch " + arch_name;
      return out;
    }
    path = gbtest::temp_dir() + "/" + arch_name + ".gguf";
    if (auto st = gb::write_synthetic_arch_model(*arch, out.ref["seed"].get<uint64_t>(), path); !st) {
      error = st.error().message;
      return out;
    }
    remake = "tools/make_arch_refs.py";  // glassbox-cli synth runs the same code
  } else {
    path = dir + "/" + out.ref["file"].get<std::string>();
    remake = "tools/make_converted_refs.py";
  }
  auto sha = gb::sha256_file_hex(path);
  if (!sha || *sha != out.ref["model_sha256"].get<std::string>()) {
    error = path + ": differs from the file the reference was made from (sha256 " +
            (sha ? *sha : sha.error().message) + "); regenerate with " + remake;
    return out;
  }
  gb::LoadOptions options;
  options.context_length = out.ref["context_length"].get<int32_t>();
  auto model = gb::load_model(path, options);
  if (!model) {
    error = model.error().message;
    return out;
  }
  out.model = *model;
  auto tokenizer = gb::load_tokenizer(*out.model, "");
  if (!tokenizer) {
    error = tokenizer.error().message;
    return out;
  }
  out.tokenizer = *tokenizer;
  return out;
}

// Greedy tokens identical and every step's top-20 within tolerance.
void check_matches(const Loaded& l) {
  double worst = 0.0;  // largest |d logit| over every step's reference top-20
  for (const json& prompt : l.ref["prompts"]) {
    const std::string pname = prompt["name"].get<std::string>();
    const auto ids = gbtest::json_ids(prompt["ids"]);
    const auto want = gbtest::json_ids(prompt["greedy"]["ids"]);
    std::string error;
    const auto steps = archref::run_greedy(l.model, l.tokenizer, ids, static_cast<int>(want.size()), error);
    QVERIFY2(error.empty(), error.c_str());
    QCOMPARE(steps.size(), want.size());
    for (size_t k = 0; k < steps.size(); ++k) {
      QVERIFY2(steps[k].token == want[k], (pname + ": greedy token " + std::to_string(k) + " is " +
                                           std::to_string(steps[k].token) + ", want " + std::to_string(want[k]))
                                              .c_str());
      const std::string diff = archref::compare_top(steps[k].top, prompt["greedy"]["steps"][k]);
      QVERIFY2(diff.empty(), (pname + " step " + std::to_string(k) + ": " + diff).c_str());
      const json& step = prompt["greedy"]["steps"][k];
      for (size_t j = 0; j < step["top_ids"].size(); ++j)
        for (const auto& [id, logit] : steps[k].top)
          if (id == step["top_ids"][j].get<gb::TokenId>())
            worst = std::max(worst, std::abs(static_cast<double>(logit) - step["top_logits"][j].get<double>()));
    }
  }
  std::printf("%s (%s): %zu prompts match transformers; max |d logit| over the top-20 of every step %.2e\n",
              l.ref["arch"].get<std::string>().c_str(), l.ref.contains("file") ? "converted by llama.cpp" : "synth",
              l.ref["prompts"].size(), worst);
}

// With `change` applied to a copy of the model, the longest prompt's first
// greedy step must move by more than the tolerance: the feature is exercised.
void check_feature_matters(const Loaded& l, const char* what, const std::function<void(gb::Model&)>& change) {
  auto copy = std::make_shared<gb::Model>(*l.model);
  change(*copy);
  const json& prompt = l.ref["prompts"].back();
  std::string error;
  const auto steps = archref::run_greedy(copy, l.tokenizer, gbtest::json_ids(prompt["ids"]), 1, error);
  QVERIFY2(error.empty(), error.c_str());
  QVERIFY(!steps.empty());
  QVERIFY2(!archref::compare_top(steps[0].top, prompt["greedy"]["steps"][0]).empty(),
           (std::string("turning off ") + what + " left the logits unchanged: the reference does not exercise it").c_str());
}

#define LOAD_OR_FAIL(var, name, source)                   \
  std::string var##_error;                                \
  const Loaded var = load(name, source, var##_error);     \
  QVERIFY2(var##_error.empty(), var##_error.c_str())

size_t longest_prompt(const json& ref) {
  size_t n = 0;
  for (const json& p : ref["prompts"]) n = std::max(n, p["ids"].size());
  return n;
}

void check_qwen3(Source source) {
  LOAD_OR_FAIL(l, "qwen3", source);
  const gb::ModelConfig& c = l.model->config;
  QVERIFY(c.qk_norm && c.rope_style == gb::RopeStyle::NeoX && !c.qkv_bias);
  QVERIFY(c.head_dim * c.num_heads != c.dim);  // explicit head_dim (attention.key_length)
  QVERIFY(c.num_heads > c.num_kv_heads);
  check_matches(l);
  check_feature_matters(l, "the q/k norms", [](gb::Model& m) {
    for (gb::LayerWeights& w : m.weights.layers) w.q_norm = w.k_norm = gb::TensorView{};
  });
}

void check_mistral(Source source) {
  LOAD_OR_FAIL(l, "mistral", source);
  const gb::ModelConfig& c = l.model->config;
  QCOMPARE(c.architecture, std::string("llama"));
  QVERIFY(c.sliding_window > 0 && static_cast<size_t>(c.sliding_window) < longest_prompt(l.ref));
  QVERIFY(c.is_sliding(0) && c.is_sliding(c.num_layers - 1));
  check_matches(l);
  check_feature_matters(l, "the sliding window", [](gb::Model& m) { m.config.sliding_window = 0; });
}

void check_gemma2(Source source) {
  LOAD_OR_FAIL(l, "gemma2", source);
  const gb::ModelConfig& c = l.model->config;
  QVERIFY(c.attn_softcap > 0.0f && c.final_softcap > 0.0f);
  QVERIFY(c.sliding_window > 0 && static_cast<size_t>(c.sliding_window) < longest_prompt(l.ref));
  QVERIFY(c.is_sliding(0) && !c.is_sliding(1) && c.is_sliding(2));  // interleaved
  QVERIFY(c.num_heads / c.num_kv_heads > 1);                         // GQA
  QVERIFY(c.post_norms && c.activation == gb::FfnActivation::GeluTanh && c.embed_scale > 1.0f);
  check_matches(l);
  check_feature_matters(l, "the attention soft-cap", [](gb::Model& m) { m.config.attn_softcap = 0.0f; });
  check_feature_matters(l, "the final soft-cap", [](gb::Model& m) { m.config.final_softcap = 0.0f; });
  check_feature_matters(l, "the sliding window", [](gb::Model& m) { m.config.sliding_window = 0; });
}

void check_gemma3(Source source) {
  LOAD_OR_FAIL(l, "gemma3", source);
  const gb::ModelConfig& c = l.model->config;
  QVERIFY(c.qk_norm && c.post_norms && c.num_layers >= 6);
  for (int32_t i = 0; i < 5; ++i) QVERIFY(c.is_sliding(i));
  QVERIFY(!c.is_sliding(5));
  QVERIFY(c.rope_freq_base_swa == 10000.0f && c.rope_freq_base != c.rope_freq_base_swa && c.rope_freq_scale < 1.0f);
  check_matches(l);
  check_feature_matters(l, "the local RoPE base", [](gb::Model& m) { m.config.rope_freq_base_swa = 0.0f; });
  check_feature_matters(l, "the sliding window", [](gb::Model& m) { m.config.sliding_window = 0; });
}

void check_phi3(Source source) {
  LOAD_OR_FAIL(l, "phi3", source);
  const gb::ModelConfig& c = l.model->config;
  QVERIFY(c.fused_qkv && c.fused_gate_up && c.rope_freq_factors && c.rope_long_factors);
  QVERIFY(c.rope_attn_factor > 1.0f);
  check_matches(l);
  check_feature_matters(l, "the LongRoPE attention factor", [](gb::Model& m) { m.config.rope_attn_factor = 1.0f; });
}

// The routing of every position the reference ran (each prompt and its greedy
// tokens but the last), through Engine::inspect: in every layer the same
// experts, best first, as transformers' router chose, with weights summing to 1.
void check_routing(const Loaded& l) {
  const std::unique_ptr<gb::Engine> made = archref::make_ref_engine(l.model, l.tokenizer, 1);
  gb::Engine& engine = *made;
  QVERIFY(engine.start().ok());
  gb::InsideOptions options;
  options.attention = options.lens = false;
  options.top_k = 1;
  int checked = 0;
  for (const json& prompt : l.ref["prompts"]) {
    std::vector<gb::TokenId> seq = gbtest::json_ids(prompt["ids"]);
    const auto greedy = gbtest::json_ids(prompt["greedy"]["ids"]);
    seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
    const json& want = prompt["routing"]["layers"];  // [layer][position][k]
    for (int32_t p = 0; p < static_cast<int32_t>(seq.size()); ++p) {
      auto report = engine.inspect(seq, p, options);
      QVERIFY2(report.ok(), report.ok() ? "" : report.error().message.c_str());
      QCOMPARE(report->layers.size(), want.size());
      for (size_t layer = 0; layer < want.size(); ++layer) {
        const gb::InsideLayer& got = report->layers[layer];
        const auto expected = want[layer][static_cast<size_t>(p)].get<std::vector<int32_t>>();
        QVERIFY2(got.experts == expected, (prompt["name"].get<std::string>() + " position " + std::to_string(p) +
                                           " layer " + std::to_string(layer) + ": experts differ from transformers'")
                                              .c_str());
        float sum = 0.0f;
        for (size_t j = 0; j < got.expert_weights.size(); ++j) {
          sum += got.expert_weights[j];
          if (j > 0) QVERIFY(got.expert_weights[j] <= got.expert_weights[j - 1]);
        }
        QVERIFY(std::abs(sum - 1.0f) < 1e-5f);
        ++checked;
      }
    }
  }
  std::printf("%s: the experts of %d (position, layer) pairs match transformers' routing\n",
              l.ref["arch"].get<std::string>().c_str(), checked);
  // The same routing for scored tokens (teacher forcing in chunks of 7): token
  // k was scored by the pass over position k - 1.
  for (const json& prompt : l.ref["prompts"]) {
    std::vector<gb::TokenId> seq = gbtest::json_ids(prompt["ids"]);
    const auto greedy = gbtest::json_ids(prompt["greedy"]["ids"]);
    seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
    auto backend = gb::make_cpu_backend(l.model);
    gb::ScoreOptions score_options;
    score_options.chunk = 7;
    score_options.k_type = score_options.v_type = gb::WeightType::F32;
    auto score = gb::score_tokens(*l.model, *backend, nullptr, nullptr, seq, score_options);
    QVERIFY2(score.ok(), score.ok() ? "" : score.error().message.c_str());
    const json& want = prompt["routing"]["layers"];
    const auto k = prompt["routing"]["experts_per_token"].get<size_t>();
    for (const gb::TokenScore& s : score->tokens) {
      QVERIFY(s.routing.has_value());
      for (size_t layer = 0; layer < want.size(); ++layer) {
        const auto expected = want[layer][static_cast<size_t>(s.position) - 1].get<std::vector<int32_t>>();
        const std::vector<int32_t> got(s.routing->experts.begin() + static_cast<ptrdiff_t>(layer * k),
                                       s.routing->experts.begin() + static_cast<ptrdiff_t>((layer + 1) * k));
        QVERIFY2(got == expected, ("scored position " + std::to_string(s.position) + " layer " +
                                   std::to_string(layer) + ": experts differ from transformers'").c_str());
      }
    }
  }
  // The same routing in the records of generated tokens: greedy token i was
  // chosen by the pass over position prompt length - 1 + i.
  for (const json& prompt : l.ref["prompts"]) {
    const auto ids = gbtest::json_ids(prompt["ids"]);
    std::string error;
    const auto steps = archref::run_greedy(l.model, l.tokenizer, ids, 4, error);
    QVERIFY2(error.empty(), error.c_str());
    QCOMPARE(steps.size(), size_t{4});
    const json& want = prompt["routing"]["layers"];
    const int32_t k = prompt["routing"]["experts_per_token"].get<int32_t>();
    for (size_t i = 0; i < steps.size(); ++i) {
      QVERIFY2(steps[i].routing.has_value(), "a generated token of a mixture has no routing in its record");
      const gb::RoutingRecord& r = *steps[i].routing;
      QCOMPARE(r.experts_per_token, k);
      QCOMPARE(r.experts.size(), want.size() * static_cast<size_t>(k));
      for (size_t layer = 0; layer < want.size(); ++layer) {
        const auto expected = want[layer][ids.size() - 1 + i].get<std::vector<int32_t>>();
        const std::vector<int32_t> got(r.experts.begin() + static_cast<ptrdiff_t>(layer * k),
                                       r.experts.begin() + static_cast<ptrdiff_t>((layer + 1) * k));
        QVERIFY2(got == expected, ("generated token " + std::to_string(i) + " layer " + std::to_string(layer) +
                                   ": the record's experts differ from transformers'").c_str());
      }
    }
  }
}

// The reference's prompts decoded together in one engine (continuous
// batching: each step's rows of all three share the experts' dispatches) give
// each prompt exactly what it gets alone: tokens, logits bit for bit, routing.
void check_batched_equals_alone(const Loaded& l) {
  const std::unique_ptr<gb::Engine> made = archref::make_ref_engine(l.model, l.tokenizer, 4);
  gb::Engine& engine = *made;
  QVERIFY(engine.start().ok());
  std::vector<gb::RequestId> ids;
  for (const json& prompt : l.ref["prompts"]) {
    gb::GenerationRequest request;
    request.prompt_ids = gbtest::json_ids(prompt["ids"]);
    request.sampling.temperature = 0.0f;
    request.sampling.max_tokens = 8;
    request.sampling.top_n_record = 20;
    request.ignore_eos = true;
    auto id = engine.submit(request);
    QVERIFY(id.ok());
    ids.push_back(*id);
  }
  QVERIFY(engine.run_until_idle().ok());
  std::map<gb::RequestId, std::vector<const gb::TokenSampledEvent*>> together;
  const std::vector<gb::TraceEvent> events = engine.drain_events();
  for (const gb::TraceEvent& e : events)
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) together[t->request].push_back(t);
  for (size_t p = 0; p < ids.size(); ++p) {
    std::string error;
    const auto alone = archref::run_greedy(l.model, l.tokenizer, gbtest::json_ids(l.ref["prompts"][p]["ids"]), 8, error);
    QVERIFY2(error.empty(), error.c_str());
    const auto& batched = together[ids[p]];
    QCOMPARE(batched.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      QCOMPARE(batched[i]->token, alone[i].token);
      QCOMPARE(batched[i]->record.top.size(), alone[i].top.size());
      for (size_t c = 0; c < alone[i].top.size(); ++c) {
        QCOMPARE(batched[i]->record.top[c].id, alone[i].top[c].first);
        QCOMPARE(batched[i]->record.top[c].logit, alone[i].top[c].second);  // the same bits
      }
      QVERIFY(batched[i]->record.routing.has_value() && alone[i].routing.has_value());
      QVERIFY(batched[i]->record.routing->experts == alone[i].routing->experts);
    }
  }
  int steps_with_several = 0;  // the batching really happened: steps that decoded more than one row
  for (const gb::TraceEvent& e : events)
    if (const auto* st = std::get_if<gb::StepEvent>(&e.body)) steps_with_several += st->num_seqs > 1 ? 1 : 0;
  QVERIFY(steps_with_several > 0);
  std::printf("%s: %zu prompts decoded together equal each alone (%d batched steps)\n",
              l.ref["arch"].get<std::string>().c_str(), ids.size(), steps_with_several);
}

// A long prompt's prefill (its experts' dispatches split across threads by
// rows x routed tokens, and the gather, activation and weighted sum split by
// rows) gives the same bits on 1 and 3 threads: logits and routing of the
// first tokens.
void check_threads_agree(const Loaded& l) {
  std::vector<int32_t> prompt;
  while (prompt.size() < 200)
    for (const json& p : l.ref["prompts"])
      for (const int32_t id : gbtest::json_ids(p["ids"])) prompt.push_back(id);
  prompt.resize(200);
  std::vector<std::vector<const gb::TokenSampledEvent*>> runs;
  std::vector<std::vector<gb::TraceEvent>> keep;
  for (const int32_t threads : {1, 3}) {
    const std::unique_ptr<gb::Engine> engine = archref::make_ref_engine(l.model, l.tokenizer, 1, threads);
    QVERIFY(engine->start().ok());
    gb::GenerationRequest request;
    request.prompt_ids = prompt;
    request.sampling.temperature = 0.0f;
    request.sampling.max_tokens = 3;
    request.sampling.top_n_record = 20;
    request.ignore_eos = true;
    QVERIFY(engine->submit(request).ok());
    QVERIFY(engine->run_until_idle().ok());
    keep.push_back(engine->drain_events());
    runs.emplace_back();
    for (const gb::TraceEvent& e : keep.back())
      if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) runs.back().push_back(t);
  }
  QCOMPARE(runs[0].size(), size_t{3});
  QCOMPARE(runs[1].size(), runs[0].size());
  for (size_t i = 0; i < runs[0].size(); ++i) {
    const gb::TokenRecord& a = runs[0][i]->record;
    const gb::TokenRecord& b = runs[1][i]->record;
    QCOMPARE(runs[1][i]->token, runs[0][i]->token);
    QCOMPARE(b.top.size(), a.top.size());
    for (size_t c = 0; c < a.top.size(); ++c) {
      QCOMPARE(b.top[c].id, a.top[c].id);
      QCOMPARE(b.top[c].logit, a.top[c].logit);  // the same bits
    }
    QVERIFY(a.routing.has_value() && b.routing.has_value());
    QVERIFY(a.routing->experts == b.routing->experts && a.routing->weights == b.routing->weights);
  }
}

// A mixture of experts: the counts as the reference's config says, and using
// one expert per token instead of the file's count moves the logits.
void check_moe(const Loaded& l, int32_t experts, int32_t used, int32_t width) {
  const gb::ModelConfig& c = l.model->config;
  QVERIFY(c.is_moe());
  QCOMPARE(c.num_experts, experts);
  QCOMPARE(c.num_experts_used, used);
  QCOMPARE(c.expert_hidden_dim, width);
  for (const gb::LayerWeights& w : l.model->weights.layers)
    QVERIFY(w.router.data != nullptr && w.gate_exps.rows == int64_t{experts} * width && w.w_up.data == nullptr);
  check_matches(l);
  check_routing(l);
  check_batched_equals_alone(l);
  check_threads_agree(l);
  check_feature_matters(l, "the second expert per token", [](gb::Model& m) { m.config.num_experts_used = 1; });
}

}  // namespace

GB_TEST(qwen3_matches_transformers) { check_qwen3(Source::Synth); }
GB_TEST(mistral_sliding_window_matches_transformers) { check_mistral(Source::Synth); }
GB_TEST(gemma2_matches_transformers) { check_gemma2(Source::Synth); }
GB_TEST(gemma3_matches_transformers) { check_gemma3(Source::Synth); }
GB_TEST(phi3_longrope_matches_transformers) { check_phi3(Source::Synth); }

// The same checks on files written by llama.cpp's converter.
GB_TEST(converted_qwen3_matches_transformers) { check_qwen3(Source::Converted); }
GB_TEST(converted_gemma2_matches_transformers) { check_gemma2(Source::Converted); }
GB_TEST(converted_gemma3_matches_transformers) { check_gemma3(Source::Converted); }
GB_TEST(converted_phi3_longrope_matches_transformers) { check_phi3(Source::Converted); }

// Mixtures of experts (converted only): Qwen3-MoE (8 experts of width 32, 2 per
// token, Qwen3's attention) and Mixtral (written as `llama`: 4 experts of width
// 48, 2 per token).
GB_TEST(converted_qwen3moe_matches_transformers) {
  LOAD_OR_FAIL(l, "qwen3moe", Source::Converted);
  QVERIFY(l.model->config.qk_norm && l.model->config.architecture == "qwen3moe");
  check_moe(l, 8, 2, 32);
}
GB_TEST(converted_mixtral_matches_transformers) {
  LOAD_OR_FAIL(l, "mixtral", Source::Converted);
  QCOMPARE(l.model->config.architecture, std::string("llama"));
  check_moe(l, 4, 2, 48);
}

// gpt-oss (converted only): 4 layers alternating a 6-token window and full
// attention, a sink logit per head, q/k/v/o biases, 8 experts of width 32 with
// biases, 2 per token, the clamped SwiGLU, YaRN x4 (original context 16, not
// truncated); the 40-token prompt runs past the original context and the window.
GB_TEST(converted_gptoss_matches_transformers) {
  LOAD_OR_FAIL(l, "gpt-oss", Source::Converted);
  const gb::ModelConfig& c = l.model->config;
  QCOMPARE(c.architecture, std::string("gpt-oss"));
  QVERIFY(c.attn_sinks && c.out_bias && c.qkv_bias && c.moe_biases && c.activation == gb::FfnActivation::SwigluOai);
  QVERIFY(c.rope_yarn_factor == 4.0f && !c.rope_yarn_truncate && c.rope_orig_context == 16);
  QVERIFY(c.sliding_window == 6 && c.is_sliding(0) && !c.is_sliding(1) && c.is_sliding(2) && !c.is_sliding(3));
  QVERIFY(longest_prompt(l.ref) > static_cast<size_t>(c.rope_orig_context));
  check_moe(l, 8, 2, 32);
  check_feature_matters(l, "the attention sinks", [](gb::Model& m) { m.config.attn_sinks = false; });
  check_feature_matters(l, "the output bias", [](gb::Model& m) { m.config.out_bias = false; });
  check_feature_matters(l, "the experts' biases", [](gb::Model& m) {
    for (gb::LayerWeights& w : m.weights.layers) w.gate_exps_bias = w.up_exps_bias = w.down_exps_bias = gb::TensorView{};
  });
  check_feature_matters(l, "the clamped SwiGLU (plain SiLU instead)", [](gb::Model& m) { m.config.activation = gb::FfnActivation::SiLU; });
  check_feature_matters(l, "YaRN", [](gb::Model& m) {
    m.config.rope_freq_factors = false;
    m.config.rope_attn_factor = 1.0f;
  });
}

// `m` with every quantized matrix as float32 (each row through the weight-type
// table's dequantization, which test_dequantize and test_mxfp4 hold bit for bit
// to gguf-py's): what the quantized file means, run without int8 activations.
std::shared_ptr<gb::Model> float_copy(const gb::Model& m) {
  auto copy = std::make_shared<gb::Model>(m);
  const auto to_f32 = [&](gb::TensorView& t) {
    if (t.data == nullptr || t.dtype == gb::WeightType::F32) return;
    std::vector<std::byte> bytes(static_cast<size_t>(t.num_elements()) * sizeof(float));
    auto* out = reinterpret_cast<float*>(bytes.data());
    for (int64_t r = 0; r < t.rows; ++r) gb::kernels::weight_traits(t.dtype).dequantize_row(t.row(r), out + r * t.cols, t.cols);
    copy->owned_buffers.push_back(std::move(bytes));
    t.data = copy->owned_buffers.back().data();
    t.dtype = gb::WeightType::F32;
  };
  to_f32(copy->weights.token_embedding);
  if (copy->config.tied_classifier) copy->weights.classifier = copy->weights.token_embedding;
  else to_f32(copy->weights.classifier);
  for (gb::LayerWeights& lw : copy->weights.layers)
    for (const gb::TensorView* t : lw.all()) to_f32(*const_cast<gb::TensorView*>(t));
  return copy;
}

// Largest |d logit| of `ours` (first step's top-20) over a reference record's ids.
double worst_over(const std::vector<std::pair<gb::TokenId, float>>& ours, const json& record) {
  double worst = 0.0;
  for (size_t j = 0; j < record["top_ids"].size(); ++j) {
    const auto id = record["top_ids"][j].get<gb::TokenId>();
    const auto it = std::find_if(ours.begin(), ours.end(), [&](const auto& p) { return p.first == id; });
    if (it == ours.end()) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(static_cast<double>(it->second) - record["top_logits"][j].get<double>()));
  }
  return worst;
}

// The gpt-oss quantized by llama-quantize MXFP4_MOE (experts MXFP4, the other
// matrices Q8_0), held to llama.cpp's own error on it: Glassbox's logits on the
// file move from those of its float32 copy (float_copy) by no more than
// llama.cpp's move between the file and a float32 copy dequantized by gguf-py
// (both engines quantize activations to 8 bits per 32 values); and on the
// float32 copy both engines agree (the same model run two ways: llama.cpp's
// gpt-oss graph against Glassbox's recipe, weights exact). First step of each
// prompt, top-20 of the float32 run.
GB_TEST(converted_gptoss_mxfp4_within_llama_cpp_error) {
  const std::string dir = GLASSBOX_CONVERTED_REF_DIR;
  const json ref = gbtest::read_json(dir + "/gpt-oss-mxfp4_moe.json");
  const std::string path = dir + "/" + ref["file"].get<std::string>();
  auto sha = gb::sha256_file_hex(path);
  QVERIFY2(sha && *sha == ref["model_sha256"].get<std::string>(), "regenerate with tools/make_converted_refs.py");
  gb::LoadOptions options;
  options.context_length = ref["context_length"].get<int32_t>();
  auto loaded = gb::load_model(path, options);
  QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
  const std::shared_ptr<const gb::Model> quantized = *loaded;
  QCOMPARE(quantized->weights.layers[0].gate_exps.dtype, gb::WeightType::MXFP4);
  QCOMPARE(quantized->weights.layers[0].wq.dtype, gb::WeightType::Q8_0);
  const std::shared_ptr<const gb::Model> floats = float_copy(*quantized);
  auto tokenizer = gb::load_tokenizer(*quantized, "");
  QVERIFY(tokenizer.ok());
  const double bar = ref["llama_cpp_quantization_error"].get<double>();
  double ours = 0.0, float_agreement = 0.0;
  for (const json& p : ref["prompts"]) {
    const auto ids = gbtest::json_ids(p["ids"]);
    std::string error;
    // Every logit of the quantized run (its top-20 ranks may differ from the float run's).
    const auto q = archref::run_greedy(quantized, *tokenizer, ids, 1, error, quantized->config.vocab_size);
    QVERIFY2(error.empty(), error.c_str());
    const auto f = archref::run_greedy(floats, *tokenizer, ids, 1, error);
    QVERIFY2(error.empty(), error.c_str());
    QVERIFY(!q.empty() && !f.empty());
    float_agreement = std::max(float_agreement, worst_over(f[0].top, p["llama_cpp_f32"]));
    // Our quantization error over our float run's top-20.
    json own;
    for (const auto& [id, logit] : f[0].top) {
      own["top_ids"].push_back(id);
      own["top_logits"].push_back(logit);
    }
    ours = std::max(ours, worst_over(q[0].top, own));
  }
  std::printf("gpt-oss MXFP4_MOE: quantized vs float32, Glassbox %.3g, llama.cpp %.3g; float32 copies agree to %.2e\n",
              ours, bar, float_agreement);
  QVERIFY2(float_agreement <= archref::kLogitTolerance, "the float32 copy's logits differ from llama.cpp's");
  QVERIFY(bar > 0.1);  // the quantization really moves the logits
  QVERIFY2(ours <= 1.25 * bar + archref::kLogitTolerance, "Glassbox's quantization error exceeds llama.cpp's");
  QVERIFY(ours > 0.0);  // the quantized weights were used
}

// The short factors are chosen when the context stays within the original one.
GB_TEST(phi3_short_factors_within_original_context) {
  const gb::SyntheticArch* arch = gb::find_synthetic_arch("phi3");
  QVERIFY(arch != nullptr);
  const std::string path = gbtest::temp_dir() + "/phi3-short.gguf";
  QVERIFY(gb::write_synthetic_arch_model(*arch, 7, path).ok());
  gb::LoadOptions options;
  options.context_length = arch->rope_orig_context;
  auto model = gb::load_model(path, options);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  const gb::Model& m = **model;
  QVERIFY(!m.config.rope_long_factors);
  const auto* f = static_cast<const float*>(m.weights.rope_freqs.data);
  const auto want = gb::synthetic_rope_factors(m.config.rope_dim / 2, false);
  for (size_t i = 0; i < want.size(); ++i) QCOMPARE(f[i], want[i]);
}

}  // namespace test_arch_synth_refs
