#include "backend_harness.h"

#include <algorithm>
#include <numeric>

#include "gb_test.h"
#include "model/synthetic_model.h"

namespace gbtest::cuda {

std::shared_ptr<const gb::Model> load_test_model(gb::WeightType dtype, bool tied, std::string* error) {
  gb::SyntheticSpec spec;
  spec.shape = {"cuda-test", 96, 200, 3, 6, 2, 300, 512, tied};
  spec.dtype = dtype;
  spec.seed = 12345;
  const std::string path = gbtest::temp_dir() + "/cuda-test-" + std::string(gb::dtype_info(dtype).name) +
                           (tied ? "-tied" : "-untied") + ".gguf";
  if (gb::Status s = gb::write_synthetic_model(spec, path); !s.ok()) {
    *error = s.error().message;
    return nullptr;
  }
  auto model = gb::load_model(path);
  if (!model.ok()) {
    *error = model.error().message;
    return nullptr;
  }
  return std::move(model).value();
}

ScrambledBlocks::ScrambledBlocks(int32_t num_blocks, uint32_t seed) : free_(static_cast<size_t>(num_blocks)) {
  std::iota(free_.begin(), free_.end(), 0);
  if (seed != 0) {
    std::mt19937 rng(seed);
    std::shuffle(free_.begin(), free_.end(), rng);
  }
  std::reverse(free_.begin(), free_.end());  // take() pops from the back: first handed out = free_[0] before reversal
}

int32_t ScrambledBlocks::take() {
  GB_CHECK_MSG(!free_.empty(), "test pool too small");
  const int32_t b = free_.back();
  free_.pop_back();
  return b;
}

std::vector<float> run_step(gb::Backend& backend, std::vector<Sequence>& seqs, ScrambledBlocks& blocks,
                            int32_t block_size, const std::vector<StepSpec>& specs, int32_t vocab,
                            std::string* error, int32_t num_layers) {
  gb::BatchLayout batch;
  batch.block_size = block_size;
  batch.num_layers = num_layers;
  for (const StepSpec& spec : specs) {
    Sequence& s = seqs[static_cast<size_t>(spec.seq)];
    const int32_t end = s.num_cached + spec.num_new;
    GB_CHECK(end <= static_cast<int32_t>(s.tokens.size()));
    while (static_cast<int32_t>(s.block_table.size()) * block_size < end) s.block_table.push_back(blocks.take());
    batch.add_sequence(s.tokens.data() + s.num_cached, spec.num_new, s.num_cached, s.block_table.data(),
                       static_cast<int32_t>(s.block_table.size()), spec.all_logits);
  }
  std::vector<float> logits(static_cast<size_t>(batch.num_logits()) * static_cast<size_t>(vocab));
  if (gb::Status st = backend.forward(batch, logits); !st.ok()) {
    *error = st.error().message;
    return {};
  }
  for (const StepSpec& spec : specs) seqs[static_cast<size_t>(spec.seq)].num_cached += spec.num_new;
  return logits;
}

int32_t argmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(3, vocab - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

}  // namespace gbtest::cuda
