#include "backend/cuda/step_metadata.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace gb::cuda {
namespace {

Error bad_batch(const std::string& what) { return make_error("CUDA backend: invalid batch: " + what); }

// Array sizes, and every token id, block id and logit row against the
// vocabulary, the pool and the batch.
Status check_arrays(const BatchLayout& b, int32_t vocab_size, int32_t num_pool_blocks, int32_t pool_block_size) {
  const int32_t num_tokens = b.num_tokens(), num_seqs = b.num_seqs();
  if (b.block_size != pool_block_size)
    return bad_batch("block size " + std::to_string(b.block_size) + " but the KV pool uses " +
                     std::to_string(pool_block_size));
  if (static_cast<int32_t>(b.positions.size()) != num_tokens ||
      static_cast<int32_t>(b.seq_token_indptr.size()) != num_seqs + 1 ||
      static_cast<int32_t>(b.block_indptr.size()) != num_seqs + 1 || b.seq_token_indptr.front() != 0 ||
      b.seq_token_indptr.back() != num_tokens || b.block_indptr.front() != 0 ||
      b.block_indptr.back() != static_cast<int32_t>(b.block_ids.size()))
    return bad_batch("array sizes disagree");
  for (TokenId id : b.token_ids)
    if (id < 0 || id >= vocab_size) return bad_batch("token id " + std::to_string(id) + " outside the vocabulary");
  // -1 is a block released by the sliding window (kv/block_table.h). The
  // attention kernels read no key before a query's window, so a released block
  // is allowed only wholly before the window of the sequence's first new token
  // (checked per sequence in plan_sequences); it is never indexed.
  for (int32_t blk : b.block_ids)
    if (blk != -1 && (blk < 0 || blk >= num_pool_blocks))
      return bad_batch("block id " + std::to_string(blk) + " outside the pool");
  for (int32_t row : b.logit_token_indices)
    if (row < 0 || row >= num_tokens) return bad_batch("logit row " + std::to_string(row) + " is not a token");
  return {};
}

// What the kernels need from the batch's sequences.
struct SequencePlan {
  std::vector<int32_t> slot_mapping;  // (num_tokens) block * block_size + slot of each new token
  std::vector<PrefillTile> tiles;     // kPrefillTileTokens-sized runs of one sequence's new tokens
  int32_t max_kv_len = 0;
  bool decode_only = false;  // every sequence has exactly one new token
};

// Per sequence: its lengths and block table checked (no released block inside
// the window its new tokens read), each new token's KV slot, its prefill tiles.
Result<SequencePlan> plan_sequences(const BatchLayout& b, int32_t pool_block_size, int32_t release_window) {
  const int32_t num_seqs = b.num_seqs();
  SequencePlan p;
  p.slot_mapping.resize(static_cast<size_t>(b.num_tokens()));
  p.decode_only = num_seqs > 0;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t first = b.seq_token_indptr[s], last = b.seq_token_indptr[s + 1];
    const int32_t num_new = last - first, kv_len = b.seq_kv_len[s];
    const int32_t table_len = b.block_indptr[s + 1] - b.block_indptr[s];
    if (num_new < 0 || kv_len < num_new || int64_t{table_len} * pool_block_size < kv_len)
      return bad_batch("sequence " + std::to_string(s) + " has inconsistent lengths or too short a block table");
    // Positions some new token of this sequence may read start here.
    const int32_t first_read = release_window > 0 ? std::max(0, kv_len - num_new - release_window + 1) : 0;
    for (int32_t i = first_read / pool_block_size; i < table_len && int64_t{i} * pool_block_size < kv_len; ++i)
      if (b.block_ids[b.block_indptr[s] + i] == -1)
        return bad_batch("sequence " + std::to_string(s) + " reads block " + std::to_string(i) +
                         " of its table, which the sliding window released");
    p.decode_only = p.decode_only && num_new == 1;
    p.max_kv_len = std::max(p.max_kv_len, kv_len);
    for (int32_t t = first; t < last; ++t) {
      const int32_t pos = b.positions[t];
      if (pos != kv_len - num_new + (t - first))
        return bad_batch("sequence " + std::to_string(s) + ": new tokens must fill positions kv_len - n ... kv_len - 1");
      const int32_t blk = b.block_ids[b.block_indptr[s] + pos / pool_block_size];
      p.slot_mapping[t] = blk * pool_block_size + pos % pool_block_size;
    }
    for (int32_t t = first; t < last; t += kPrefillTileTokens)
      p.tiles.push_back({s, t, std::min(kPrefillTileTokens, last - t)});
  }
  return p;
}

}  // namespace

Status StepMetadata::reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_logits, int32_t max_blocks_per_seq) {
  const size_t t = static_cast<size_t>(std::max(0, max_tokens)), s = static_cast<size_t>(std::max(0, max_seqs));
  // plan()'s packing: ids, positions and slots per token; two indptrs and the
  // KV lengths per sequence; the block tables; logit rows; three ints per tile.
  const size_t tiles = t / static_cast<size_t>(kPrefillTileTokens) + s;
  const size_t ints = 3 * t + 3 * s + 2 + s * static_cast<size_t>(std::max(0, max_blocks_per_seq)) +
                      static_cast<size_t>(std::max(0, max_logits)) + 3 * tiles;
  GB_TRY(staging_.reserve(ints * sizeof(int32_t), "step metadata"));
  return device_buffer_.reserve(ints * sizeof(int32_t), "step metadata");
}

Status StepMetadata::plan(const BatchLayout& b, int32_t vocab_size, int32_t num_pool_blocks,
                          int32_t pool_block_size, int32_t release_window, cudaStream_t stream) {
  GB_TRY(check_arrays(b, vocab_size, num_pool_blocks, pool_block_size));
  auto planned = plan_sequences(b, pool_block_size, release_window);
  if (!planned) return planned.error();
  const std::vector<int32_t>& slot_mapping = planned->slot_mapping;
  const std::vector<PrefillTile>& tiles = planned->tiles;
  max_kv_len_ = planned->max_kv_len;
  decode_only_ = planned->decode_only;
  num_tiles_ = static_cast<int32_t>(tiles.size());

  packed_.clear();
  auto append = [&](const int32_t* p, size_t n) {
    const size_t at = packed_.size();
    packed_.insert(packed_.end(), p, p + n);
    return at;
  };
  const size_t o_tokens = append(b.token_ids.data(), b.token_ids.size());
  const size_t o_pos = append(b.positions.data(), b.positions.size());
  const size_t o_tok_indptr = append(b.seq_token_indptr.data(), b.seq_token_indptr.size());
  const size_t o_kv_len = append(b.seq_kv_len.data(), b.seq_kv_len.size());
  const size_t o_blk_indptr = append(b.block_indptr.data(), b.block_indptr.size());
  const size_t o_blk = append(b.block_ids.data(), b.block_ids.size());
  const size_t o_logit = append(b.logit_token_indices.data(), b.logit_token_indices.size());
  const size_t o_slots = append(slot_mapping.data(), slot_mapping.size());
  static_assert(sizeof(PrefillTile) == 3 * sizeof(int32_t));
  const size_t o_tiles = packed_.size();
  packed_.resize(o_tiles + 3 * tiles.size());
  if (!tiles.empty()) std::memcpy(packed_.data() + o_tiles, tiles.data(), tiles.size() * sizeof(PrefillTile));

  const size_t bytes = packed_.size() * sizeof(int32_t);
  GB_TRY(staging_.reserve(bytes, "step metadata"));
  GB_TRY(device_buffer_.reserve(bytes, "step metadata"));
  std::memcpy(staging_.as<int32_t>(), packed_.data(), bytes);
  GB_CUDA_TRY(cudaMemcpyAsync(device_buffer_.get(), staging_.as<int32_t>(), bytes, cudaMemcpyHostToDevice, stream));

  const int32_t* d = device_buffer_.as<int32_t>();
  device_.token_ids = d + o_tokens;
  device_.positions = d + o_pos;
  device_.seq_token_indptr = d + o_tok_indptr;
  device_.seq_kv_len = d + o_kv_len;
  device_.block_indptr = d + o_blk_indptr;
  device_.block_ids = d + o_blk;
  device_.logit_rows = d + o_logit;
  device_.slot_mapping = d + o_slots;
  device_.tiles = reinterpret_cast<const PrefillTile*>(d + o_tiles);
  return {};
}

}  // namespace gb::cuda
