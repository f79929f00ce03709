#include "kv/block_pool.h"

#include <string>

#include "core/check.h"

namespace gb {

const char* block_state_name(BlockState state) {
  switch (state) {
    case BlockState::Free: return "free";
    case BlockState::Cached: return "cached";
    case BlockState::Owned: return "owned";
  }
  return "?";
}

const char* kv_event_kind_name(KvEventKind kind) {
  switch (kind) {
    case KvEventKind::Allocated: return "allocated";
    case KvEventKind::Evicted: return "evicted";
    case KvEventKind::Cached: return "cached";
    case KvEventKind::PrefixHit: return "prefix_hit";
    case KvEventKind::Shared: return "shared";
    case KvEventKind::Copied: return "copied";
    case KvEventKind::Released: return "released";
    case KvEventKind::Freed: return "freed";
    case KvEventKind::Uncached: return "uncached";
    case KvEventKind::Lookahead: return "lookahead";
    case KvEventKind::WindowReleased: return "window_released";
  }
  return "?";
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size, bool record_events)
    : block_size_(block_size), blocks_(static_cast<size_t>(num_blocks)), queue_(&blocks_), record_events_(record_events) {
  GB_CHECK(num_blocks > 0 && block_size > 0);
  // Initial order 0, 1, 2, ...: allocation hands out ascending ids, which keeps
  // hand-written test scenarios readable.
  for (int32_t i = 0; i < num_blocks; ++i) {
    blocks_[static_cast<size_t>(i)].id = BlockId{i};
    blocks_[static_cast<size_t>(i)].tokens.reserve(static_cast<size_t>(block_size));
    queue_.push_back(i);
  }
}

KvBlock& BlockPool::at(BlockId id) {
  GB_CHECK(id.value >= 0 && id.value < num_blocks());
  return blocks_[static_cast<size_t>(id.value)];
}

const KvBlock& BlockPool::block(BlockId id) const {
  GB_CHECK(id.value >= 0 && id.value < num_blocks());
  return blocks_[static_cast<size_t>(id.value)];
}

void BlockPool::note(const KvEvent& e) {
  if (record_events_) events_.push_back(e);
}

std::optional<BlockId> BlockPool::allocate(RequestId request, KvEventKind why) {
  GB_CHECK(why == KvEventKind::Allocated || why == KvEventKind::Lookahead);
  if (queue_.empty()) return std::nullopt;
  KvBlock& b = blocks_[static_cast<size_t>(queue_.pop_front())];
  if (b.indexed) {
    // Only reached when no plain free block is left: the front of the cached
    // part is the least recently freed, i.e. LRU eviction.
    index_.erase(b.hash, b.id.value);
    note({KvEventKind::Evicted, b.id, kNoRequest, BlockId{-1}, 0, b.hash});
    --num_cached_;
  }
  b.clear_hash();
  b.tokens.clear();
  b.window_released = false;
  b.ref_count = 1;
  ++num_owned_;
  note({why, b.id, request, BlockId{-1}, 1, 0});
  return b.id;
}

void BlockPool::retain(BlockId id, RequestId request, KvEventKind why) {
  KvBlock& b = at(id);
  if (b.ref_count == 0) {
    GB_CHECK_MSG(b.indexed && b.in_queue, "only a cached block can be revived");
    queue_.remove(id.value);
    --num_cached_;
    ++num_owned_;
    b.window_released = false;
  }
  ++b.ref_count;
  note({why, id, request, BlockId{-1}, b.ref_count, b.hash});
}

void BlockPool::release(BlockId id, RequestId request, KvEventKind why) {
  GB_CHECK(why == KvEventKind::Released || why == KvEventKind::WindowReleased);
  KvBlock& b = at(id);
  GB_CHECK(b.ref_count > 0);
  --b.ref_count;
  note({why, id, request, BlockId{-1}, b.ref_count, 0});
  if (why == KvEventKind::WindowReleased) ++num_window_released_total_;
  if (b.ref_count > 0) return;
  --num_owned_;
  b.window_released = why == KvEventKind::WindowReleased;
  if (b.indexed) {
    queue_.push_back(id.value);
    ++num_cached_;
  } else {
    // An unindexed block's contents can never be found again.
    b.clear_hash();
    b.tokens.clear();
    queue_.push_front(id.value);
  }
  note({KvEventKind::Freed, id, request, BlockId{-1}, 0, b.hash});
}

void BlockPool::append_token(BlockId id, TokenId token) {
  KvBlock& b = at(id);
  GB_CHECK(b.ref_count > 0 && !b.has_hash && b.num_filled() < block_size_);
  b.tokens.push_back(token);
}

void BlockPool::truncate_tokens(BlockId id, int32_t num_filled) {
  KvBlock& b = at(id);
  GB_CHECK(b.ref_count > 0 && !b.has_hash && num_filled >= 0 && num_filled <= b.num_filled());
  b.tokens.resize(static_cast<size_t>(num_filled));
}

void BlockPool::set_token(BlockId id, int32_t offset, TokenId token) {
  KvBlock& b = at(id);
  GB_CHECK(b.ref_count == 1 && !b.has_hash && offset >= 0 && offset < b.num_filled());
  b.tokens[static_cast<size_t>(offset)] = token;
}

void BlockPool::copy_tokens(BlockId src, BlockId dst, int32_t num_filled, RequestId request) {
  const KvBlock& s = block(src);
  KvBlock& d = at(dst);
  GB_CHECK(s.ref_count > 0 && d.ref_count > 0 && !d.has_hash && num_filled <= s.num_filled());
  d.tokens.assign(s.tokens.begin(), s.tokens.begin() + num_filled);
  note({KvEventKind::Copied, dst, request, src, d.ref_count, 0});
}

std::optional<BlockId> BlockPool::find_cached(uint64_t hash, PrefixSerial parent_serial,
                                              std::span<const TokenId> tokens, uint32_t isolation_id) const {
  const int32_t index = index_.find(blocks_, hash, parent_serial, tokens, isolation_id);
  if (index < 0) return std::nullopt;
  return BlockId{index};
}

void BlockPool::commit(BlockId id, uint64_t parent_hash, PrefixSerial parent_serial, uint32_t isolation_id,
                       RequestId request) {
  KvBlock& b = at(id);
  GB_CHECK(b.ref_count > 0 && !b.has_hash && b.num_filled() == block_size_);
  b.hash = index_.block_hash(parent_hash, b.tokens, isolation_id);
  b.has_hash = true;
  b.parent_serial = parent_serial;
  b.isolation_id = isolation_id;
  const int32_t existing = index_.find(blocks_, b.hash, parent_serial, b.tokens, isolation_id);
  if (existing >= 0) {
    // Same content computed twice (two requests prefilling one prompt at once):
    // keep the first in the index; this copy is valid but stays private.
    b.serial = blocks_[static_cast<size_t>(existing)].serial;
    return;
  }
  b.serial = next_serial_++;
  b.indexed = true;
  index_.insert(b.hash, id.value);
  note({KvEventKind::Cached, id, request, BlockId{-1}, b.ref_count, b.hash});
}

void BlockPool::uncache(BlockId id, RequestId request) {
  KvBlock& b = at(id);
  GB_CHECK(b.ref_count > 0 && b.has_hash);
  if (b.indexed) index_.erase(b.hash, id.value);
  note({KvEventKind::Uncached, id, request, BlockId{-1}, b.ref_count, b.hash});
  b.clear_hash();
}

bool BlockPool::evict_lru_cached() {
  // The cached part is the back of the queue; walk back to its first block.
  int32_t first_cached = -1;
  for (int32_t i = queue_.back(); i >= 0 && blocks_[static_cast<size_t>(i)].indexed;
       i = blocks_[static_cast<size_t>(i)].prev)
    first_cached = i;
  if (first_cached < 0) return false;
  KvBlock& b = blocks_[static_cast<size_t>(first_cached)];
  index_.erase(b.hash, first_cached);
  note({KvEventKind::Evicted, b.id, kNoRequest, BlockId{-1}, 0, b.hash});
  b.clear_hash();
  b.tokens.clear();
  b.window_released = false;
  queue_.remove(first_cached);
  queue_.push_front(first_cached);
  --num_cached_;
  return true;
}

void BlockPool::note_slot_released(RequestId request) {
  note({KvEventKind::WindowReleased, BlockId{-1}, request, BlockId{-1}, 0, 0});
}

std::vector<KvEvent> BlockPool::drain_events() {
  std::vector<KvEvent> out;
  out.swap(events_);
  return out;
}

Status BlockPool::check_invariants(std::span<const int32_t> holders) const {
  auto fail = [](const std::string& what) { return Status(make_error("BlockPool invariant: " + what)); };
  if (holders.size() != blocks_.size()) return fail("holder counts for the wrong number of blocks");
  if (std::string links = queue_.check_links(); !links.empty()) return fail(links);

  // Queue order: every free block before every cached block.
  bool seen_cached = false;
  for (int32_t i : queue_.to_vector()) {
    const bool cached = blocks_[static_cast<size_t>(i)].indexed;
    if (seen_cached && !cached) return fail("free block " + std::to_string(i) + " queued after a cached block");
    seen_cached = seen_cached || cached;
  }

  int32_t num_free = 0, num_cached = 0, num_owned = 0, num_indexed = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const KvBlock& b = blocks_[i];
    const std::string name = "block " + std::to_string(i);
    if (b.id.value != static_cast<int32_t>(i)) return fail(name + " has the wrong id");
    if (b.ref_count != holders[i])
      return fail(name + " ref_count " + std::to_string(b.ref_count) + " but " + std::to_string(holders[i]) +
                  " tables hold it");
    if (b.in_queue != (b.ref_count == 0)) return fail(name + " in_queue disagrees with ref_count");
    if (b.num_filled() > block_size_) return fail(name + " overfilled");
    if (b.indexed && !b.has_hash) return fail(name + " indexed without a hash");
    if (b.has_hash && (b.num_filled() != block_size_ || b.serial == kNoPrefixSerial))
      return fail(name + " committed but not full or without a serial");
    if (b.indexed) ++num_indexed;
    if (b.window_released && b.ref_count > 0) return fail(name + " is held but marked window-released");
    switch (b.state()) {
      case BlockState::Free:
        ++num_free;
        if (b.has_hash || !b.tokens.empty()) return fail(name + " is free but keeps a hash or tokens");
        break;
      case BlockState::Cached: ++num_cached; break;
      case BlockState::Owned: ++num_owned; break;
    }
  }
  if (num_free + num_cached + num_owned != num_blocks()) return fail("free + cached + owned != total");
  if (num_free + num_cached != queue_.size()) return fail("free + cached != queue size");
  if (num_cached != num_cached_ || num_owned != num_owned_) return fail("cached/owned counters drifted");

  const auto entries = index_.entries();
  if (static_cast<int32_t>(entries.size()) != num_indexed) return fail("index size != indexed blocks");
  for (const auto& [hash, index] : entries) {
    if (index < 0 || index >= num_blocks()) return fail("index entry out of range");
    const KvBlock& b = blocks_[static_cast<size_t>(index)];
    if (!b.indexed || b.hash != hash) return fail("index entry for block " + std::to_string(index) + " has a stale hash");
    if (index_.find(blocks_, hash, b.parent_serial, b.tokens, b.isolation_id) != index)
      return fail("block " + std::to_string(index) + " is indexed twice or not findable");
  }
  return {};
}

}  // namespace gb
