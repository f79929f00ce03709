// The CPU backend's load-time repacking (backend/cpu_weights.h) on a real
// quantized file (../shared/models/quant-llama): which matrices it repacks, that
// backends of one model share one copy, and that results keep every bit.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/batch_layout.h"
#include "backend/cpu_backend.h"
#include "backend/cpu_weights.h"
#include "core/thread_pool.h"
#include "cpu/weight_type.h"
#include "gb_test.h"
#include "model/model.h"

namespace {

using gb::kernels::WeightType;

std::shared_ptr<const gb::Model> load(const std::string& path) {
  auto m = gb::load_model(path);
  GB_CHECK_MSG(m.ok(), m.ok() ? "" : m.error().message.c_str());
  return *m;
}

constexpr int32_t kBlockSize = 16, kNumBlocks = 8;

struct Run {
  std::unique_ptr<gb::Backend> backend;
  std::vector<int32_t> table;
  int32_t vocab = 0;
  Run(const std::shared_ptr<const gb::Model>& model, int32_t threads, bool repack) : vocab(model->config.vocab_size) {
    gb::CpuBackendOptions options;
    options.num_threads = threads;
    options.repack_weights = repack;
    backend = gb::make_cpu_backend(model, options);
    GB_CHECK(backend->init_kv_pool({kNumBlocks, kBlockSize}).ok());
    for (int32_t b = 0; b < kNumBlocks; ++b) table.push_back(b);
  }
  std::vector<float> forward(const std::vector<gb::TokenId>& tokens, int32_t start, bool all) {
    gb::BatchLayout batch;
    batch.block_size = kBlockSize;
    batch.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), start, table.data(), kNumBlocks, all);
    std::vector<float> logits(static_cast<size_t>(batch.num_logits()) * static_cast<size_t>(vocab));
    GB_CHECK(backend->forward(batch, logits).ok());
    return logits;
  }
};

}  // namespace

// Every matrix whose type has a CPU layout (Q4_K -> Q4_K_R, Q6_K -> Q6_K_R), and
// nothing else, is held in that layout with the same shape; the model's own
// views still have the file types and point into the file; a second call
// for the same model returns the same copy, and without repacking the views are
// the model's.
GB_TEST(q4_k_matrices_are_repacked_once_per_model) {
  GB_REQUIRE_SHARED(path, "models/quant-llama/quant-llama-Q4_K_M.gguf");
  const auto model = load(path);
  gb::ThreadPool pool(2);
  const auto cw = gb::cpu_weights(model, true, pool);
  QCOMPARE(gb::cpu_weights(model, true, pool).get(), cw.get());
  int repacked = 0;
  const auto layout = [](const gb::TensorView& t) { return gb::kernels::weight_traits(t.dtype).cpu_layout; };
  for (size_t l = 0; l < model->weights.layers.size(); ++l) {
    const gb::LayerWeights& file = model->weights.layers[l];
    const gb::LayerWeights& cpu = cw->weights.layers[l];
    const std::pair<const gb::TensorView*, const gb::TensorView*> pairs[] = {
        {&file.wq, &cpu.wq}, {&file.wk, &cpu.wk}, {&file.wv, &cpu.wv}, {&file.wo, &cpu.wo},
        {&file.w_gate, &cpu.w_gate}, {&file.w_up, &cpu.w_up}, {&file.w_down, &cpu.w_down}};
    for (const auto& [f, c] : pairs) {
      QCOMPARE(c->rows, f->rows);
      QCOMPARE(c->cols, f->cols);
      if (layout(*f) != f->dtype) {
        ++repacked;
        QCOMPARE(c->dtype, layout(*f));
        QVERIFY(c->data != f->data);
      } else {
        QCOMPARE(c->dtype, f->dtype);
        QCOMPARE(c->data, f->data);
      }
    }
  }
  QVERIFY2(repacked > 0, "the Q4_K_M fixture has Q4_K matrices");
  QCOMPARE(cw->repacked_tensors, repacked + (layout(model->weights.classifier) != model->weights.classifier.dtype ? 1 : 0));
  QCOMPARE(cw->weights.classifier.dtype, layout(model->weights.classifier));
  QCOMPARE(model->weights.layers[0].wq.dtype, WeightType::Q4_K);
  const auto plain = gb::cpu_weights(model, false, pool);
  QVERIFY(plain.get() != cw.get());
  QCOMPARE(plain->repacked_tensors, 0);
  QCOMPARE(plain->weights.layers[0].wq.data, model->weights.layers[0].wq.data);
}

// Repacked or read in place, the same file gives the same logits bit for bit:
// a prefill's every position, then token-by-token decoding, with 1 and 2
// threads, on files whose Q4_K matrices sit beside Q6_K / Q5_K / Q3_K ones.
GB_TEST(repacked_weights_give_the_same_logits_bit_for_bit) {
  for (const char* key : {"Q4_K_M", "untied-Q4_K_M", "Q3_K_M"}) {
    GB_REQUIRE_SHARED(path, std::string("models/quant-llama/quant-llama-") + key + ".gguf");
    const std::vector<gb::TokenId> prompt = {1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203, 29889, 13, 1576, 29871};
    for (int32_t threads : {1, 2}) {
      const auto model = load(path);  // a fresh model: the repacked copy is not the other run's
      Run in_place(model, threads, false), repacked(model, threads, true);
      std::vector<float> a = in_place.forward(prompt, 0, true), b = repacked.forward(prompt, 0, true);
      QVERIFY2(a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0,
               (std::string(key) + ": prefill logits differ").c_str());
      for (int32_t k = 0; k < 4; ++k) {
        const auto last = a.end() - model->config.vocab_size;
        const auto next = static_cast<gb::TokenId>(std::max_element(last, a.end()) - last);
        const int32_t pos = static_cast<int32_t>(prompt.size()) + k;
        a = in_place.forward({next}, pos, false);
        b = repacked.forward({next}, pos, false);
        QVERIFY2(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0,
                 (std::string(key) + ": decode logits differ at position " + std::to_string(pos)).c_str());
      }
    }
  }
}
