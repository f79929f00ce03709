// StepMetadata: the CUDA backend's "plan" half. Once per step it validates a
// BatchLayout on the host (every id, position and block index, so a bad batch
// is an error message rather than a device fault), derives what the kernels
// need, and uploads it all with one async copy from pinned memory:
//
//   int32 array on the device, packed:
//   | token_ids (T) | positions (T) | seq_token_indptr (S+1) | seq_kv_len (S) |
//   | block_indptr (S+1) | block_ids (B) | logit_rows (L) | slot_mapping (T) |
//   | prefill tiles (3 * num_tiles) |
//
//   slot_mapping[t] = block * block_size + slot of token t's own position.
//   tiles: kPrefillTileTokens-sized runs of one sequence's new tokens.
// Used by one backend on its thread; the pinned staging buffer must not be
// rewritten before the previous step's copy finished (the backend syncs the
// stream at the end of every step).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/batch_layout.h"
#include "backend/cuda/device_buffer.h"
#include "core/result.h"
#include "cuda/cuda_kernels.h"

namespace gb::cuda {

struct StepDevicePointers {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* seq_token_indptr = nullptr;
  const int32_t* seq_kv_len = nullptr;
  const int32_t* block_indptr = nullptr;
  const int32_t* block_ids = nullptr;
  const int32_t* logit_rows = nullptr;
  const int32_t* slot_mapping = nullptr;
  const PrefillTile* tiles = nullptr;
};

class StepMetadata {
 public:
  // Validates `batch` against the model and pool, packs and enqueues the upload.
  // `release_window`: ModelConfig::kv_release_window() (0: none); with it a
  // table may hold released blocks (-1) wholly before every new token's window.
  Status plan(const BatchLayout& batch, int32_t vocab_size, int32_t num_pool_blocks, int32_t pool_block_size,
              int32_t release_window,
              cudaStream_t stream);

  // Sizes the upload buffers for the largest step (Backend::reserve_work), so
  // plan() allocates nothing for a step within these limits.
  Status reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_logits, int32_t max_blocks_per_seq);

  const StepDevicePointers& device() const { return device_; }
  int32_t num_tiles() const { return num_tiles_; }
  int32_t max_kv_len() const { return max_kv_len_; }
  // True when every sequence has exactly one new token (the decode kernel applies).
  bool decode_only() const { return decode_only_; }
  size_t device_bytes() const { return device_buffer_.bytes(); }

 private:
  std::vector<int32_t> packed_;
  PinnedHostBuffer staging_;
  DeviceBuffer device_buffer_;
  StepDevicePointers device_;
  int32_t num_tiles_ = 0;
  int32_t max_kv_len_ = 0;
  bool decode_only_ = false;
};

}  // namespace gb::cuda
