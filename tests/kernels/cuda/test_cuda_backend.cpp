// CudaBackend against the CPU backend (the oracle) on a small synthetic model
// with awkward sizes (dim 96, hidden 200, GQA 6/2, head_dim 16, vocab 300), and
// the equivalences the backend must keep on its own: batched = alone, chunked
// prefill = one-shot, scrambled paging = contiguous, decode kernel = prefill
// kernel for the same token, plus on-device logit summaries, KV block copies,
// and error reporting for bad batches.
//
// Tolerances on logits (synthetic logits are O(0.3)):
//   F32 CUDA vs CPU ............ 1e-4 abs (different summation orders; TF32 off)
//   CUDA vs CUDA equivalences .. 1e-5 abs (same kernels, different GEMM shapes/paths)
//   F16 / BF16 CUDA vs CPU ...... 5e-3 / 3e-2 abs: the GPU rounds GEMM inputs to
//       the weight type while the CPU keeps float activations (first estimates,
//       to tighten after device runs)
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend_harness.h"
#include "backend/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_support.h"
#include "gb_test.h"
#include "model/synthetic_model.h"

using namespace gbtest::cuda;

namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 64;

struct Pair {
  std::shared_ptr<const gb::Model> model;
  std::unique_ptr<gb::Backend> cpu;
  std::unique_ptr<gb::CudaBackend> gpu;
  int32_t vocab = 0;
  std::string error;

  bool open(gb::WeightType dtype, bool tied) {
    model = load_test_model(dtype, tied, &error);
    if (!model) return false;
    vocab = model->config.vocab_size;
    cpu = gb::make_cpu_backend(model);
    auto made = gb::make_cuda_backend(model);
    if (!made.ok()) {
      error = made.error().message;
      return false;
    }
    gpu = std::move(made).value();
    for (gb::Backend* b : {cpu.get(), static_cast<gb::Backend*>(gpu.get())}) {
      if (gb::Status s = b->init_kv_pool({kNumBlocks, kBlockSize}); !s.ok()) {
        error = s.error().message;
        return false;
      }
    }
    return true;
  }
};

// Ragged prefill (one sequence wants every logit), then batched greedy decode
// driven by the CPU's choices; every step's logits compared.
void check_against_cpu(gb::WeightType dtype, bool tied, double tolerance) {
  Pair p;
  QVERIFY2(p.open(dtype, tied), p.error.c_str());
  std::vector<Sequence> cpu_seqs(3), gpu_seqs;
  const size_t prompt_lens[3] = {5, 23, 40};
  for (size_t i = 0; i < 3; ++i) cpu_seqs[i].tokens = random_tokens(prompt_lens[i], p.vocab, 40 + uint32_t(i));
  gpu_seqs = cpu_seqs;
  ScrambledBlocks cpu_blocks(kNumBlocks, 7), gpu_blocks(kNumBlocks, 7);
  std::vector<StepSpec> step = {{0, 5, false}, {1, 23, true}, {2, 40, false}};
  for (int32_t iter = 0; iter < 10; ++iter) {
    std::string error;
    const auto ref = run_step(*p.cpu, cpu_seqs, cpu_blocks, kBlockSize, step, p.vocab, &error);
    QVERIFY2(!ref.empty(), error.c_str());
    const auto got = run_step(*p.gpu, gpu_seqs, gpu_blocks, kBlockSize, step, p.vocab, &error);
    QVERIFY2(!got.empty(), error.c_str());
    const Diff d = compare(ref, got);
    QVERIFY2(d.max_abs <= tolerance, ("step " + std::to_string(iter) + ": " + d.describe()).c_str());
    // Next tokens: the CPU's greedy pick for each sequence's last row.
    const size_t num_rows = ref.size() / static_cast<size_t>(p.vocab);
    size_t row = 0;
    for (size_t i = 0; i < 3; ++i) {
      row += step[i].all_logits ? static_cast<size_t>(step[i].num_new) : 1;
      const int32_t next = argmax(ref.data() + (row - 1) * static_cast<size_t>(p.vocab), p.vocab);
      cpu_seqs[i].tokens.push_back(next);
      gpu_seqs[i].tokens.push_back(next);
    }
    QCOMPARE(row, num_rows);
    step = {{0, 1, false}, {1, 1, false}, {2, 1, false}};
  }
}

}  // namespace

GB_TEST(f32_tied_matches_cpu_backend) { check_against_cpu(gb::WeightType::F32, true, 1e-4); }
GB_TEST(f32_untied_matches_cpu_backend) { check_against_cpu(gb::WeightType::F32, false, 1e-4); }
GB_TEST(f16_matches_cpu_backend_within_f16_rounding) { check_against_cpu(gb::WeightType::F16, false, 5e-3); }
GB_TEST(bf16_matches_cpu_backend_within_bf16_rounding) { check_against_cpu(gb::WeightType::BF16, false, 3e-2); }

GB_TEST(batched_equals_alone_and_decode_kernel_equals_prefill_kernel) {
  Pair p;
  QVERIFY2(p.open(gb::WeightType::F32, true), p.error.c_str());
  std::string error;
  // Alone: sequence 0 prefilled, then one decode step (decode kernel).
  std::vector<Sequence> alone(1);
  alone[0].tokens = random_tokens(30, p.vocab, 1);
  ScrambledBlocks b1(kNumBlocks, 3);
  QVERIFY2(!run_step(*p.gpu, alone, b1, kBlockSize, {{0, 29, false}}, p.vocab, &error).empty(), error.c_str());
  const auto ref = run_step(*p.gpu, alone, b1, kBlockSize, {{0, 1, false}}, p.vocab, &error);
  QVERIFY2(!ref.empty(), error.c_str());
  // Batched: the same two steps next to another sequence that is still
  // prefilling, so the last token goes through the prefill kernel.
  QVERIFY(p.gpu->init_kv_pool({kNumBlocks, kBlockSize}).ok());
  std::vector<Sequence> batched(2);
  batched[0].tokens = alone[0].tokens;
  batched[1].tokens = random_tokens(50, p.vocab, 2);
  ScrambledBlocks b2(kNumBlocks, 4);
  QVERIFY2(!run_step(*p.gpu, batched, b2, kBlockSize, {{1, 20, false}, {0, 29, false}}, p.vocab, &error).empty(),
           error.c_str());
  const auto got = run_step(*p.gpu, batched, b2, kBlockSize, {{1, 30, false}, {0, 1, false}}, p.vocab, &error);
  QVERIFY2(!got.empty(), error.c_str());
  const std::vector<float> got_row(got.begin() + p.vocab, got.end());
  const Diff d = compare(ref, got_row);
  QVERIFY2(d.max_abs <= 1e-5, d.describe().c_str());
}

GB_TEST(chunked_prefill_equals_one_shot_and_scrambled_equals_contiguous) {
  Pair p;
  QVERIFY2(p.open(gb::WeightType::F32, true), p.error.c_str());
  std::string error;
  const auto prompt = random_tokens(45, p.vocab, 9);
  std::vector<Sequence> one(1);
  one[0].tokens = prompt;
  ScrambledBlocks in_order(kNumBlocks, 0);
  const auto ref = run_step(*p.gpu, one, in_order, kBlockSize, {{0, 45, true}}, p.vocab, &error);
  QVERIFY2(!ref.empty(), error.c_str());

  QVERIFY(p.gpu->init_kv_pool({kNumBlocks, kBlockSize}).ok());
  std::vector<Sequence> chunked(1);
  chunked[0].tokens = prompt;
  ScrambledBlocks scrambled(kNumBlocks, 11);
  std::vector<float> got;
  for (int32_t n : {16, 1, 15, 13}) {  // block-aligned, single-token (decode kernel) and ragged chunks
    const auto part = run_step(*p.gpu, chunked, scrambled, kBlockSize, {{0, n, true}}, p.vocab, &error);
    QVERIFY2(!part.empty(), error.c_str());
    got.insert(got.end(), part.begin(), part.end());
  }
  const Diff d = compare(ref, got);
  QVERIFY2(d.max_abs <= 1e-5, d.describe().c_str());
}

GB_TEST(layer_skipping_matches_cpu_backend) {
  Pair p;
  QVERIFY2(p.open(gb::WeightType::F32, true), p.error.c_str());
  std::string error;
  std::vector<Sequence> a(1), b;
  a[0].tokens = random_tokens(20, p.vocab, 5);
  b = a;
  ScrambledBlocks ba(kNumBlocks, 2), bb(kNumBlocks, 2);
  const auto ref = run_step(*p.cpu, a, ba, kBlockSize, {{0, 20, true}}, p.vocab, &error, 1);
  QVERIFY2(!ref.empty(), error.c_str());
  const auto got = run_step(*p.gpu, b, bb, kBlockSize, {{0, 20, true}}, p.vocab, &error, 1);
  QVERIFY2(!got.empty(), error.c_str());
  const Diff d = compare(ref, got);
  QVERIFY2(d.max_abs <= 1e-4, d.describe().c_str());
}

GB_TEST(kv_slots_match_cpu_and_copy_blocks_copies_every_layer) {
  Pair p;
  QVERIFY2(p.open(gb::WeightType::F32, true), p.error.c_str());
  std::string error;
  std::vector<Sequence> a(1), b;
  a[0].tokens = random_tokens(37, p.vocab, 6);
  b = a;
  ScrambledBlocks ba(kNumBlocks, 8), bb(kNumBlocks, 8);
  QVERIFY2(!run_step(*p.cpu, a, ba, kBlockSize, {{0, 37, false}}, p.vocab, &error).empty(), error.c_str());
  QVERIFY2(!run_step(*p.gpu, b, bb, kBlockSize, {{0, 37, false}}, p.vocab, &error).empty(), error.c_str());
  const size_t kv_dim = static_cast<size_t>(p.model->config.kv_dim());
  std::vector<float> ck(kv_dim), cv(kv_dim), gk(kv_dim), gv(kv_dim);
  for (int32_t layer = 0; layer < p.model->config.num_layers; ++layer)
    for (int32_t pos : {0, 15, 16, 36}) {
      const int32_t blk = b[0].block_table[static_cast<size_t>(pos / kBlockSize)];
      QVERIFY(p.cpu->read_kv_slot(layer, blk, pos % kBlockSize, ck, cv).ok());
      QVERIFY(p.gpu->read_kv_slot(layer, blk, pos % kBlockSize, gk, gv).ok());
      QVERIFY2(compare(ck, gk).max_abs <= 1e-4, compare(ck, gk).describe().c_str());
      QVERIFY2(compare(cv, gv).max_abs <= 1e-4, compare(cv, gv).describe().c_str());
    }
  // Copy the block holding positions 16..31 to an unused block; every layer follows.
  const int32_t src = b[0].block_table[1], dst = bb.take();
  const std::pair<int32_t, int32_t> copy[] = {{src, dst}};
  QVERIFY(p.gpu->copy_blocks(copy).ok());
  for (int32_t layer = 0; layer < p.model->config.num_layers; ++layer)
    for (int32_t slot : {0, 7, 15}) {
      QVERIFY(p.gpu->read_kv_slot(layer, src, slot, ck, cv).ok());
      QVERIFY(p.gpu->read_kv_slot(layer, dst, slot, gk, gv).ok());
      QCOMPARE(compare(ck, gk).max_abs, 0.0);
      QCOMPARE(compare(cv, gv).max_abs, 0.0);
    }
}

GB_TEST(forward_inspect_summaries_agree_with_the_full_rows) {
  Pair p;
  QVERIFY2(p.open(gb::WeightType::F32, true), p.error.c_str());
  gb::BatchLayout batch;
  batch.block_size = kBlockSize;
  const auto tokens = random_tokens(12, p.vocab, 3);
  const int32_t table[] = {5};
  batch.add_sequence(tokens.data(), 12, 0, table, 1, true);
  std::vector<float> logits(static_cast<size_t>(12) * static_cast<size_t>(p.vocab));
  std::vector<gb::LogitSummary> summaries(12);
  const gb::Status st = p.gpu->forward_inspect(batch, 10, summaries, logits);
  QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
  for (size_t r = 0; r < 12; ++r) {
    const float* row = logits.data() + r * static_cast<size_t>(p.vocab);
    std::vector<int32_t> order(static_cast<size_t>(p.vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    QCOMPARE(summaries[r].top.size(), static_cast<size_t>(10));
    for (size_t k = 0; k < 10; ++k) {
      QCOMPARE(summaries[r].top[k].first, order[k]);
      QCOMPARE(summaries[r].top[k].second, row[order[k]]);
    }
    double mx = -INFINITY, z = 0.0, el = 0.0;
    for (int32_t i = 0; i < p.vocab; ++i) mx = std::max(mx, double{row[i]});
    for (int32_t i = 0; i < p.vocab; ++i) {
      z += std::exp(row[i] - mx);
      el += std::exp(row[i] - mx) * (row[i] - mx);
    }
    QVERIFY(std::fabs(summaries[r].log_normalizer - (mx + std::log(z))) <= 1e-5 * std::fabs(mx + std::log(z)) + 1e-6);
    QVERIFY(std::fabs(summaries[r].entropy - (std::log(z) - el / z)) <= 1e-5 * (std::log(z) - el / z) + 1e-6);
  }
}

GB_TEST(bad_batches_fail_with_a_message_and_the_backend_survives) {
  Pair p;
  QVERIFY2(p.open(gb::WeightType::F32, true), p.error.c_str());
  gb::BatchLayout batch;
  batch.block_size = kBlockSize;
  const int32_t bad_token[] = {p.vocab};
  const int32_t table[] = {0};
  batch.add_sequence(bad_token, 1, 0, table, 1, false);
  std::vector<float> logits(static_cast<size_t>(p.vocab));
  gb::Status st = p.gpu->forward(batch, logits);
  QVERIFY(!st.ok());
  QVERIFY2(st.error().message.find("vocabulary") != std::string::npos, st.error().message.c_str());
  batch.clear();
  const int32_t bad_table[] = {kNumBlocks};
  const int32_t good_token[] = {3};
  batch.add_sequence(good_token, 1, 0, bad_table, 1, false);
  st = p.gpu->forward(batch, logits);
  QVERIFY(!st.ok());
  QVERIFY2(st.error().message.find("block") != std::string::npos, st.error().message.c_str());
  batch.clear();
  batch.add_sequence(good_token, 1, 0, table, 1, false);
  st = p.gpu->forward(batch, logits);
  QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
  QVERIFY(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
  const gb::DeviceInfo info = p.gpu->device_info();
  QCOMPARE(info.backend, std::string("cuda"));
  QVERIFY(!info.name.empty());
  QVERIFY(info.memory_used_bytes >= p.gpu->kv_pool_bytes());
  QVERIFY(info.memory_total_bytes > info.memory_used_bytes);
}

// Every architecture row runs the layer recipe on the device: each synthetic
// architecture model (q/k norms, sliding windows, post-norms, soft-caps, GELU,
// scaled embeddings, local/global RoPE bases, fused projections, LongRoPE)
// against the CPU backend through ragged prefill and batched decode, with
// contexts that outgrow the sliding windows. F32 weights, TF32 off. These
// models' logits have a standard deviation of ~10, so the bound is relative to
// the step's largest logit: 1e-4 x max(1, max |logit|) (a first estimate, to
// tighten after device runs).
// One synthetic architecture on both backends with K/V in `kv_type` (both
// pools), ragged prefill then batched decode; logits within tolerance x
// max(1, max |logit|) of the CPU's.
void check_architecture_against_cpu(const gb::SyntheticArch& arch, gb::WeightType kv_type, double tolerance) {
  const std::string path = gbtest::temp_dir() + "/" + arch.name + ".gguf";
  QVERIFY(gb::write_synthetic_arch_model(arch, 1, path).ok());
  auto loaded = gb::load_model(path);
  QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
  std::shared_ptr<const gb::Model> model = std::move(loaded).value();
  auto cpu = gb::make_cpu_backend(model);
  auto made = gb::make_cuda_backend(model);
  QVERIFY2(made.ok(), (arch.name + ": " + (made.ok() ? "" : made.error().message)).c_str());
  std::unique_ptr<gb::CudaBackend> gpu = std::move(made).value();
  QVERIFY(cpu->init_kv_pool({kNumBlocks, kBlockSize, kv_type, kv_type}).ok());
  QVERIFY(gpu->init_kv_pool({kNumBlocks, kBlockSize, kv_type, kv_type}).ok());
  const int32_t vocab = model->config.vocab_size;
  std::vector<Sequence> cpu_seqs(3);
  const size_t prompt_lens[3] = {3, 21, 37};
  for (size_t i = 0; i < 3; ++i) cpu_seqs[i].tokens = random_tokens(prompt_lens[i], vocab, 70 + uint32_t(i));
  std::vector<Sequence> gpu_seqs = cpu_seqs;
  ScrambledBlocks cpu_blocks(kNumBlocks, 9), gpu_blocks(kNumBlocks, 9);
  std::vector<StepSpec> step = {{0, 3, true}, {1, 21, true}, {2, 37, false}};
  for (int32_t iter = 0; iter < 6; ++iter) {
    std::string error;
    const auto ref = run_step(*cpu, cpu_seqs, cpu_blocks, kBlockSize, step, vocab, &error);
    QVERIFY2(!ref.empty(), error.c_str());
    const auto got = run_step(*gpu, gpu_seqs, gpu_blocks, kBlockSize, step, vocab, &error);
    QVERIFY2(!got.empty(), error.c_str());
    const Diff d = compare(ref, got);
    double largest = 1.0;
    for (float x : ref) largest = std::max(largest, static_cast<double>(std::fabs(x)));
    QVERIFY2(d.max_abs <= tolerance * largest, (arch.name + " step " + std::to_string(iter) + ": " + d.describe()).c_str());
    size_t row = 0;
    for (size_t i = 0; i < 3; ++i) {
      row += step[i].all_logits ? static_cast<size_t>(step[i].num_new) : 1;
      const int32_t next = argmax(ref.data() + (row - 1) * static_cast<size_t>(vocab), vocab);
      cpu_seqs[i].tokens.push_back(next);
      gpu_seqs[i].tokens.push_back(next);
    }
    step = {{0, 1, false}, {1, 1, false}, {2, 1, false}};
  }
}

GB_TEST(every_synthetic_architecture_matches_cpu_backend) {
  for (const gb::SyntheticArch& arch : gb::synthetic_archs()) {
    check_architecture_against_cpu(arch, gb::WeightType::F32, 1e-4);
    if (QTest::currentTestFailed()) return;
  }
}

// F16 and BF16 K/V on the device (the CUDA kernels widen them as they read;
// the CPU converts its blocks the same way): both backends round the same K/V
// to the same type, so they stay close; an F16 value's last bit may differ
// where the two computed K/V a rounding apart (a first bound, to tighten after
// device runs).
GB_TEST(half_precision_kv_matches_cpu_backend_at_the_same_type) {
  for (const gb::SyntheticArch& arch : gb::synthetic_archs()) {
    check_architecture_against_cpu(arch, gb::WeightType::F16, 2e-3);
    check_architecture_against_cpu(arch, gb::WeightType::BF16, 2e-2);
    if (QTest::currentTestFailed()) return;
  }
}

// Inside the model (runtime/inside.h) on the device: the capture steps' rows
// (residuals and the query), a position re-run without writing its K/V, and
// the epilogue over given rows agree with the CPU backend; the re-run leaves
// the cache as it was, and the epilogue of the last layer's output row is the
// capture forward's own logits.
GB_TEST(capture_and_epilogue_rows_match_cpu) {
  Pair p;
  QVERIFY2(p.open(gb::WeightType::F32, true), p.error.c_str());
  std::string error;
  std::vector<Sequence> a(1), b;
  a[0].tokens = random_tokens(30, p.vocab, 12);
  b = a;
  ScrambledBlocks ba(kNumBlocks, 5), bb(kNumBlocks, 5);
  QVERIFY2(!run_step(*p.cpu, a, ba, kBlockSize, {{0, 30, false}}, p.vocab, &error).empty(), error.c_str());
  QVERIFY2(!run_step(*p.gpu, b, bb, kBlockSize, {{0, 30, false}}, p.vocab, &error).empty(), error.c_str());
  const gb::ModelConfig& c = p.model->config;
  const size_t kv_dim = static_cast<size_t>(c.kv_dim());
  std::vector<float> k_before(kv_dim), v_before(kv_dim), k_after(kv_dim), v_after(kv_dim);
  const int32_t last_block = b[0].block_table[29 / kBlockSize];
  QVERIFY(p.gpu->read_kv_slot(0, last_block, 29 % kBlockSize, k_before, v_before).ok());
  gb::CaptureRows rows[2];
  std::vector<float> logits[2];
  gb::Backend* backends[2] = {p.cpu.get(), p.gpu.get()};
  for (int i = 0; i < 2; ++i) {
    const std::vector<Sequence>& s = i == 0 ? a : b;
    gb::BatchLayout layout;
    layout.block_size = kBlockSize;
    const int32_t token = s[0].tokens[29];
    layout.add_sequence_rows(&token, 1, 29, s[0].block_table.data(), static_cast<int32_t>(s[0].block_table.size()), 1);
    layout.write_kv = false;
    logits[i].assign(static_cast<size_t>(p.vocab), 0.0f);
    rows[i].token = 0;
    const gb::Status st = backends[i]->forward_capture(layout, logits[i], rows[i]);
    QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
  }
  QVERIFY(p.gpu->read_kv_slot(0, last_block, 29 % kBlockSize, k_after, v_after).ok());
  QCOMPARE(compare(k_before, k_after).max_abs, 0.0);
  QVERIFY2(compare(logits[0], logits[1]).max_abs <= 1e-4, compare(logits[0], logits[1]).describe().c_str());
  for (auto member : {&gb::CaptureRows::layer_input, &gb::CaptureRows::query, &gb::CaptureRows::after_attention,
                      &gb::CaptureRows::layer_output}) {
    QCOMPARE((rows[0].*member).size(), (rows[1].*member).size());
    QVERIFY(!(rows[0].*member).empty());
    QVERIFY2(compare(rows[0].*member, rows[1].*member).max_abs <= 1e-4,
             compare(rows[0].*member, rows[1].*member).describe().c_str());
  }
  const int32_t n = c.num_layers;
  std::vector<float> lens[2];
  for (int i = 0; i < 2; ++i) {
    lens[i].assign(static_cast<size_t>(n) * static_cast<size_t>(p.vocab), 0.0f);
    const gb::Status st = backends[i]->epilogue_rows(rows[1].layer_output, n, lens[i]);
    QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
  }
  QVERIFY2(compare(lens[0], lens[1]).max_abs <= 1e-4, compare(lens[0], lens[1]).describe().c_str());
  const std::vector<float> last(lens[1].end() - p.vocab, lens[1].end());
  QVERIFY2(compare(last, logits[1]).max_abs <= 1e-5, compare(last, logits[1]).describe().c_str());
}
