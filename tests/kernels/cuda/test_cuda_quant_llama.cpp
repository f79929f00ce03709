// Quantized GGUF files through the CUDA backend: ../shared/models/quant-llama
// (one random llama model quantized by llama-quantize; see its README) against
// the float32 references made from each file's own dequantized weights
// (refs/<file>.json), the same references tests/engine/runtime/test_quant_llama.cpp
// holds the CPU backend to. The weights stay GGUF blocks on the device.
//
// Per file and prompt, along the reference's path (teacher forcing: the prompt
// plus its first 23 greedy tokens), the logits of the reference's top-20 ids
// at every position are compared twice:
//   - prefill: the whole sequence in one step (more than kMaxGemvTokens tokens,
//     so the dequantized-tile + cuBLAS path);
//   - decode: the same sequence one token per step (the GEMV kernels);
// and the two must agree on every logit of every position within 1e-3 (same
// dequantized weights, float32 both ways; only the summation order differs).
// Bars, from the README's "bar for a second engine": max |dlogit| <= 2.5 and
// top-1 agreement on at least 85% of the positions; and a mean |dlogit| no
// larger than llama.cpp's plain CPU kernels reach on the same file
// (agreement.json, "no extra bufts"), since this backend keeps activations in
// float32 where llama.cpp rounds them to 8 bits. The measured numbers are
// printed (expected: far below the bars, like the F16 file's 1e-4).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "cuda_test_support.h"
#include "gb_test.h"
#include "model/model.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_cuda_quant_llama {

namespace {

using nlohmann::json;

// agreement.json holds NaN (Python) for undefined numbers; read those as null.
json read_json(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t at = text.find(": NaN"); at != std::string::npos; at = text.find(": NaN", at)) text.replace(at, 5, ": null");
  return json::parse(text);
}

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 16;  // 256 positions: the longest sequence is 112 + 23

struct Agreement {
  double max_dlogit = 0, sum_dlogit = 0;  // sum of per-position means over the top-20 ids
  int top1 = 0, positions = 0;
  void add(const Agreement& o) {
    max_dlogit = std::max(max_dlogit, o.max_dlogit);
    sum_dlogit += o.sum_dlogit;
    top1 += o.top1;
    positions += o.positions;
  }
};

const json& ref_position(const json& prompt, size_t i) {
  const size_t n = prompt["ids"].size();
  return i < n ? prompt["positions"][i] : prompt["greedy"]["steps"][i - n + 1];
}

void score(const json& ref, const float* row, size_t vocab, Agreement& a) {
  const auto ids = ref["top_ids"].get<std::vector<int>>();
  const auto vals = ref["top_logits"].get<std::vector<double>>();
  double sum = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    const double d = std::abs(row[ids[k]] - vals[k]);
    a.max_dlogit = std::max(a.max_dlogit, std::isnan(d) ? INFINITY : d);
    sum += d;
  }
  a.sum_dlogit += sum / static_cast<double>(ids.size());
  a.top1 += static_cast<int>(std::max_element(row, row + vocab) - row) == ids[0];
  ++a.positions;
}

// Runs tokens at positions start.. on the backend; logits for every token.
bool forward(gb::Backend& gpu, const std::vector<int32_t>& table, const gb::TokenId* tokens, int32_t n, int32_t start,
             std::vector<float>& logits, size_t vocab) {
  gb::BatchLayout batch;
  batch.block_size = kBlockSize;
  batch.add_sequence(tokens, n, start, table.data(), kNumBlocks, true);
  logits.assign(static_cast<size_t>(n) * vocab, 0.0f);
  const gb::Status st = gpu.forward(batch, logits);
  if (!st) [&] { QFAIL(st.error().message.c_str()); }();
  return st.ok();
}

// Teacher-forced agreement of one prompt, in one step or one token per step;
// every position's logits are appended to *all.
Agreement teacher_forced(gb::Backend& gpu, const json& prompt, size_t vocab, bool stepwise, std::vector<float>* all) {
  std::vector<gb::TokenId> seq = prompt["ids"].get<std::vector<gb::TokenId>>();
  const auto greedy = prompt["greedy"]["ids"].get<std::vector<gb::TokenId>>();
  seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
  std::vector<int32_t> table(kNumBlocks);
  for (int32_t b = 0; b < kNumBlocks; ++b) table[static_cast<size_t>(b)] = kNumBlocks - 1 - b;  // paging must not matter
  Agreement a;
  std::vector<float> logits;
  if (!stepwise) {
    if (!forward(gpu, table, seq.data(), static_cast<int32_t>(seq.size()), 0, logits, vocab)) return a;
    for (size_t i = 0; i < seq.size(); ++i) score(ref_position(prompt, i), logits.data() + i * vocab, vocab, a);
    all->insert(all->end(), logits.begin(), logits.end());
    return a;
  }
  for (size_t i = 0; i < seq.size(); ++i) {
    if (!forward(gpu, table, seq.data() + i, 1, static_cast<int32_t>(i), logits, vocab)) return a;
    score(ref_position(prompt, i), logits.data(), vocab, a);
    all->insert(all->end(), logits.begin(), logits.end());
  }
  return a;
}

void check_file(const std::string& key, const std::string& agreement_key) {
  GB_REQUIRE_SHARED(model_path, "models/quant-llama/quant-llama-" + key + ".gguf");
  GB_REQUIRE_SHARED(ref_path, "models/quant-llama/refs/quant-llama-" + key + ".json");
  GB_REQUIRE_SHARED(agreement_path, "models/quant-llama/agreement.json");
  const json ref = read_json(ref_path);
  const json llama = read_json(agreement_path)[agreement_key][key == "untied-Q4_K_M" ? "Q4_K_M" : key];
  auto model = gb::load_model(model_path);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  auto made = gb::make_cuda_backend(*model);
  QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
  gb::CudaBackend& gpu = **made;
  QVERIFY(gpu.init_kv_pool({kNumBlocks, kBlockSize}).ok());
  const size_t vocab = static_cast<size_t>((*model)->config.vocab_size);
  double llama_sum = 0;
  int llama_positions = 0;
  for (const json& l : llama["llamacpp_no_extra_bufts_tf"]) {
    llama_sum += l["tf_mean_abs_dlogit_top20"].get<double>() * l["tf_positions"].get<double>();
    llama_positions += l["tf_positions"].get<int>();
  }
  std::vector<float> logits[2];  // prefill, decode: every position of every prompt
  for (const bool stepwise : {false, true}) {
    Agreement all;
    for (const json& prompt : ref["prompts"]) {
      all.add(teacher_forced(gpu, prompt, vocab, stepwise, &logits[stepwise ? 1 : 0]));
      if (QTest::currentTestFailed()) return;
    }
    const double mean = all.sum_dlogit / all.positions, llama_mean = llama_sum / std::max(llama_positions, 1);
    const std::string what = "quant-llama-" + key + (stepwise ? " decode" : " prefill");
    std::printf("%s on CUDA: teacher-forced max |dlogit| %.2e, mean %.2e (llama.cpp %.3f), top-1 %d/%d\n",
                what.c_str(), all.max_dlogit, mean, llama_mean, all.top1, all.positions);
    QVERIFY2(all.max_dlogit <= 2.5, (what + ": max |dlogit| " + std::to_string(all.max_dlogit)).c_str());
    QVERIFY2(all.top1 * 100 >= 85 * all.positions,
             (what + ": top-1 " + std::to_string(all.top1) + "/" + std::to_string(all.positions)).c_str());
    QVERIFY2(mean <= llama_mean, (what + ": mean |dlogit| " + std::to_string(mean) + " above llama.cpp's " +
                                  std::to_string(llama_mean)).c_str());
  }
  QCOMPARE(logits[1].size(), logits[0].size());
  const gbtest::cuda::Diff d = gbtest::cuda::compare(logits[0], logits[1]);
  std::printf("quant-llama-%s on CUDA: decode vs prefill %s\n", key.c_str(), d.describe().c_str());
  QVERIFY2(d.max_abs <= 1e-3, ("decode (GEMV) vs prefill (tiles): " + d.describe()).c_str());
}

}  // namespace

GB_TEST(quant_q8_0_on_cuda_matches_reference) { check_file("Q8_0", "quant-llama"); }
GB_TEST(quant_q4_0_on_cuda_matches_reference) { check_file("Q4_0", "quant-llama"); }
GB_TEST(quant_q4_1_on_cuda_matches_reference) { check_file("Q4_1", "quant-llama"); }
GB_TEST(quant_q5_0_on_cuda_matches_reference) { check_file("Q5_0", "quant-llama"); }
GB_TEST(quant_q5_1_on_cuda_matches_reference) { check_file("Q5_1", "quant-llama"); }
GB_TEST(quant_q2_k_on_cuda_matches_reference) { check_file("Q2_K", "quant-llama"); }
GB_TEST(quant_q3_k_m_on_cuda_matches_reference) { check_file("Q3_K_M", "quant-llama"); }
GB_TEST(quant_q4_k_m_on_cuda_matches_reference) { check_file("Q4_K_M", "quant-llama"); }
GB_TEST(quant_q5_k_m_on_cuda_matches_reference) { check_file("Q5_K_M", "quant-llama"); }
GB_TEST(quant_q6_k_on_cuda_matches_reference) { check_file("Q6_K", "quant-llama"); }
GB_TEST(quant_iq4_nl_on_cuda_matches_reference) { check_file("IQ4_NL", "quant-llama"); }
GB_TEST(quant_iq4_xs_on_cuda_matches_reference) { check_file("IQ4_XS", "quant-llama"); }
GB_TEST(quant_untied_q4_k_m_with_q6_k_output_on_cuda) { check_file("untied-Q4_K_M", "quant-llama-untied"); }

}  // namespace test_cuda_quant_llama
