// Quantized GGUF files end to end: ../shared/models/quant-llama (one random
// llama model as F16 and as 12 llama-quantize types, plus an untied Q4_K_M with
// a Q6_K output; see its README) against float32 references made from each
// file's own dequantized weights (refs/<file>.json, schema glassbox-ref-v1).
//
// Teacher forcing: the prompt plus the reference's first 23 greedy tokens run
// in one batch, and at every position the logits of the reference's top-20 ids
// are compared. Bars: F16 within 1e-3 and the same 24 greedy tokens (free
// decoding); every quantized file with a mean |dlogit| no more than 5% above
// what llama.cpp's plain CPU kernels reach on the same file (agreement.json,
// "no extra bufts"), a max under the README's 2.5, and at least as many top-1
// agreements minus 2% of the positions. The 8-bit activations of the
// quantized matmuls are the expected source of the gap (the README's note).
// Also: token-by-token decoding equals the batched prefill within 1e-3.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "model/model.h"
#include "model/quantize_model.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_quant_llama {

namespace {

using nlohmann::json;

// agreement.json (written by Python) holds NaN for undefined numbers, which JSON
// has no literal for; read those as null.
json read_json(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t at = text.find(": NaN"); at != std::string::npos; at = text.find(": NaN", at))
    text.replace(at, 5, ": null");
  return json::parse(text);
}

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 16;  // 256 positions: the longest sequence is 112 + 23

struct Harness {
  std::shared_ptr<const gb::Model> model;
  std::unique_ptr<gb::Backend> backend;
  std::vector<int32_t> table;

  bool open(const std::string& path, int32_t threads, bool bf16_matmuls = false) {
    auto m = gb::load_model(path);
    if (!m) {
      [&] { QFAIL(m.error().message.c_str()); }();
      return false;
    }
    model = *m;
    gb::CpuBackendOptions options;
    options.num_threads = threads;
    options.bf16_matmuls = bf16_matmuls;
    backend = gb::make_cpu_backend(model, options);
    if (auto st = backend->init_kv_pool({kNumBlocks, kBlockSize}); !st) {
      [&] { QFAIL(st.error().message.c_str()); }();
      return false;
    }
    for (int32_t b = 0; b < kNumBlocks; ++b) table.push_back(b);
    return true;
  }

  // Runs tokens at positions start.. and returns logits (all rows or the last).
  std::vector<float> forward(const std::vector<gb::TokenId>& tokens, int32_t start, bool all) {
    gb::BatchLayout batch;
    batch.block_size = kBlockSize;
    batch.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), start, table.data(), kNumBlocks, all);
    std::vector<float> logits(static_cast<size_t>(batch.num_logits()) * static_cast<size_t>(model->config.vocab_size));
    if (auto st = backend->forward(batch, logits); !st) [&] { QFAIL(st.error().message.c_str()); }();
    return logits;
  }
};

struct Agreement {
  double max_dlogit = 0;
  double sum_dlogit = 0;  // over the top-20 ids of every position
  int top1 = 0, positions = 0;
};

// The reference's logits record for position i of the teacher-forced sequence.
const json& ref_position(const json& prompt, size_t i) {
  const size_t n = prompt["ids"].size();
  return i < n ? prompt["positions"][i] : prompt["greedy"]["steps"][i - n + 1];
}

Agreement teacher_forced(Harness& h, const json& prompt, std::vector<float>* logits_out) {
  std::vector<gb::TokenId> seq = prompt["ids"].get<std::vector<gb::TokenId>>();
  const auto greedy = prompt["greedy"]["ids"].get<std::vector<gb::TokenId>>();
  seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
  const std::vector<float> logits = h.forward(seq, 0, true);
  const size_t vocab = static_cast<size_t>(h.model->config.vocab_size);
  Agreement a;
  for (size_t i = 0; i < seq.size(); ++i) {
    const json& ref = ref_position(prompt, i);
    const float* row = logits.data() + i * vocab;
    const auto ids = ref["top_ids"].get<std::vector<int>>();
    const auto vals = ref["top_logits"].get<std::vector<double>>();
    double sum = 0;
    for (size_t k = 0; k < ids.size(); ++k) {
      a.max_dlogit = std::max(a.max_dlogit, std::abs(row[ids[k]] - vals[k]));
      sum += std::abs(row[ids[k]] - vals[k]);
    }
    a.sum_dlogit += sum / static_cast<double>(ids.size());
    a.top1 += static_cast<int>(std::max_element(row, row + vocab) - row) == ids[0];
    ++a.positions;
  }
  if (logits_out) *logits_out = logits;
  return a;
}


void check_quant_file(const std::string& file_key, const std::string& agreement_key) {
  GB_REQUIRE_SHARED(model_path, "models/quant-llama/quant-llama-" + file_key + ".gguf");
  GB_REQUIRE_SHARED(ref_path, "models/quant-llama/refs/quant-llama-" + file_key + ".json");
  GB_REQUIRE_SHARED(agreement_path, "models/quant-llama/agreement.json");
  const json ref = read_json(ref_path);
  const json llama = read_json(agreement_path)[agreement_key][file_key == "untied-Q4_K_M" ? "Q4_K_M" : file_key];
  Harness h;
  if (!h.open(model_path, 2)) return;
  double worst = 0, llama_worst = 0, sum = 0, llama_sum = 0;
  int top1 = 0, llama_top1 = 0, positions = 0;
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    const Agreement a = teacher_forced(h, ref["prompts"][p], nullptr);
    if (QTest::currentTestFailed()) return;
    const json& l = llama["llamacpp_no_extra_bufts_tf"][p];
    worst = std::max(worst, a.max_dlogit);
    llama_worst = std::max(llama_worst, l["tf_max_abs_dlogit_top20"].get<double>());
    top1 += a.top1;
    sum += a.sum_dlogit;
    llama_sum += l["tf_mean_abs_dlogit_top20"].get<double>() * l["tf_positions"].get<double>();
    llama_top1 += l["tf_top1_agree"].get<int>();
    positions += a.positions;
  }
  std::printf("quant-llama-%s: teacher-forced max |dlogit| %.4f (llama.cpp %.4f), mean %.4f (llama.cpp %.4f), "
              "top-1 %d/%d (llama.cpp %d)\n",
              file_key.c_str(), worst, llama_worst, sum / positions, llama_sum / positions, top1, positions, llama_top1);
  // The mean error is the robust statistic: on the legacy types our 8-bit
  // activations are llama.cpp's Q8_0 format in all but the f16 scale, so the
  // means agree within a few percent; on K-types and IQ4_XS ours (32-value
  // activation blocks instead of Q8_K's 256) are about 30% lower. The maximum
  // over ~5000 logits is noisier: it must stay under the README's bar for a
  // second engine (2.5; llama.cpp itself reaches 2.57 on Q2_K).
  QVERIFY2(sum / positions <= 1.05 * llama_sum / positions,
           ("mean |dlogit| " + std::to_string(sum / positions) + " above llama.cpp's " +
            std::to_string(llama_sum / positions)).c_str());
  QVERIFY2(worst <= 2.5, ("max |dlogit| " + std::to_string(worst) + " above 2.5").c_str());
  QVERIFY2(top1 >= llama_top1 - positions / 50, ("top-1 agreement " + std::to_string(top1) + " below llama.cpp's " +
                                                 std::to_string(llama_top1)).c_str());
}

}  // namespace

GB_TEST(f16_teacher_forced_within_1e3_and_greedy_identical) {
  GB_REQUIRE_SHARED(model_path, "models/quant-llama/quant-llama-F16.gguf");
  GB_REQUIRE_SHARED(ref_path, "models/quant-llama/refs/quant-llama-F16.json");
  const json ref = read_json(ref_path);
  Harness h;
  if (!h.open(model_path, 2)) return;
  for (const json& prompt : ref["prompts"]) {
    const Agreement a = teacher_forced(h, prompt, nullptr);
    std::printf("F16 %s: max |dlogit| %.2e, top-1 %d/%d\n", prompt["name"].get<std::string>().c_str(), a.max_dlogit,
                a.top1, a.positions);
    QVERIFY2(a.max_dlogit <= 1e-3, (prompt["name"].get<std::string>() + ": " + std::to_string(a.max_dlogit)).c_str());
    // Free greedy decoding, one token at a time after the prompt.
    const auto ids = prompt["ids"].get<std::vector<gb::TokenId>>();
    const auto want = prompt["greedy"]["ids"].get<std::vector<gb::TokenId>>();
    std::vector<float> logits = h.forward(ids, 0, false);
    for (size_t k = 0; k < want.size(); ++k) {
      const auto best = static_cast<gb::TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      QCOMPARE(best, want[k]);
      logits = h.forward({best}, static_cast<int32_t>(ids.size() + k), false);
    }
  }
}

GB_TEST(quant_q8_0) { check_quant_file("Q8_0", "quant-llama"); }
GB_TEST(quant_q4_0) { check_quant_file("Q4_0", "quant-llama"); }
GB_TEST(quant_q4_1) { check_quant_file("Q4_1", "quant-llama"); }
GB_TEST(quant_q5_0) { check_quant_file("Q5_0", "quant-llama"); }
GB_TEST(quant_q5_1) { check_quant_file("Q5_1", "quant-llama"); }
GB_TEST(quant_q2_k) { check_quant_file("Q2_K", "quant-llama"); }
GB_TEST(quant_q3_k_m) { check_quant_file("Q3_K_M", "quant-llama"); }
GB_TEST(quant_q4_k_m) { check_quant_file("Q4_K_M", "quant-llama"); }
GB_TEST(quant_q5_k_m) { check_quant_file("Q5_K_M", "quant-llama"); }
GB_TEST(quant_q6_k) { check_quant_file("Q6_K", "quant-llama"); }
GB_TEST(quant_iq4_nl) { check_quant_file("IQ4_NL", "quant-llama"); }
GB_TEST(quant_iq4_xs) { check_quant_file("IQ4_XS", "quant-llama"); }
GB_TEST(quant_untied_q4_k_m_with_q6_k_output) { check_quant_file("untied-Q4_K_M", "quant-llama-untied"); }

GB_TEST(quant_decode_token_by_token_equals_batched_prefill) {
  // The decode (GEMV, one token) and prefill (GEMM, 4-token tiles) kernels must
  // agree: same arithmetic per (row, token), so only attention order differs.
  for (const char* key : {"Q4_K_M", "IQ4_XS", "Q5_1", "Q3_K_M"}) {
    GB_REQUIRE_SHARED(model_path, std::string("models/quant-llama/quant-llama-") + key + ".gguf");
    GB_REQUIRE_SHARED(ref_path, std::string("models/quant-llama/refs/quant-llama-") + key + ".json");
    const json prompt = read_json(ref_path)["prompts"][2];
    Harness batched, stepwise;
    if (!batched.open(model_path, 2) || !stepwise.open(model_path, 1)) return;
    std::vector<float> all;
    (void)teacher_forced(batched, prompt, &all);
    std::vector<gb::TokenId> seq = prompt["ids"].get<std::vector<gb::TokenId>>();
    const size_t vocab = static_cast<size_t>(batched.model->config.vocab_size);
    double worst = 0;
    for (size_t i = 0; i < seq.size(); ++i) {
      const std::vector<float> one = stepwise.forward({seq[i]}, static_cast<int32_t>(i), false);
      for (size_t v = 0; v < vocab; ++v) worst = std::max(worst, static_cast<double>(std::abs(one[v] - all[i * vocab + v])));
    }
    QVERIFY2(worst <= 1e-3, (std::string(key) + ": decode vs prefill " + std::to_string(worst)).c_str());
  }
}

namespace {

// Logits of `rounded` (bf16 somewhere in its matmuls) against `exact` (the same
// weights in float32 arithmetic) and against the F16 file's float32 reference,
// teacher-forced over every prompt of the reference. Logits have a standard
// deviation of about 10 here (README).
struct Bf16Gap {
  double worst_vs_exact = 0, mean_vs_exact = 0, mean_vs_ref = 0, q8_mean_vs_ref = 0;
  int top1_vs_exact = 0, positions = 0, clear_flips = 0;
};

Bf16Gap bf16_gap(Harness& rounded, Harness& exact, const json& ref, const json& q8) {
  const size_t vocab = static_cast<size_t>(rounded.model->config.vocab_size);
  Bf16Gap g;
  double sum_vs_exact = 0, sum_vs_ref = 0, q8_sum = 0;
  for (size_t p = 0; p < ref["prompts"].size(); ++p) {
    std::vector<float> lb, lf;
    const Agreement a = teacher_forced(rounded, ref["prompts"][p], &lb);
    (void)teacher_forced(exact, ref["prompts"][p], &lf);
    if (QTest::currentTestFailed()) return g;
    for (size_t i = 0; i < lb.size() / vocab; ++i) {
      const float* b = lb.data() + i * vocab;
      const float* f = lf.data() + i * vocab;
      for (size_t v = 0; v < vocab; ++v) {
        g.worst_vs_exact = std::max(g.worst_vs_exact, static_cast<double>(std::abs(b[v] - f[v])));
        sum_vs_exact += std::abs(b[v] - f[v]);
      }
      const auto fb = std::max_element(f, f + vocab) - f;
      const bool same = std::max_element(b, b + vocab) - b == fb;
      g.top1_vs_exact += same;
      // A flip is only allowed where the exact top-2 margin is within twice
      // the logit bar below.
      float second = -INFINITY;
      for (size_t v = 0; v < vocab; ++v)
        if (static_cast<ptrdiff_t>(v) != fb) second = std::max(second, f[v]);
      if (!same && f[fb] - second > 2.0f) ++g.clear_flips;
    }
    sum_vs_ref += a.sum_dlogit;
    g.positions += a.positions;
    q8_sum += q8[p]["tf_mean_abs_dlogit_top20"].get<double>() * q8[p]["tf_positions"].get<double>();
  }
  g.mean_vs_exact = sum_vs_exact / (static_cast<double>(g.positions) * static_cast<double>(vocab));
  g.mean_vs_ref = sum_vs_ref / g.positions;
  g.q8_mean_vs_ref = q8_sum / g.positions;
  return g;
}

// The bars both bf16 routes meet. Measured (2026-12-02, Zen 4, the BF16 file):
// 0.62 at worst over all 32000 logits of the 234 positions, 0.072 on average,
// and 0.116 against the F16 reference (the Q8_0 file's top-20 logits: 0.27 off
// on average, 1.3-1.4 at worst).
void check_bf16_gap(const Bf16Gap& g, const std::string& what, double worst_bar) {
  std::printf("%s: |dlogit| vs exact float32 max %.4f mean %.4f, top-1 equal %d/%d; mean |dlogit| vs the F16 "
              "reference %.4f (llama.cpp on Q8_0: %.4f)\n",
              what.c_str(), g.worst_vs_exact, g.mean_vs_exact, g.top1_vs_exact, g.positions, g.mean_vs_ref,
              g.q8_mean_vs_ref);
  QVERIFY2(g.worst_vs_exact <= worst_bar, (what + " vs exact: " + std::to_string(g.worst_vs_exact)).c_str());
  QVERIFY2(g.mean_vs_exact <= 0.15, (what + " vs exact, mean: " + std::to_string(g.mean_vs_exact)).c_str());
  QVERIFY2(g.top1_vs_exact >= g.positions - g.positions / 20, (what + ": top-1 disagrees too often").c_str());
  QCOMPARE(g.clear_flips, 0);
  QVERIFY2(g.mean_vs_ref <= g.q8_mean_vs_ref, (what + " mean |dlogit| " + std::to_string(g.mean_vs_ref) +
                                               " above llama.cpp's on Q8_0 " + std::to_string(g.q8_mean_vs_ref)).c_str());
}

}  // namespace

GB_TEST(bf16_file_rounds_activations_to_bf16_only) {
  // BF16 weights multiply bf16-rounded activations (weight_type.h). The file:
  // the F16 model converted to BF16 by `quantize` (weights rounded to bf16),
  // and the same values again as F32 (exact), so the two files hold the same
  // weights and differ only in how the activations enter the matmuls. Against
  // the F32 file (float32 throughout) the BF16 file must stay within the
  // rounding of its activations; against the F16 file's float32 reference
  // (weights rounded too) its mean |dlogit| must stay below what llama.cpp
  // reaches on the Q8_0 file (bf16 weights carry about half Q8_0's rounding).
  GB_REQUIRE_SHARED(f16_path, "models/quant-llama/quant-llama-F16.gguf");
  GB_REQUIRE_SHARED(ref_path, "models/quant-llama/refs/quant-llama-F16.json");
  GB_REQUIRE_SHARED(agreement_path, "models/quant-llama/agreement.json");
  const std::string bf16_path = gbtest::temp_dir() + "/quant-llama-BF16.gguf";
  const std::string f32_path = gbtest::temp_dir() + "/quant-llama-F32.gguf";
  gb::QuantizeOptions to_bf16;
  to_bf16.type = "BF16";
  to_bf16.pure = true;
  auto q = gb::quantize_model(f16_path, bf16_path, to_bf16);
  QVERIFY2(q.ok(), q ? "" : q.error().message.c_str());
  gb::QuantizeOptions to_f32 = to_bf16;
  to_f32.type = "F32";
  q = gb::quantize_model(bf16_path, f32_path, to_f32);
  QVERIFY2(q.ok(), q ? "" : q.error().message.c_str());

  const json ref = read_json(ref_path);
  const json q8 = read_json(agreement_path)["quant-llama"]["Q8_0"]["llamacpp_no_extra_bufts_tf"];
  Harness bf16, f32;
  if (!bf16.open(bf16_path, 2) || !f32.open(f32_path, 2)) return;
  QCOMPARE(bf16.model->weights.layers[0].wq.dtype, gb::WeightType::BF16);
  QCOMPARE(f32.model->weights.layers[0].wq.dtype, gb::WeightType::F32);
  const Bf16Gap g = bf16_gap(bf16, f32, ref, q8);
  std::filesystem::remove(bf16_path);
  std::filesystem::remove(f32_path);
  if (QTest::currentTestFailed()) return;
  check_bf16_gap(g, "BF16 file", 1.0);
}

GB_TEST(f16_file_with_bf16_matmuls_stays_within_bf16_rounding) {
  // CpuBackendOptions::bf16_matmuls: the F16 file's matrices rounded to bf16 at
  // load, activations rounded to bf16 in every matmul (the token embedding and
  // the norms stay as the file has them). The same bars as a BF16 file,
  // against the F16 file run exactly, at 1 and 2 threads, but for the largest
  // single gap: here the weights are rounded too. Measured (2026-12-03, Zen 5):
  // max 0.99 over all 32000 logits of the 234 positions, mean 0.104, top-1
  // equal at 229 of 234 (the others within 2 of a tie), 0.104 against the
  // float32 reference (llama.cpp on the Q8_0 file: 0.268).
  GB_REQUIRE_SHARED(f16_path, "models/quant-llama/quant-llama-F16.gguf");
  GB_REQUIRE_SHARED(ref_path, "models/quant-llama/refs/quant-llama-F16.json");
  GB_REQUIRE_SHARED(agreement_path, "models/quant-llama/agreement.json");
  const json ref = read_json(ref_path);
  const json q8 = read_json(agreement_path)["quant-llama"]["Q8_0"]["llamacpp_no_extra_bufts_tf"];
  for (int32_t threads : {1, 2}) {
    Harness rounded, exact;
    if (!rounded.open(f16_path, threads, true) || !exact.open(f16_path, threads)) return;
    check_bf16_gap(bf16_gap(rounded, exact, ref, q8), "F16 file, bf16 matmuls, " + std::to_string(threads) + " threads",
                   1.5);
    if (QTest::currentTestFailed()) return;
  }
}

}  // namespace test_quant_llama
