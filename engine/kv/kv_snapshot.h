// KvSnapshot: a copy of the pool's state for drawing a page map (one cell per
// block: state, who holds it, how full, which tokens) and for tests. Taken by the
// engine thread, then a plain value any thread may read.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ids.h"
#include "kv/kv_block.h"

namespace gb {

struct KvBlockView {
  BlockId id{-1};
  BlockState state = BlockState::Free;
  int32_t ref_count = 0;
  int32_t num_filled = 0;            // slots with valid tokens
  bool has_hash = false;             // committed to the prefix cache
  uint64_t hash = 0;
  std::vector<RequestId> owners;     // requests whose tables hold it, ascending
  bool lookahead = false;            // lent to its owner as lookahead scratch (KvCacheManager)
  std::vector<TokenId> tokens;       // (num_filled) token ids in slot order
  bool window_released = false;      // unheld since it left its last holder's sliding window
};

struct KvSnapshot {
  int32_t block_size = 0;
  int32_t num_free = 0;
  int32_t num_cached = 0;
  int32_t num_owned = 0;
  std::vector<KvBlockView> blocks;   // (num_blocks), index = block id
  std::vector<int32_t> free_queue;   // block ids, next to allocate first
  // Sliding window (0: blocks are never released before a request ends).
  int32_t sliding_window = 0;
  int32_t num_window_released = 0;        // free or cached blocks marked window_released
  int64_t num_window_released_total = 0;  // WindowReleased events so far
  int32_t num_table_slots_released = 0;   // released entries in the live tables
};

}  // namespace gb
