// CudaBackend end to end on the real stories260K checkpoint against the golden
// vectors in ../shared/testdata/golden (produced by llama2.c run.c, cross-checked
// by llama.cpp and NumPy; see that folder's README): the prompt ids from the JSON
// are prefilled in one step, then tokens are generated greedily one step at a
// time. Greedy ids must be identical; the recorded top-10 logits must agree
// within 1e-3 and the top-10 ids must be the same set. Also checks that loading
// and unloading models and serving many requests returns every byte of device
// memory (cudaMemGetInfo before and after).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "backend_harness.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_support.h"
#include "gb_test.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_cuda_golden {

using namespace gbtest::cuda;

namespace {

constexpr int32_t kBlockSize = 16;

void check_golden(const std::string& model_path, const std::string& golden_path) {
  std::ifstream in(golden_path);
  const nlohmann::json golden = nlohmann::json::parse(in);
  const auto prompt = golden["prompt_tokens"].get<std::vector<int32_t>>();
  const auto expected = golden["generated_tokens"].get<std::vector<int32_t>>();
  const bool stopped_on_bos = golden["stopped_on_bos"].get<bool>();

  auto model = gb::load_model(model_path);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  const int32_t vocab = (*model)->config.vocab_size;
  auto made = gb::make_cuda_backend(*model);
  QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
  gb::CudaBackend& gpu = **made;
  const int32_t total = static_cast<int32_t>(prompt.size() + expected.size()) + 1;
  const int32_t num_blocks = (total + kBlockSize - 1) / kBlockSize;
  QVERIFY(gpu.init_kv_pool({num_blocks + 4, kBlockSize}).ok());

  // Block table in reverse order: paging must not matter.
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));
  for (int32_t i = 0; i < num_blocks; ++i) table[static_cast<size_t>(i)] = num_blocks + 3 - i;

  std::vector<int32_t> tokens = prompt;
  std::vector<float> logits(static_cast<size_t>(vocab));
  std::vector<gb::LogitSummary> summary(1);
  int32_t num_cached = 0;
  for (size_t gen = 0; gen <= expected.size(); ++gen) {
    gb::BatchLayout batch;
    batch.block_size = kBlockSize;
    const int32_t num_new = static_cast<int32_t>(tokens.size()) - num_cached;
    batch.add_sequence(tokens.data() + num_cached, num_new, num_cached, table.data(), num_blocks, false);
    const gb::Status st = gpu.forward_inspect(batch, 10, summary, logits);
    QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
    num_cached += num_new;
    const int32_t chosen = summary[0].top.at(0).first;
    QCOMPARE(chosen, argmax(logits.data(), vocab));
    if (gen == expected.size()) {
      if (stopped_on_bos) QCOMPARE(chosen, 1);  // run.c stops on BOS
      break;
    }
    QVERIFY2(chosen == expected[gen], ("generated token " + std::to_string(gen) + ": got " + std::to_string(chosen) +
                                       ", golden " + std::to_string(expected[gen]))
                                          .c_str());
    tokens.push_back(chosen);
  }

  // Top-10 logits at the recorded positions: rerun from scratch with all logits.
  QVERIFY(gpu.init_kv_pool({num_blocks + 4, kBlockSize}).ok());
  gb::BatchLayout batch;
  batch.block_size = kBlockSize;
  batch.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), 0, table.data(), num_blocks, true);
  std::vector<float> all(tokens.size() * static_cast<size_t>(vocab));
  std::vector<gb::LogitSummary> summaries(tokens.size());
  const gb::Status st = gpu.forward_inspect(batch, 10, summaries, all);
  QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());
  for (const auto& rec : golden["topk_first_generated_positions"]) {
    const auto pos = rec["pos"].get<size_t>();
    const float* row = all.data() + pos * static_cast<size_t>(vocab);
    std::set<int32_t> ours, theirs;
    for (const auto& [id, logit] : summaries[pos].top) ours.insert(id);
    for (const auto& pair : rec["top10"]) {
      const auto id = pair[0].get<int32_t>();
      const auto logit = pair[1].get<double>();
      theirs.insert(id);
      QVERIFY2(std::fabs(row[id] - logit) <= 1e-3, ("pos " + std::to_string(pos) + " id " + std::to_string(id) +
                                                    ": " + std::to_string(row[id]) + " vs golden " +
                                                    std::to_string(logit))
                                                       .c_str());
    }
    QVERIFY2(ours == theirs, ("top-10 id set differs at pos " + std::to_string(pos)).c_str());
  }
}

}  // namespace

GB_TEST(stories260k_once_upon_a_time_greedy_matches_golden) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(golden, "testdata/golden/once_upon_a_time_n64.json");
  check_golden(model, golden);
}

GB_TEST(stories260k_lily_cake_256_steps_matches_golden) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(golden, "testdata/golden/lily_cake_n256.json");
  check_golden(model, golden);
}

GB_TEST(gguf_file_of_the_same_model_matches_golden) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.gguf");
  GB_REQUIRE_SHARED(golden, "testdata/golden/once_upon_a_time_n64.json");
  check_golden(model, golden);
}

namespace {

// One model load, backend, pool, a burst of requests (prefill + decode,
// batched, with summaries), then everything is released.
void serve_requests(const std::string& model_path, int32_t num_requests, uint32_t seed) {
  auto model = gb::load_model(model_path);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  const int32_t vocab = (*model)->config.vocab_size;
  auto made = gb::make_cuda_backend(*model);
  QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
  gb::CudaBackend& gpu = **made;
  QVERIFY(gpu.init_kv_pool({256, kBlockSize}).ok());
  std::mt19937 rng(seed);
  for (int32_t r = 0; r < num_requests; r += 4) {
    std::vector<Sequence> seqs(4);
    ScrambledBlocks blocks(256, seed + uint32_t(r));
    std::vector<StepSpec> step;
    for (int32_t i = 0; i < 4; ++i) {
      const auto len = std::uniform_int_distribution<int32_t>(1, 200)(rng);
      seqs[static_cast<size_t>(i)].tokens = random_tokens(static_cast<size_t>(len) + 8, vocab, seed + uint32_t(r + i));
      step.push_back({i, len, false});
    }
    std::string error;
    for (int32_t s = 0; s < 8; ++s) {
      QVERIFY2(!run_step(gpu, seqs, blocks, kBlockSize, step, vocab, &error).empty(), error.c_str());
      for (StepSpec& spec : step) spec.num_new = 1;
    }
  }
  gb::BatchLayout batch;
  batch.block_size = kBlockSize;
  const int32_t tokens[] = {1, 2, 3}, table[] = {0};
  batch.add_sequence(tokens, 3, 0, table, 1, true);
  std::vector<gb::LogitSummary> summaries(3);
  QVERIFY(gpu.forward_inspect(batch, 20, summaries, {}).ok());
}

size_t device_free_bytes() {
  size_t free_bytes = 0, total = 0;
  GB_CHECK(cudaDeviceSynchronize() == cudaSuccess);
  GB_CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  return free_bytes;
}

}  // namespace

GB_TEST(no_device_memory_leak_across_model_loads_and_requests) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  // Warm-up: the context, cuBLAS and lazily loaded kernels stay resident by design.
  serve_requests(model, 4, 1);
  if (QTest::currentTestFailed()) return;
  const size_t before = device_free_bytes();
  for (uint32_t round = 0; round < 5; ++round) {
    serve_requests(model, 40, 100 + round);
    if (QTest::currentTestFailed()) return;
  }
  const size_t after = device_free_bytes();
  const double leaked_mib = (static_cast<double>(before) - static_cast<double>(after)) / (1024.0 * 1024.0);
  // cudaMemGetInfo has 2 MiB page granularity; anything per-request would show
  // up as tens of MiB over 200 requests and 5 loads.
  QVERIFY2(leaked_mib <= 2.0, ("device memory lost: " + std::to_string(leaked_mib) + " MiB").c_str());
}

}  // namespace test_cuda_golden
