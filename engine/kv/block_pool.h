// BlockPool: who holds which KV block. A fixed number of blocks of block_size
// token slots; each block is free, cached or owned (see kv_block.h). Unheld blocks
// live in a FreeBlockQueue (free ones first, then cached ones in LRU order), full
// committed blocks are found through a PrefixIndex. The pool never touches K/V
// data: it tells the caller which block ids to use, and the backend stores K/V at
// those ids.
//
// No null block: every id 0 .. num_blocks-1 is a real block. Block tables cross
// the backend seam unpadded (CSR, see backend/batch_layout.h), so no placeholder
// id is needed, and none can leak.
//
// Invariants (check_invariants): free + cached + owned = num_blocks; ref_count =
// the number of block tables holding the block (the caller supplies those counts);
// in queue <=> ref_count 0; the queue's links are consistent and free blocks come
// before cached ones; every index entry points at an indexed block whose stored
// hash matches, and lookups find that very block; free blocks hold no hash and no
// tokens; committed blocks are full; only unheld blocks are marked window_released.
//
// Thread: engine thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/result.h"
#include "kv/free_block_queue.h"
#include "kv/kv_event.h"
#include "kv/prefix_index.h"

namespace gb {

class BlockPool {
 public:
  // record_events false: drain_events() stays empty (a private pool nobody
  // observes, e.g. a draft model's).
  BlockPool(int32_t num_blocks, int32_t block_size, bool record_events = true);
  BlockPool(const BlockPool&) = delete;  // the queue points into blocks_
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_owned() const { return num_owned_; }
  int32_t num_cached() const { return num_cached_; }
  int32_t num_free() const { return queue_.size() - num_cached_; }
  // Blocks allocate() can hand out now (free + cached).
  int32_t num_available() const { return queue_.size(); }

  const KvBlock& block(BlockId id) const;
  // Block indices in queue order, front (next to allocate) to back.
  std::vector<int32_t> free_queue_order() const { return queue_.to_vector(); }

  // --- ownership -------------------------------------------------------------
  // Pops the queue front for `request` (ref_count 1, empty); a cached block loses
  // its prefix entry first. nullopt when no block is available. `why` is
  // Allocated (a block-table block) or Lookahead (scratch outside the table).
  std::optional<BlockId> allocate(RequestId request, KvEventKind why = KvEventKind::Allocated);
  // One more holder. A cached block (ref_count 0) is revived out of the queue.
  // `why` is PrefixHit or Shared.
  void retain(BlockId id, RequestId request, KvEventKind why);
  // One holder fewer. At 0 an indexed block becomes cached (queue back, most
  // recently freed), any other block becomes free (queue front, hash and tokens gone).
  // `why` is Released, or WindowReleased when the block left the holder's
  // sliding window (the event says so and the block is marked window_released
  // until someone takes it again).
  void release(BlockId id, RequestId request, KvEventKind why = KvEventKind::Released);
  // Records that `request`'s table starts a slot already released (a fork of a
  // sliding-window request past its window); no block changes.
  void note_slot_released(RequestId request);
  // WindowReleased events since the pool was made.
  int64_t num_window_released_total() const { return num_window_released_total_; }

  // --- contents (owned blocks only) -----------------------------------------
  void append_token(BlockId id, TokenId token);
  // Keeps the first num_filled tokens; the block must be uncommitted.
  void truncate_tokens(BlockId id, int32_t num_filled);
  // Replaces the token recorded at `offset` (< num_filled) of a block one
  // request holds and nobody indexes: a slot KV eviction rewrote.
  void set_token(BlockId id, int32_t offset, TokenId token);
  // dst takes the first num_filled tokens of src (copy-on-write bookkeeping; the
  // caller hands the (src, dst) pair to Backend::copy_blocks).
  void copy_tokens(BlockId src, BlockId dst, int32_t num_filled, RequestId request);

  // --- prefix cache ------------------------------------------------------------
  uint32_t intern(const IsolationKey& key) { return index_.intern(key); }
  uint32_t find_isolation_id(const IsolationKey& key) const { return index_.find_key(key); }
  uint64_t root_hash(uint32_t isolation_id) const { return index_.root_hash(isolation_id); }
  uint64_t block_hash(uint64_t parent_hash, std::span<const TokenId> tokens, uint32_t isolation_id) const {
    return index_.block_hash(parent_hash, tokens, isolation_id);
  }
  // The committed block holding exactly `tokens` after the prefix `parent_serial`
  // under `isolation_id`, or nullopt. Does not take a reference.
  std::optional<BlockId> find_cached(uint64_t hash, PrefixSerial parent_serial, std::span<const TokenId> tokens,
                                     uint32_t isolation_id) const;
  // Commits a full owned block. If an equal block is already indexed this one
  // shares its serial but stays unindexed (one index entry per content).
  void commit(BlockId id, uint64_t parent_hash, PrefixSerial parent_serial, uint32_t isolation_id,
              RequestId request);
  // Drops an owned block's hash before its contents change.
  void uncache(BlockId id, RequestId request);
  // Evicts the least recently freed cached block (it becomes free). False if none.
  bool evict_lru_cached();

  // --- observation -------------------------------------------------------------
  // holders[i]: how many block tables hold block i, counted by the caller.
  Status check_invariants(std::span<const int32_t> holders) const;
  std::vector<KvEvent> drain_events();
  void set_hash_mask_for_testing(uint64_t mask) { index_.set_hash_mask_for_testing(mask); }

 private:
  KvBlock& at(BlockId id);
  void note(const KvEvent& e);

  int32_t block_size_;
  std::vector<KvBlock> blocks_;  // (num_blocks), index = BlockId value
  FreeBlockQueue queue_;
  PrefixIndex index_;
  std::vector<KvEvent> events_;  // since the last drain_events()
  bool record_events_ = true;
  int32_t num_owned_ = 0;
  int32_t num_cached_ = 0;
  int64_t num_window_released_total_ = 0;
  PrefixSerial next_serial_ = 1;
};

}  // namespace gb
