// BlockTable: one request's view of the KV cache -- the ordered block ids that
// hold its tokens, and how far they are filled and computed. Owned by the
// KvCacheManager; read by the scheduler when it builds a StepPlan.
//
//   position p of the request lives in blocks[p / block_size], slot p % block_size
//
//   | block 0 (full, committed) | block 1 (full) | block 2 (partial) |
//   |<------------ num_computed ------------>|<-new->|
//   |<------------------- num_tokens ------------------>|
//
// Sliding window (KvCacheManager with a window W, every layer sliding): a block
// whose every position is older than any future query can read (block end <=
// num_computed - W + 1) is released and its entry becomes kReleasedBlock (-1):
//
//   | -1 | -1 | block 7 | block 2 | block 9 (partial) |
//   |<-num_released->|<------ live blocks ------>|
//
// Invariants: blocks.size() == ceil(num_tokens / block_size); num_computed <=
// num_tokens; exactly the first num_released entries are kReleasedBlock; the
// first num_committed_blocks blocks carry a prefix hash (prefix_chain keeps
// those hashes, so a released parent still chains its child); a table never
// holds one block twice.
//
// Thread: engine thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ids.h"

namespace gb {

// One copy-on-write for the backend to execute before the next forward pass:
// every layer's K and V of block src copied into block dst.
struct BlockCopy {
  BlockId src{-1};
  BlockId dst{-1};
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

// The table entry of a block released by the sliding window.
inline constexpr BlockId kReleasedBlock{-1};

// Hash and serial of one committed block: the parent link of the next one.
struct PrefixLink {
  uint64_t hash = 0;
  uint64_t serial = 0;  // PrefixSerial
};

// ceil(a / b) for a >= 0, b > 0: the blocks that a tokens fill at b tokens a block.
inline int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

struct BlockTable {
  std::vector<BlockId> blocks;       // (ceil(num_tokens / block_size)), kReleasedBlock for released ones
  int32_t num_tokens = 0;            // slots holding this request's tokens
  int32_t num_computed = 0;          // leading tokens whose K/V the backend has written
  int32_t num_committed_blocks = 0;  // leading full blocks with a prefix hash
  int32_t num_released = 0;          // leading entries released by the sliding window
  std::vector<PrefixLink> prefix_chain;  // (num_committed_blocks) their hashes, released ones included
  uint32_t isolation_id = 0;         // interned IsolationKey
  bool use_prefix_cache = true;      // commit full blocks for reuse by others

  int32_t num_blocks() const { return static_cast<int32_t>(blocks.size()); }
  // Blocks this table holds now (not released).
  int32_t num_live_blocks() const { return num_blocks() - num_released; }
  // Plain ids for the backend seam (BatchLayout::block_ids); released entries
  // are -1, which a backend reads only when the model's window says it must not.
  std::vector<int32_t> block_ids() const {
    std::vector<int32_t> out;
    out.reserve(blocks.size());
    for (BlockId b : blocks) out.push_back(b.value);
    return out;
  }
};

}  // namespace gb
