// KvBlock: the bookkeeping record of one KV block (block_size token slots in every
// layer's K and V; the backend owns the storage, see backend/backend.h). The
// BlockPool owns every KvBlock; nothing else mutates one.
//
// A block is always in exactly one state:
//   Free   ref_count == 0, no hash, in the FreeBlockQueue (front part)
//   Cached ref_count == 0, in the PrefixIndex, in the FreeBlockQueue (back part,
//          least recently freed first) -- reusable by a prefix hit or evictable
//   Owned  ref_count > 0 (held by ref_count block tables), not in the queue; may
//          be committed (hashed) and may or may not be the PrefixIndex's entry
//
// Thread: engine thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ids.h"

namespace gb {

enum class BlockState : uint8_t { Free, Cached, Owned };

const char* block_state_name(BlockState state);

// Serial numbers name one exact content prefix (isolation key + every token from
// position 0 to the end of a block). They are never reused, so a child block that
// records its parent's serial can be verified exactly, even when two different
// prefixes collide in the 64-bit hash.
using PrefixSerial = uint64_t;
constexpr PrefixSerial kNoPrefixSerial = 0;

struct KvBlock {
  BlockId id{-1};
  int32_t ref_count = 0;

  // Token ids whose K/V this block holds, slot order: (num filled slots). For a
  // block shared after a truncation, holders may use only a prefix of it.
  std::vector<TokenId> tokens;

  // Set when the block is full and committed to the prefix cache.
  bool has_hash = false;
  uint64_t hash = 0;                          // chained: (parent hash, tokens, isolation key)
  PrefixSerial serial = kNoPrefixSerial;      // content identity of this prefix
  PrefixSerial parent_serial = kNoPrefixSerial;
  uint32_t isolation_id = 0;                  // interned IsolationKey (see PrefixIndex)
  bool indexed = false;                       // this block is the PrefixIndex's entry
  // Unheld since its last holder released it because it left that request's
  // sliding window (for the KV map); cleared when anyone takes the block again.
  bool window_released = false;

  // FreeBlockQueue links (block indices, -1 = none); valid while in_queue.
  int32_t prev = -1;
  int32_t next = -1;
  bool in_queue = false;

  int32_t num_filled() const { return static_cast<int32_t>(tokens.size()); }
  BlockState state() const {
    if (ref_count > 0) return BlockState::Owned;
    return indexed ? BlockState::Cached : BlockState::Free;
  }
  void clear_hash() {
    has_hash = false;
    hash = 0;
    serial = kNoPrefixSerial;
    parent_serial = kNoPrefixSerial;
    isolation_id = 0;
    indexed = false;
  }
};

}  // namespace gb
