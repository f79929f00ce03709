// Loading the shared model files. Expected shapes come from models/README.md
// (stories260K: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads, vocab 512,
// 260,032 parameters; llama-2-tiny-random: dim 8, ffn 32, 1 block, 2 heads,
// vocab 32000, untied, F16 matrices). The README states the three stories260K
// files hold bit-identical tensors and the F16 file holds round-to-nearest-even
// fp16 of them; we compare every tensor against that.
#include <algorithm>
#include <cstring>

#include "cpu/convert.h"
#include "gb_test.h"
#include "model/model.h"

namespace {

std::shared_ptr<const gb::Model> load_or_fail(const std::string& path, const gb::LoadOptions& options = {}) {
  auto m = gb::load_model(path, options);
  if (!m.ok()) {
    QTest::qFail(m.error().message.c_str(), __FILE__, __LINE__);
    return nullptr;
  }
  return m.value();
}

void expect_stories260k_config(const gb::ModelConfig& c) {
  QCOMPARE(c.architecture, std::string("llama"));
  QCOMPARE(c.dim, 64);
  QCOMPARE(c.hidden_dim, 172);
  QCOMPARE(c.num_layers, 5);
  QCOMPARE(c.num_heads, 8);
  QCOMPARE(c.num_kv_heads, 4);
  QCOMPARE(c.head_dim, 8);
  QCOMPARE(c.rope_dim, 8);
  QCOMPARE(c.vocab_size, 512);
  QVERIFY(c.tied_classifier);
  QCOMPARE(c.rms_eps, 1e-5f);
  QCOMPARE(c.rope_freq_base, 10000.0f);
}

// Every tensor of `a` and `b` has the same name, shape, type and bytes.
void expect_identical_tensors(const gb::Model& a, const gb::Model& b) {
  auto ta = a.all_tensors(), tb = b.all_tensors();
  QCOMPARE(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    QCOMPARE(ta[i]->name, tb[i]->name);
    QCOMPARE(ta[i]->rows, tb[i]->rows);
    QCOMPARE(ta[i]->cols, tb[i]->cols);
    QVERIFY(ta[i]->dtype == tb[i]->dtype);
    QVERIFY2(std::memcmp(ta[i]->data, tb[i]->data, ta[i]->num_bytes()) == 0, ta[i]->name.c_str());
  }
}

}  // namespace

GB_TEST(stories260k_three_formats_load_bit_identical) {
  GB_REQUIRE_SHARED(legacy_path, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(v1_path, "models/stories260K/stories260K_v1.bin");
  GB_REQUIRE_SHARED(gguf_path, "models/stories260K/stories260K.gguf");
  auto legacy = load_or_fail(legacy_path);
  auto v1 = load_or_fail(v1_path);
  auto gguf = load_or_fail(gguf_path);
  if (!legacy || !v1 || !gguf) return;
  QVERIFY(legacy->format == gb::ModelFormat::Llama2cLegacy);
  QVERIFY(v1->format == gb::ModelFormat::Llama2cV1);
  QVERIFY(gguf->format == gb::ModelFormat::Gguf);
  expect_stories260k_config(legacy->config);
  expect_stories260k_config(v1->config);
  expect_stories260k_config(gguf->config);
  QCOMPARE(legacy->config.context_length, 512);
  QCOMPARE(v1->config.context_length, 512);
  QCOMPARE(gguf->config.context_length, 128);  // the converter's default, see README
  expect_identical_tensors(*legacy, *v1);
  expect_identical_tensors(*legacy, *gguf);
  QCOMPARE(legacy->num_parameters(), uint64_t{260032});
  QCOMPARE(gguf->num_parameters(), uint64_t{260032});
  QCOMPARE(legacy->weight_bytes(), size_t{260032 * 4});
  QVERIFY(!legacy->vocabulary.has_value());
  QVERIFY(gguf->vocabulary.has_value());
  QCOMPARE(gguf->vocabulary->tokens.size(), size_t{512});
  // One embedding row (64 floats) is read instead of the whole table; the tied
  // classifier (512 x 64) is read in full.
  QCOMPARE(legacy->weight_bytes_per_token(), size_t{(260032 - 512 * 64 + 64 + 512 * 64) * 4});
}

GB_TEST(gguf_context_override_is_honoured) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
  auto m = load_or_fail(path, gb::LoadOptions{.context_length = 512});
  if (!m) return;
  QCOMPARE(m->config.context_length, 512);
  auto bad = gb::load_model(path, gb::LoadOptions{.context_length = -3});
  QVERIFY(!bad.ok());
  QVERIFY(bad.error().message.find("context length") != std::string::npos);
}

GB_TEST(f16_gguf_loads_f16_matrices_equal_to_rounded_f32) {
  GB_REQUIRE_SHARED(f32_path, "models/stories260K/stories260K.gguf");
  GB_REQUIRE_SHARED(f16_path, "models/stories260K/stories260K-F16.gguf");
  auto f32 = load_or_fail(f32_path);
  auto f16 = load_or_fail(f16_path);
  if (!f32 || !f16) return;
  expect_stories260k_config(f16->config);
  auto ta = f32->all_tensors(), tb = f16->all_tensors();
  QCOMPARE(ta.size(), tb.size());
  size_t num_f16 = 0;
  for (size_t i = 0; i < ta.size(); ++i) {
    QCOMPARE(ta[i]->name, tb[i]->name);
    if (tb[i]->rows == 1) {  // norms stay F32
      QVERIFY(tb[i]->dtype == gb::WeightType::F32);
      QVERIFY(std::memcmp(ta[i]->data, tb[i]->data, ta[i]->num_bytes()) == 0);
      continue;
    }
    QVERIFY2(tb[i]->dtype == gb::WeightType::F16, tb[i]->name.c_str());
    ++num_f16;
    const auto* src = static_cast<const float*>(ta[i]->data);
    const auto* half = static_cast<const uint16_t*>(tb[i]->data);
    for (int64_t k = 0; k < ta[i]->num_elements(); ++k)
      if (gb::kernels::f32_to_f16(src[k]) != half[k]) QFAIL(("f16 mismatch in " + tb[i]->name).c_str());
  }
  QCOMPARE(num_f16, size_t{1 + 5 * 7});
}

GB_TEST(llama2_tiny_random_loads_untied_with_llama2_vocab) {
  GB_REQUIRE_SHARED(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  auto m = load_or_fail(path);
  if (!m) return;
  const gb::ModelConfig& c = m->config;
  QCOMPARE(c.dim, 8);
  QCOMPARE(c.hidden_dim, 32);
  QCOMPARE(c.num_layers, 1);
  QCOMPARE(c.num_heads, 2);
  QCOMPARE(c.num_kv_heads, 2);
  QCOMPARE(c.rope_dim, 4);
  QCOMPARE(c.context_length, 4096);
  QCOMPARE(c.vocab_size, 32000);
  QVERIFY(!c.tied_classifier);
  QVERIFY(m->weights.classifier.data != m->weights.token_embedding.data);
  QCOMPARE(m->weights.classifier.rows, int64_t{32000});
  QVERIFY(m->weights.layers[0].wq.dtype == gb::WeightType::F16);
  QVERIFY(m->vocabulary.has_value());
  QCOMPARE(m->vocabulary->tokens.size(), size_t{32000});
  QCOMPARE(m->vocabulary->tokens[1], std::string("<s>"));
}

GB_TEST(load_progress_reaches_one_and_cancel_stops_the_load) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
  std::vector<double> seen;
  gb::LoadOptions options;
  options.progress = [&](double f) {
    seen.push_back(f);
    return true;
  };
  auto model = gb::load_model(path, options);
  QVERIFY(model.ok());
  QVERIFY(!seen.empty());
  QCOMPARE(seen.front(), 0.0);
  QCOMPARE(seen.back(), 1.0);
  QVERIFY(std::is_sorted(seen.begin(), seen.end()));
  options.progress = [](double) { return false; };
  auto cancelled = gb::load_model(path, options);
  QVERIFY(!cancelled.ok());
  QVERIFY2(cancelled.error().message.find(path + ": loading cancelled") != std::string::npos,
           cancelled.error().message.c_str());
}
