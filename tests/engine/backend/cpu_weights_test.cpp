// The CPU backend's load-time repacking (backend/cpu_weights.h) on a real
// quantized file (../shared/models/quant-llama): which matrices it repacks, that
// backends of one model share one copy, and that results keep every bit. And
// the bf16 matmuls option: which matrices it rounds to BF16, to which values,
// and that a backend with it computes what a model holding those BF16 matrices
// computes, bit for bit. And huge pages: every matrix held in one region, the
// unchanged ones copied byte for byte, the same logits.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/batch_layout.h"
#include "backend/cpu_backend.h"
#include "backend/cpu_weights.h"
#include "core/host_region.h"
#include "core/thread_pool.h"
#include "cpu/convert.h"
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
  Run(const std::shared_ptr<const gb::Model>& model, int32_t threads, bool repack, bool bf16_matmuls = false,
      bool huge_pages = false)
      : vocab(model->config.vocab_size) {
    gb::CpuBackendOptions options;
    options.num_threads = threads;
    options.repack_weights = repack;
    options.bf16_matmuls = bf16_matmuls;
    options.huge_pages = huge_pages;
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

// A prefill of every position of `prompt`, then four tokens decoded greedily
// (a's choice) one at a time: a and b give the same logits bit for bit.
void expect_same_logits(Run& a, Run& b, const std::vector<gb::TokenId>& prompt, const std::string& what) {
  std::vector<float> x = a.forward(prompt, 0, true), y = b.forward(prompt, 0, true);
  QVERIFY2(x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0,
           (what + ": prefill logits differ").c_str());
  for (int32_t k = 0; k < 4; ++k) {
    const auto last = x.end() - a.vocab;
    const auto next = static_cast<gb::TokenId>(std::max_element(last, x.end()) - last);
    const int32_t pos = static_cast<int32_t>(prompt.size()) + k;
    x = a.forward({next}, pos, false);
    y = b.forward({next}, pos, false);
    QVERIFY2(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0,
             (what + ": decode logits differ at position " + std::to_string(pos)).c_str());
  }
}

// Every matrix a CPU matmul reads: each layer's, then the classifier.
std::vector<gb::TensorView*> matrices(gb::ModelWeights& w) {
  std::vector<gb::TensorView*> out;
  for (gb::LayerWeights& l : w.layers)
    for (gb::TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wqkv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) out.push_back(t);
  out.push_back(&w.classifier);
  return out;
}

bool is_float_matrix(const gb::TensorView& t) {
  return t.data != nullptr && (t.dtype == WeightType::F32 || t.dtype == WeightType::F16);
}

// Value i of a float matrix as float32, from its file bytes.
float float_value(const gb::TensorView& t, size_t i) {
  if (t.dtype == WeightType::F32) return static_cast<const float*>(t.data)[i];
  return gb::kernels::f16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
}

// The F16 fixtures: tied (quant-llama: the classifier is the token embedding)
// and untied (stories260K).
constexpr const char* kF16Files[] = {"models/quant-llama/quant-llama-F16.gguf", "models/stories260K/stories260K-F16.gguf"};

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
  const gb::CpuWeightsOptions layouts_only{.huge_pages = false};
  const auto cw = gb::cpu_weights(model, layouts_only, pool);
  QCOMPARE(gb::cpu_weights(model, layouts_only, pool).get(), cw.get());
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
  const auto plain = gb::cpu_weights(model, {.repack = false, .huge_pages = false}, pool);
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
      expect_same_logits(in_place, repacked, prompt, key);
      if (QTest::currentTestFailed()) return;
    }
  }
}

// bf16_matmuls: every F32/F16 matrix (the classifier too) is held as BF16, each
// value rounded to nearest even from the file's value; the token embedding
// keeps the file's bytes; the copy is shared by backends asking the same and
// is not the exact one; quantized matrices keep their (repacked) types.
GB_TEST(bf16_matmuls_round_the_float_matrices_to_bf16) {
  gb::ThreadPool pool(2);
  for (const char* key : kF16Files) {
    GB_REQUIRE_SHARED(path, key);
    const auto model = load(path);
    const auto cw = gb::cpu_weights(model, {.bf16_matmuls = true}, pool);
    QCOMPARE(gb::cpu_weights(model, {.bf16_matmuls = true}, pool).get(), cw.get());
    const auto exact = gb::cpu_weights(model, {}, pool);
    QVERIFY(exact.get() != cw.get());
    QCOMPARE(exact->bf16_tensors, 0);
    gb::ModelWeights file = model->weights, held = cw->weights;
    const auto file_m = matrices(file), held_m = matrices(held);
    int rounded = 0;
    for (size_t m = 0; m < file_m.size(); ++m) {
      const gb::TensorView& f = *file_m[m];
      const gb::TensorView& h = *held_m[m];
      if (!is_float_matrix(f)) {  // the file's bytes (in place, or copied into huge pages)
        QCOMPARE(h.dtype, gb::kernels::weight_traits(f.dtype).cpu_layout);
        QVERIFY(f.data == nullptr || h.dtype != f.dtype || std::memcmp(h.data, f.data, f.num_bytes()) == 0);
        continue;
      }
      ++rounded;
      QCOMPARE(h.dtype, WeightType::BF16);
      QCOMPARE(h.rows, f.rows);
      QCOMPARE(h.cols, f.cols);
      const auto* bf = static_cast<const uint16_t*>(h.data);
      const size_t n = static_cast<size_t>(f.rows) * static_cast<size_t>(f.cols);
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) wrong += bf[i] != gb::kernels::f32_to_bf16(float_value(f, i));
      QVERIFY2(wrong == 0, (std::string(key) + ": " + std::to_string(wrong) + " values not rounded to nearest even").c_str());
    }
    QVERIFY(rounded > 0);
    QCOMPARE(cw->bf16_tensors, rounded);
    QCOMPARE(cw->weights.token_embedding.data, model->weights.token_embedding.data);
    QCOMPARE(cw->weights.token_embedding.dtype, model->weights.token_embedding.dtype);
  }
  GB_REQUIRE_SHARED(q4, "models/quant-llama/quant-llama-Q4_K_M.gguf");
  const auto quant = load(q4);
  const auto a = gb::cpu_weights(quant, {.bf16_matmuls = true}, pool), b = gb::cpu_weights(quant, {}, pool);
  QCOMPARE(a->bf16_tensors, 0);
  QCOMPARE(a->repacked_tensors, b->repacked_tensors);
  QCOMPARE(a->weights.layers[0].w_down.dtype, b->weights.layers[0].w_down.dtype);
}

// A backend with bf16_matmuls gives, bit for bit, the logits of the same model
// whose float matrices this test rounded to BF16 itself (scalar f32_to_bf16),
// run as it is: prefill of every position, then decoding token by token, at
// 1 and 2 threads.
GB_TEST(bf16_matmuls_compute_what_a_model_holding_bf16_matrices_computes) {
  for (const char* key : kF16Files) {
    GB_REQUIRE_SHARED(path, key);
    const auto model = load(path);
    auto rounded = std::make_shared<gb::Model>(*model);
    for (gb::TensorView* t : matrices(rounded->weights)) {
      if (!is_float_matrix(*t)) continue;
      const size_t n = static_cast<size_t>(t->rows) * static_cast<size_t>(t->cols);
      std::vector<std::byte> bytes(n * sizeof(uint16_t));
      auto* bf = reinterpret_cast<uint16_t*>(bytes.data());
      for (size_t i = 0; i < n; ++i) bf[i] = gb::kernels::f32_to_bf16(float_value(*t, i));
      rounded->owned_buffers.push_back(std::move(bytes));
      t->data = rounded->owned_buffers.back().data();
      t->dtype = WeightType::BF16;
    }
    const std::vector<gb::TokenId> prompt = {1, 45, 300, 172, 12, 499, 7, 88, 260, 31, 400, 2, 64, 128, 5};
    for (int32_t threads : {1, 2}) {
      Run option(model, threads, true, true), held(rounded, threads, true);
      expect_same_logits(option, held, prompt, key);
      if (QTest::currentTestFailed()) return;
    }
  }
}

// The memory a CPU backend reports: the KV pool and the file's weights, less the
// file bytes of every matrix the backend holds itself (its pages are handed
// back; a classifier tied to the token embedding's too: lookups fault back only
// the rows they read), plus those copies; with huge pages every matrix is held.
// Worked out here from the file's views and the weight-type table.
GB_TEST(memory_used_counts_the_copies_not_the_released_pages) {
  struct Case {
    const char* key;
    bool bf16;
  };
  // Unchanged copies are made only where the kernel gives huge pages.
  const bool thp = gb::transparent_huge_pages_available();
  for (const bool huge : {false, true}) {
    for (const Case c : {Case{"models/quant-llama/quant-llama-Q4_K_M.gguf", false},
                         Case{"models/quant-llama/quant-llama-F16.gguf", true},
                         Case{"models/stories260K/stories260K-F16.gguf", true},
                         Case{"models/quant-llama/quant-llama-F16.gguf", false}}) {
      GB_REQUIRE_SHARED(path, c.key);
      const auto model = load(path);
      Run run(model, 1, true, c.bf16, huge);
      size_t released = 0, copies = 0;
      gb::ModelWeights file = model->weights;
      for (gb::TensorView* t : matrices(file)) {
        if (t->data == nullptr) continue;
        const WeightType held = c.bf16 && is_float_matrix(*t) ? WeightType::BF16
                                                              : gb::kernels::weight_traits(t->dtype).cpu_layout;
        if (held == t->dtype && !(huge && thp)) continue;
        copies += *gb::kernels::weight_bytes(held, static_cast<uint64_t>(t->cols)) * static_cast<size_t>(t->rows);
        released += t->num_bytes();
      }
      const gb::DeviceInfo info = run.backend->device_info();
      QCOMPARE(info.memory_used_bytes, run.backend->kv_pool_bytes() + model->weight_bytes() - released + copies);
      QVERIFY2(copies > 0 || (!c.bf16 && !(huge && thp) && std::string(c.key).find("F16") != std::string::npos), c.key);
    }
  }
}

// huge_pages (the default): every matrix the CPU reads is held in one region on
// a 2 MiB boundary, each 64-byte aligned: those with a CPU layout in it, the
// others as the file's bytes unchanged; the file's pages behind them handed
// back. Without transparent huge pages in the kernel, or with
// GLASSBOX_CPU_HUGE_PAGES=0, nothing is copied.
GB_TEST(huge_pages_hold_every_matrix_in_one_region) {
  gb::ThreadPool pool(2);
  for (const char* key : {"models/quant-llama/quant-llama-Q4_K_M.gguf", "models/quant-llama/quant-llama-Q8_0.gguf",
                          "models/stories260K/stories260K-F16.gguf"}) {
    GB_REQUIRE_SHARED(path, key);
    const auto model = load(path);
    const auto cw = gb::cpu_weights(model, {}, pool);
    gb::ModelWeights file = model->weights, held = cw->weights;
    const auto file_m = matrices(file), held_m = matrices(held);
    if (!gb::transparent_huge_pages_available()) {
      QCOMPARE(cw->copied_tensors, 0);
      QVERIFY(!cw->huge_pages);
      continue;
    }
    QVERIFY(cw->huge_pages);
    QCOMPARE(cw->buffers.size(), size_t{1});
    const auto* region = cw->buffers[0].get();
    QCOMPARE(reinterpret_cast<uintptr_t>(region) % (uintptr_t{2} << 20), uintptr_t{0});
    int copied = 0, in_layout = 0;
    size_t bytes = 0;
    for (size_t m = 0; m < file_m.size(); ++m) {
      const gb::TensorView& f = *file_m[m];
      const gb::TensorView& h = *held_m[m];
      if (f.data == nullptr) continue;
      const auto* p = static_cast<const std::byte*>(h.data);
      QVERIFY2(p >= region && p + h.num_bytes() <= region + cw->owned_bytes + 64 * file_m.size(), key);
      QCOMPARE(reinterpret_cast<uintptr_t>(p) % 64, uintptr_t{0});
      QCOMPARE(h.rows, f.rows);
      QCOMPARE(h.cols, f.cols);
      bytes += h.num_bytes();
      if (h.dtype != f.dtype) {
        QCOMPARE(h.dtype, gb::kernels::weight_traits(f.dtype).cpu_layout);
        ++in_layout;
        continue;
      }
      ++copied;
      QVERIFY2(std::memcmp(h.data, f.data, f.num_bytes()) == 0, (std::string(key) + ": a copied matrix differs").c_str());
    }
    // quant-llama's Q4_K_M file holds only Q4_K and Q6_K matrices: all in a CPU layout.
    QVERIFY2(std::string(key).find("Q4_K_M") != std::string::npos ? in_layout > 0 && copied == 0 : copied > 0, key);
    QCOMPARE(cw->copied_tensors, copied);
    QCOMPARE(cw->repacked_tensors, in_layout);
    QCOMPARE(cw->owned_bytes, bytes);
  }
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K-F16.gguf");
  const auto model = load(path);
  ::setenv("GLASSBOX_CPU_HUGE_PAGES", "0", 1);
  const auto off = gb::cpu_weights(model, {}, pool);
  ::unsetenv("GLASSBOX_CPU_HUGE_PAGES");
  QCOMPARE(off->copied_tensors, 0);
  QVERIFY(!off->huge_pages);
  QCOMPARE(off->weights.layers[0].wq.data, model->weights.layers[0].wq.data);
}

// In huge pages or read from the file, the same logits bit for bit (prefill of
// every position, then decoding token by token, 1 and 2 threads).
GB_TEST(huge_page_copies_give_the_same_logits_bit_for_bit) {
  for (const char* key : {"models/quant-llama/quant-llama-Q8_0.gguf", "models/stories260K/stories260K-F16.gguf"}) {
    GB_REQUIRE_SHARED(path, key);
    const std::vector<gb::TokenId> prompt = {1, 45, 300, 172, 12, 499, 7, 88, 260, 31, 400, 2, 64, 128, 5};
    for (int32_t threads : {1, 2}) {
      const auto model = load(path);
      Run in_file(model, threads, true, false, false), huge(model, threads, true, false, true);
      expect_same_logits(in_file, huge, prompt, key);
      if (QTest::currentTestFailed()) return;
    }
  }
}

// The CPU pool commits memory as blocks are written and gives back the pages
// of blocks the engine reports free (Backend::release_block_memory): those read
// as zeros afterwards, other blocks keep every value, and a forward pass over a
// released block writes it again like a fresh one.
GB_TEST(released_blocks_give_their_pages_back_and_read_as_zeros) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  const auto model = load(path);
  const int32_t bs = 512, blocks = 4;  // 512 slots x 64 bytes (F16 K row) = 8 pages per block and plane
  auto backend = gb::make_cpu_backend(model, {});
  QVERIFY(backend->init_kv_pool({blocks, bs, WeightType::F16, WeightType::F16}).ok());
  QCOMPARE(backend->kv_resident_bytes(), size_t{0});
  std::vector<gb::TokenId> tokens;
  for (int i = 0; i < 200; ++i) tokens.push_back(300 + i);
  const auto run = [&](int32_t block) -> std::vector<float> {
    gb::BatchLayout batch;
    batch.block_size = bs;
    const int32_t table[1] = {block};
    batch.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), 0, table, 1, false);
    std::vector<float> logits(static_cast<size_t>(model->config.vocab_size));
    if (!backend->forward(batch, logits).ok()) logits.clear();
    return logits;
  };
  const std::vector<float> first = run(2);
  QVERIFY(!first.empty());
  run(1);
  const size_t both = backend->kv_resident_bytes();
  QVERIFY(both > 0);
  const int32_t kv_dim = model->config.kv_dim();
  std::vector<float> k(static_cast<size_t>(kv_dim)), v(k.size()), k1(k.size()), v1(k.size());
  QVERIFY(backend->read_kv_slot(0, 1, 7, k1, v1).ok());
  const int32_t release[1] = {2};
  backend->release_block_memory(release);
  QVERIFY2(backend->kv_resident_bytes() < both, std::to_string(backend->kv_resident_bytes()).c_str());
  QVERIFY(backend->read_kv_slot(0, 2, 7, k, v).ok());
  QVERIFY(std::all_of(k.begin(), k.end(), [](float x) { return x == 0.0f; }));
  QVERIFY(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; }));
  QVERIFY(backend->read_kv_slot(0, 1, 7, k, v).ok());  // the other block keeps its values
  QVERIFY(k == k1 && v == v1);
  QVERIFY(run(2) == first);  // written again, the same results
}
