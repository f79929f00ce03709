// PrefixIndex: maps the chained hash of a full, committed KV block to the block
// that holds it, so a new request can reuse the KV of a prompt prefix another
// request already computed (prefix caching).
//
// Hash of block i of a sequence:
//   h(-1) = mix(isolation key hash)                      (root; the key is in every hash)
//   h(i)  = mix(h(i-1), token ids of block i, isolation id)
// A hash match is only a candidate. find() accepts it only when the stored block
// has the same isolation id, the same parent serial (the exact verified identity
// of the prefix before it, see kv_block.h) and the same token ids. So a collision,
// even a forced one (set_hash_mask_for_testing(0) makes every hash equal), can
// cost a miss but never share wrong KV.
//
// Several candidates may share one hash (a multimap). At most one block per exact
// content is indexed; a second request that computed the same block keeps its own
// copy unindexed (BlockPool::commit).
//
// Thread: engine thread only (owned by BlockPool).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/isolation_key.h"
#include "kv/kv_block.h"

namespace gb {

class PrefixIndex {
 public:
  // Interns a key: equal keys get the same id (>= 1), different keys different ids.
  uint32_t intern(const IsolationKey& key);
  // The id of an already interned key, or 0 (such a key can have no cached blocks).
  uint32_t find_key(const IsolationKey& key) const;
  uint32_t num_isolation_keys() const { return static_cast<uint32_t>(keys_.size()); }

  uint64_t root_hash(uint32_t isolation_id) const;
  uint64_t block_hash(uint64_t parent_hash, std::span<const TokenId> tokens, uint32_t isolation_id) const;

  // Index of the verified block for this content, or -1.
  int32_t find(const std::vector<KvBlock>& blocks, uint64_t hash, PrefixSerial parent_serial,
               std::span<const TokenId> tokens, uint32_t isolation_id) const;

  void insert(uint64_t hash, int32_t block_index);
  void erase(uint64_t hash, int32_t block_index);
  size_t size() const { return entries_.size(); }

  // (hash, block index) for every entry, for check_invariants.
  std::vector<std::pair<uint64_t, int32_t>> entries() const;

  // Test hook: every hash is ANDed with `mask` (0 makes all blocks collide).
  void set_hash_mask_for_testing(uint64_t mask) { hash_mask_ = mask; }

 private:
  struct KeyEntry {
    IsolationKey key;
    uint64_t hash;
  };
  std::vector<KeyEntry> keys_;  // (num isolation keys); id = index + 1
  std::unordered_multimap<uint64_t, int32_t> entries_;
  uint64_t hash_mask_ = ~uint64_t{0};
};

}  // namespace gb
