// KvEvent: one change of block ownership or cache state, for observers (the KV
// page-map view, the trace, tests). BlockPool and KvCacheManager append events in
// the order things happen; the engine drains them once per step and forwards them
// as trace events. Plain values; the engine thread produces them.
#pragma once

#include <cstdint>

#include "core/ids.h"

namespace gb {

enum class KvEventKind : uint8_t {
  Allocated,  // a free (or evicted cached) block handed to `request`
  Evicted,    // a cached block's prefix entry dropped (reused for new data, or evict())
  Cached,     // a full block committed to the prefix index (hash = its hash)
  PrefixHit,  // `request` took a reference on a committed block by prefix match
  Shared,     // fork: `request` (the child) took a reference on a parent's full block
  Copied,     // copy-on-write: `other_block` (source) copied into `block` for `request`
  Released,   // `request` dropped its reference; others may still hold the block
  Freed,      // last reference gone: the block is now free, or cached if it is indexed
  Uncached,   // a committed block's hash dropped because its contents will change
  // Sliding window (every layer slides): `request` dropped its reference because
  // no future query of it can read the block (a Freed follows at ref_count 0).
  // block -1: a fork child's table slot that starts out released (the parent had
  // already let that block go); no block changes.
  WindowReleased,
  Lookahead,  // a free block lent to `request` as lookahead scratch (self-draft's drafted
              // positions), outside its block table; given back with Released + Freed
};

const char* kv_event_kind_name(KvEventKind kind);

inline constexpr RequestId kNoRequest{~uint64_t{0}};

struct KvEvent {
  KvEventKind kind = KvEventKind::Allocated;
  BlockId block{-1};
  RequestId request = kNoRequest;  // kNoRequest for pool-internal events (eviction)
  BlockId other_block{-1};         // Copied: the source block
  int32_t ref_count = 0;           // the block's ref_count after the event
  uint64_t hash = 0;               // Cached / Evicted / Uncached: the block hash
};

}  // namespace gb
