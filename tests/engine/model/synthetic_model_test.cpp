// Synthetic models: write, load, check the config against the named shape and
// the weight statistics against the intended initialisation (matrices with
// standard deviation 0.02, norms 1), determinism under a seed, F16 = rounded
// F32 for one seed, and a vocabulary a BPE tokenizer can use.
#include <cmath>
#include <cstring>
#include <set>

#include "cpu/convert.h"
#include "gb_test.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "model_test_files.h"

namespace {

std::string synth(const std::string& name, gb::WeightType dtype, uint64_t seed) {
  gb::SyntheticSpec spec{*gb::find_synthetic_shape("stories260K"), dtype, seed};
  const std::string path = gbtest::temp_dir() + "/" + name;
  gb::Status st = gb::write_synthetic_model(spec, path);
  GB_CHECK_MSG(st.ok(), st.ok() ? nullptr : st.error().message.c_str());
  return path;
}

}  // namespace

GB_TEST(named_shapes_match_the_brief) {
  auto s = gb::find_synthetic_shape("tinyllama-1.1b");
  QVERIFY(s.has_value());
  QCOMPARE(s->dim, 2048);
  QCOMPARE(s->hidden_dim, 5632);
  QCOMPARE(s->num_layers, 22);
  QCOMPARE(s->num_kv_heads, 4);
  QVERIFY(!s->tied_classifier);
  QVERIFY(gb::find_synthetic_shape("stories15M").has_value());
  QVERIFY(gb::find_synthetic_shape("stories42M").has_value());
  QVERIFY(gb::find_synthetic_shape("stories110M").has_value());
  QVERIFY(!gb::find_synthetic_shape("gpt-5").has_value());
}

// The Qwen3-30B-A3B shape's mixture written small (the named shape's
// architecture and experts, narrower widths): it loads as a qwen3moe with its
// experts, and a token reads only its experts' share of the expert tensors.
GB_TEST(moe_shape_loads_as_a_mixture) {
  auto named = gb::find_synthetic_shape("qwen3-30b-a3b");
  QVERIFY(named.has_value());
  QCOMPARE(named->experts, 128);
  QCOMPARE(named->experts_used, 8);
  QCOMPARE(named->expert_hidden_dim, 768);
  gb::SyntheticShape small = *named;
  small.dim = 64;
  small.num_heads = 4;
  small.num_kv_heads = 2;
  small.head_dim = 32;
  small.num_layers = 2;
  small.vocab_size = 512;
  small.context_length = 256;
  small.experts = 8;
  small.experts_used = 2;
  small.expert_hidden_dim = 64;
  const std::string path = gbtest::temp_dir() + "/synth-moe.gguf";
  QVERIFY(gb::write_synthetic_model({small, gb::WeightType::Q8_0, 3}, path).ok());
  auto m = gb::load_model(path);
  QVERIFY2(m.ok(), m.ok() ? "" : m.error().message.c_str());
  const gb::Model& model = **m;
  QCOMPARE(model.config.architecture, std::string("qwen3moe"));
  QVERIFY(model.config.is_moe() && model.config.qk_norm);
  QCOMPARE(model.config.num_experts, 8);
  QCOMPARE(model.config.expert_hidden_dim, 64);
  const gb::LayerWeights& l = model.weights.layers[0];
  QCOMPARE(l.gate_exps.rows, int64_t{8 * 64});
  QCOMPARE(l.down_exps.rows, int64_t{8 * 64});
  QVERIFY(l.gate_exps.dtype == gb::WeightType::Q8_0 && l.router.dtype == gb::WeightType::F32);
  const auto expert_values = static_cast<uint64_t>(2 * 3 * 8 * 64 * 64);  // layers x stacks x experts x rows x cols
  QCOMPARE(model.active_parameters(), model.num_parameters() - expert_values + expert_values / 8 * 2);
  // Per token: all of every other tensor, 2 of the 8 experts' rows.
  const size_t experts_bytes = 2 * (l.gate_exps.num_bytes() + l.up_exps.num_bytes() + l.down_exps.num_bytes());
  QCOMPARE(model.weight_bytes() - model.weight_bytes_per_token() + model.weights.token_embedding.row_bytes() -
               model.weights.token_embedding.num_bytes(),
           experts_bytes - experts_bytes / 8 * 2);
}

GB_TEST(synthetic_f32_round_trips_with_sane_weights) {
  auto m = gb::load_model(synth("synth-f32.gguf", gb::WeightType::F32, 7));
  QVERIFY2(m.ok(), m.ok() ? "" : m.error().message.c_str());
  const gb::ModelConfig& c = m.value()->config;
  QCOMPARE(c.dim, 64);
  QCOMPARE(c.hidden_dim, 172);
  QCOMPARE(c.num_layers, 5);
  QCOMPARE(c.num_heads, 8);
  QCOMPARE(c.num_kv_heads, 4);
  QCOMPARE(c.vocab_size, 512);
  QCOMPARE(c.context_length, 512);
  QVERIFY(c.tied_classifier);
  QCOMPARE(m.value()->num_parameters(), uint64_t{260032});  // same shape as the real stories260K
  const gb::TensorView& wq = m.value()->weights.layers[2].wq;
  const auto* x = static_cast<const float*>(wq.data);
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < wq.num_elements(); ++i) {
    QVERIFY(std::isfinite(x[i]));
    sum += x[i];
    sum_sq += double{x[i]} * x[i];
  }
  const double n = static_cast<double>(wq.num_elements());
  const double mean = sum / n, stddev = std::sqrt(sum_sq / n - mean * mean);
  QVERIFY2(std::abs(mean) < 0.002, std::to_string(mean).c_str());            // 4096 draws: se 3e-4
  QVERIFY2(std::abs(stddev - 0.02) < 0.001, std::to_string(stddev).c_str());
  const auto* norm = static_cast<const float*>(m.value()->weights.output_norm.data);
  for (int i = 0; i < 64; ++i) QCOMPARE(norm[i], 1.0f);
}

GB_TEST(synthetic_is_deterministic_and_f16_is_rounded_f32) {
  const auto a = gbtest::read_bytes(synth("synth-a.gguf", gb::WeightType::F32, 42));
  const auto b = gbtest::read_bytes(synth("synth-b.gguf", gb::WeightType::F32, 42));
  const auto c = gbtest::read_bytes(synth("synth-c.gguf", gb::WeightType::F32, 43));
  QVERIFY(a == b);
  QVERIFY(a != c);
  auto f32 = gb::load_model(gbtest::temp_dir() + "/synth-a.gguf");
  auto f16 = gb::load_model(synth("synth-h.gguf", gb::WeightType::F16, 42));
  QVERIFY(f32.ok() && f16.ok());
  const gb::TensorView& w32 = f32.value()->weights.layers[0].w_down;
  const gb::TensorView& w16 = f16.value()->weights.layers[0].w_down;
  QVERIFY(w16.dtype == gb::WeightType::F16);
  const auto* x = static_cast<const float*>(w32.data);
  const auto* h = static_cast<const uint16_t*>(w16.data);
  for (int64_t i = 0; i < w32.num_elements(); ++i)
    if (gb::kernels::f32_to_f16(x[i]) != h[i]) QFAIL("f16 tensor is not the rounded f32 tensor");
}

GB_TEST(synthetic_vocabulary_is_a_valid_bpe_vocabulary) {
  auto m = gb::load_model(synth("synth-vocab.gguf", gb::WeightType::F32, 1));
  QVERIFY(m.ok());
  QVERIFY(m.value()->vocabulary.has_value());
  const gb::Vocabulary& v = *m.value()->vocabulary;
  QCOMPARE(v.tokens.size(), size_t{512});
  QCOMPARE(v.tokens[0], std::string("<unk>"));
  QCOMPARE(v.tokens[1], std::string("<s>"));
  QCOMPARE(v.tokens[3 + 0x41], std::string("<0x41>"));
  QCOMPARE(v.token_types[3 + 0xFF], 6);
  QCOMPARE(v.bos_id, 1);
  QCOMPARE(v.eos_id, 2);
  std::set<std::string> seen(v.tokens.begin(), v.tokens.end());
  QCOMPARE(seen.size(), v.tokens.size());  // all distinct
  for (size_t i = 260; i < v.tokens.size(); ++i) {
    QVERIFY(v.scores[i] < v.scores[i - 1]);
    // Every multi-character piece is the merge of two pieces already present.
    const std::string& p = v.tokens[i];
    bool mergeable = p.size() == 1 || p == "\xE2\x96\x81";
    for (size_t cut = 1; cut < p.size() && !mergeable; ++cut)
      mergeable = seen.count(p.substr(0, cut)) && seen.count(p.substr(cut));
    QVERIFY2(mergeable, p.c_str());
  }
  const gb::Vocabulary big = gb::make_synthetic_vocabulary(32000);
  QCOMPARE(std::set<std::string>(big.tokens.begin(), big.tokens.end()).size(), size_t{32000});
}
