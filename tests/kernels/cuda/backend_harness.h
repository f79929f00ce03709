// Shared driver for the CUDA backend tests: small synthetic models written to a
// temp GGUF and loaded like any file, a toy block allocator that hands out
// scrambled pool blocks, and a Session that keeps a few sequences' tokens and
// block tables and runs steps on any gb::Backend, so the CPU backend (the
// oracle) and the CUDA backend can be driven through identical steps.
// Single-threaded test code.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/dtype.h"
#include "model/model.h"

namespace gbtest::cuda {

// dim 96, hidden 200, 3 layers, 6 heads over 2 kv heads (head_dim 16), vocab 300.
std::shared_ptr<const gb::Model> load_test_model(gb::WeightType dtype, bool tied, std::string* error);

struct Sequence {
  std::vector<int32_t> tokens;        // every token so far (prompt + generated)
  int32_t num_cached = 0;             // tokens whose K/V are in the pool
  std::vector<int32_t> block_table;   // pool block ids, in position order
};

// Hands out pool blocks in a seeded random order (or in order when seed == 0).
class ScrambledBlocks {
 public:
  ScrambledBlocks(int32_t num_blocks, uint32_t seed);
  int32_t take();

 private:
  std::vector<int32_t> free_;
};

struct StepSpec {
  int32_t seq;          // index into the session's sequences
  int32_t num_new;      // tokens of that sequence to compute this step
  bool all_logits;      // logits for every new token, or for the last one only
};

// Builds the step's BatchLayout (growing block tables as needed) and runs it;
// returns the (num_logits, vocab) logits, or an empty vector and *error.
std::vector<float> run_step(gb::Backend& backend, std::vector<Sequence>& seqs, ScrambledBlocks& blocks,
                            int32_t block_size, const std::vector<StepSpec>& specs, int32_t vocab,
                            std::string* error, int32_t num_layers = -1);

int32_t argmax(const float* row, int32_t n);
std::vector<int32_t> random_tokens(size_t n, int32_t vocab, uint32_t seed);

}  // namespace gbtest::cuda
