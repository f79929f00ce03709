// FakePagedModel: a stand-in for a backend + model, for scheduler tests. Its "K/V"
// for position p is a fingerprint chained from the K/V at p-1 (read back through
// the block table) and the token at p, so like a real transformer its output
// depends on the whole context -- but only as stored in the paged cache. A wrong
// block table, a missed copy, a stale or foreign block changes the tokens it
// samples. reference_next_token() computes the same thing straight from a token
// list: the uninterrupted, unbatched, uncached answer.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/batch_layout.h"
#include "core/ids.h"

namespace gbtest {

inline uint64_t fake_kv(uint64_t prev, gb::TokenId token) {
  uint64_t h = prev ^ (static_cast<uint64_t>(token) + 0x9e3779b97f4a7c15ull + (prev << 6) + (prev >> 2));
  h *= 0xff51afd7ed558ccdull;
  return (h ^ (h >> 33)) | 1;  // never 0: 0 marks a slot nobody wrote
}

constexpr gb::TokenId kFakeVocab = 1000;
inline gb::TokenId fake_token_from_kv(uint64_t kv) { return static_cast<gb::TokenId>((kv >> 17) % kFakeVocab); }

inline gb::TokenId reference_next_token(const std::vector<gb::TokenId>& context) {
  uint64_t h = 0x51ed;
  for (gb::TokenId t : context) h = fake_kv(h, t);
  return fake_token_from_kv(h);
}

class FakePagedModel {
 public:
  FakePagedModel(int32_t num_blocks, int32_t block_size)
      : block_size_(block_size), kv_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), 0) {}

  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& copies) {
    for (auto [src, dst] : copies)
      for (int32_t s = 0; s < block_size_; ++s) kv_[index(dst, s)] = kv_[index(src, s)];
  }

  // One token per logit row, in row order. Sets error() on reading an unwritten slot.
  std::vector<gb::TokenId> forward(const gb::BatchLayout& b) {
    std::vector<uint64_t> last(b.token_ids.size());
    for (int32_t s = 0; s < b.num_seqs(); ++s) {
      const int32_t* table = b.block_ids.data() + b.block_indptr[static_cast<size_t>(s)];
      auto slot = [&](int32_t pos) -> uint64_t& {
        return kv_[index(table[pos / block_size_], pos % block_size_)];
      };
      for (int32_t i = b.seq_token_indptr[static_cast<size_t>(s)]; i < b.seq_token_indptr[static_cast<size_t>(s) + 1]; ++i) {
        const int32_t pos = b.positions[static_cast<size_t>(i)];
        uint64_t prev = 0x51ed;
        if (pos > 0) {
          prev = slot(pos - 1);
          if (prev == 0) error_ = "read an unwritten KV slot at position " + std::to_string(pos - 1);
        }
        last[static_cast<size_t>(i)] = slot(pos) = fake_kv(prev, b.token_ids[static_cast<size_t>(i)]);
      }
    }
    std::vector<gb::TokenId> out;
    for (int32_t row : b.logit_token_indices) out.push_back(fake_token_from_kv(last[static_cast<size_t>(row)]));
    return out;
  }

  const std::string& error() const { return error_; }

 private:
  size_t index(int32_t block, int32_t slot) const {
    return static_cast<size_t>(block) * static_cast<size_t>(block_size_) + static_cast<size_t>(slot);
  }
  int32_t block_size_;
  std::vector<uint64_t> kv_;  // (num_blocks, block_size) fingerprints
  std::string error_;
};

}  // namespace gbtest
