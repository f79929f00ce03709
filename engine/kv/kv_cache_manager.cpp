#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace gb {
KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t num_lookahead_blocks,
                               int32_t sliding_window, bool follower)
    : pool_(num_blocks + std::max(0, num_lookahead_blocks), block_size),
      sliding_window_(sliding_window),
      follower_(follower),
      num_lookahead_(std::max(0, num_lookahead_blocks)) {
  GB_CHECK(sliding_window >= 0);
}

BlockId KvCacheManager::take_block(RequestId id) {
  if (lookahead_reserve_left() > 0 && pool_.num_free() <= lookahead_reserve_left()) GB_CHECK(pool_.evict_lru_cached());
  const std::optional<BlockId> b = pool_.allocate(id);
  GB_CHECK_MSG(b.has_value(), "KvCacheManager: a block was promised by num_available()");
  return *b;
}

std::optional<std::vector<BlockId>> KvCacheManager::allocate_lookahead(RequestId id, int32_t num_blocks) {
  GB_CHECK_MSG(!lookahead_.contains(id), "KvCacheManager::allocate_lookahead: the request already holds lookahead blocks");
  GB_CHECK(num_blocks >= 0);
  if (num_blocks > lookahead_reserve_left()) return std::nullopt;
  std::vector<BlockId> blocks;
  // The unused reserve is free (check_lookahead), so these never evict a cached block.
  for (int32_t i = 0; i < num_blocks; ++i) blocks.push_back(*pool_.allocate(id, KvEventKind::Lookahead));
  num_lookahead_held_ += num_blocks;
  lookahead_.emplace(id, blocks);
  return blocks;
}

void KvCacheManager::free_lookahead(RequestId id) {
  auto it = lookahead_.find(id);
  if (it == lookahead_.end()) return;
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) pool_.release(*b, id);
  num_lookahead_held_ -= static_cast<int32_t>(it->second.size());
  lookahead_.erase(it);
}

std::span<const BlockId> KvCacheManager::lookahead_blocks(RequestId id) const {
  auto it = lookahead_.find(id);
  if (it == lookahead_.end()) return {};
  return it->second;
}

int32_t KvCacheManager::num_releasable_blocks(int32_t num_computed) const {
  if (sliding_window_ <= 0) return 0;
  return std::max(0, num_computed - sliding_window_ + 1) / block_size();
}

void KvCacheManager::release_out_of_window(RequestId id, BlockTable& t) {
  const int32_t lag = hold_last_window_.contains(id) ? 1 : 0;
  const int32_t target = std::min(num_releasable_blocks(std::max(0, t.num_computed - lag)), t.num_blocks());
  for (; t.num_released < target; ++t.num_released) {
    BlockId& b = t.blocks[static_cast<size_t>(t.num_released)];
    pool_.release(b, id, KvEventKind::WindowReleased);
    b = kReleasedBlock;
  }
}

const BlockTable& KvCacheManager::table(RequestId id) const {
  auto it = tables_.find(id);
  GB_CHECK_MSG(it != tables_.end(), "KvCacheManager: unknown request");
  return it->second;
}

BlockTable& KvCacheManager::mutable_table(RequestId id) {
  auto it = tables_.find(id);
  GB_CHECK_MSG(it != tables_.end(), "KvCacheManager: unknown request");
  return it->second;
}

std::vector<BlockId> KvCacheManager::match_blocks(std::span<const TokenId> tokens, uint32_t isolation_id,
                                                  int32_t max_blocks) const {
  std::vector<BlockId> out;
  if (tokens.empty() || isolation_id == 0) return out;
  const int32_t bs = block_size();
  // Never the whole sequence: the last token must run through the model.
  max_blocks = std::min(max_blocks, static_cast<int32_t>((tokens.size() - 1) / static_cast<size_t>(bs)));
  uint64_t parent_hash = pool_.root_hash(isolation_id);
  PrefixSerial parent_serial = kNoPrefixSerial;
  for (int32_t i = 0; i < max_blocks; ++i) {
    const auto chunk = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const uint64_t hash = pool_.block_hash(parent_hash, chunk, isolation_id);
    const std::optional<BlockId> hit = pool_.find_cached(hash, parent_serial, chunk, isolation_id);
    if (!hit) break;
    out.push_back(*hit);
    parent_hash = hash;
    parent_serial = pool_.block(*hit).serial;
  }
  return out;
}

KvCacheManager::FollowerMatch KvCacheManager::follower_match(std::span<const TokenId> tokens, uint32_t isolation_id,
                                                             int32_t max_blocks,
                                                             std::span<const PrefixLink> leader_chain) const {
  FollowerMatch m;
  if (tokens.empty() || isolation_id == 0) return m;
  const int32_t bs = block_size();
  max_blocks = std::min({max_blocks, static_cast<int32_t>(leader_chain.size()),
                         static_cast<int32_t>((tokens.size() - 1) / static_cast<size_t>(bs))});
  // found[i]: block i cached under the leader's identity of the prefix before it.
  std::vector<std::optional<BlockId>> found(static_cast<size_t>(std::max(0, max_blocks)));
  for (int32_t i = 0; i < max_blocks; ++i) {
    const auto chunk = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const PrefixSerial parent = i > 0 ? leader_chain[static_cast<size_t>(i - 1)].serial : kNoPrefixSerial;
    found[static_cast<size_t>(i)] = pool_.find_cached(leader_chain[static_cast<size_t>(i)].hash, parent, chunk, isolation_id);
  }
  // The longest k whose window blocks are all there (k = 0 always is).
  for (int32_t k = max_blocks; k > 0; --k) {
    const int32_t first = std::min(num_releasable_blocks(k * bs), k);
    bool all = true;
    for (int32_t i = first; i < k && all; ++i) all = found[static_cast<size_t>(i)].has_value();
    if (!all) continue;
    m.num_blocks = k;
    m.num_released = first;
    for (int32_t i = first; i < k; ++i) m.window_blocks.push_back(*found[static_cast<size_t>(i)]);
    break;
  }
  return m;
}

PrefixMatch KvCacheManager::find_prefix(std::span<const TokenId> tokens, const IsolationKey& key, int32_t max_tokens,
                                        std::span<const PrefixLink> leader_chain) const {
  PrefixMatch match;
  const int32_t max_blocks = max_tokens / block_size();
  const uint32_t iso = pool_.find_isolation_id(key);
  if (follower_) {
    const FollowerMatch m = follower_match(tokens, iso, max_blocks, leader_chain);
    match.num_blocks = m.num_blocks;
    match.num_tokens = m.num_blocks * block_size();
    match.num_released = m.num_released;
    for (BlockId b : m.window_blocks)
      if (pool_.block(b).ref_count == 0) ++match.num_unreferenced;
    return match;
  }
  const std::vector<BlockId> blocks = match_blocks(tokens, iso, max_blocks);
  match.num_blocks = static_cast<int32_t>(blocks.size());
  match.num_tokens = match.num_blocks * block_size();
  // Blocks before the window are matched (they verify the chain) but given
  // back at once (add_request), so they take nothing from the pool.
  match.num_released = std::min(num_releasable_blocks(match.num_tokens), match.num_blocks);
  for (int32_t i = match.num_released; i < match.num_blocks; ++i)
    if (pool_.block(blocks[static_cast<size_t>(i)]).ref_count == 0) ++match.num_unreferenced;
  return match;
}

std::vector<PrefixLink> KvCacheManager::prefix_links(std::span<const TokenId> tokens, const IsolationKey& key,
                                                     int32_t max_tokens) const {
  GB_CHECK_MSG(!follower_, "KvCacheManager::prefix_links: a follower has no identities of its own");
  std::vector<PrefixLink> links;
  for (BlockId b : match_blocks(tokens, pool_.find_isolation_id(key), max_tokens / block_size()))
    links.push_back({pool_.block(b).hash, pool_.block(b).serial});
  return links;
}

int32_t KvCacheManager::add_request(RequestId id, std::span<const TokenId> tokens, const IsolationKey& key,
                                    bool use_prefix_cache, int32_t max_tokens, std::span<const PrefixLink> leader_chain) {
  GB_CHECK_MSG(!tables_.contains(id), "KvCacheManager: request added twice");
  BlockTable t;
  t.isolation_id = pool_.intern(key);
  t.use_prefix_cache = use_prefix_cache;
  if (use_prefix_cache && follower_) {
    // Slots before the window start released (announced, as a fork's are);
    // the window's blocks are taken.
    const FollowerMatch m = follower_match(tokens, t.isolation_id, max_tokens / block_size(), leader_chain);
    for (int32_t i = 0; i < m.num_released; ++i) {
      pool_.note_slot_released(id);
      t.blocks.push_back(kReleasedBlock);
    }
    for (BlockId b : m.window_blocks) {
      pool_.retain(b, id, KvEventKind::PrefixHit);
      t.blocks.push_back(b);
    }
    t.num_released = m.num_released;
    t.prefix_chain.assign(leader_chain.begin(), leader_chain.begin() + m.num_blocks);
  } else if (use_prefix_cache) {
    for (BlockId b : match_blocks(tokens, t.isolation_id, max_tokens / block_size())) {
      pool_.retain(b, id, KvEventKind::PrefixHit);
      t.blocks.push_back(b);
      t.prefix_chain.push_back({pool_.block(b).hash, pool_.block(b).serial});
    }
  }
  t.num_tokens = t.num_computed = t.num_blocks() * block_size();
  t.num_committed_blocks = t.num_blocks();
  // Hits before the window go straight back (to the LRU tail: they were just
  // used), so the events show every matched block and the KV map stays exact.
  release_out_of_window(id, t);
  const int32_t num_cached = t.num_tokens;
  tables_.emplace(id, std::move(t));
  return num_cached;
}

int32_t KvCacheManager::num_blocks_needed(RequestId id, int32_t num_new_tokens) const {
  const BlockTable& t = table(id);
  GB_CHECK(num_new_tokens >= 0);
  if (num_new_tokens == 0) return 0;
  const int32_t bs = block_size();
  const bool cow = t.num_tokens % bs != 0 && pool_.block(t.blocks.back()).ref_count > 1;
  return (cow ? 1 : 0) + ceil_div(t.num_tokens + num_new_tokens, bs) - t.num_blocks();
}

std::optional<std::vector<BlockCopy>> KvCacheManager::append_slots(RequestId id, std::span<const TokenId> tokens) {
  const auto n = static_cast<int32_t>(tokens.size());
  if (num_blocks_needed(id, n) > num_available()) return std::nullopt;
  BlockTable& t = mutable_table(id);
  std::vector<BlockCopy> copies;
  if (n == 0) return copies;
  const int32_t bs = block_size();
  const int32_t slot = t.num_tokens % bs;
  if (slot != 0) {
    // The next write lands inside the last block. Someone else may still read
    // its later slots (a truncation into a shared block), or it may be in the
    // prefix index: either way its contents must not change under them.
    const BlockId last = t.blocks.back();
    if (pool_.block(last).ref_count > 1) {
      const BlockId dst = take_block(id);  // counted by num_blocks_needed
      copy_sources_.insert(last.value);    // read by a copy after this step's moves: never rewritten in place
      pool_.copy_tokens(last, dst, slot, id);
      pool_.release(last, id);
      t.blocks.back() = dst;
      copies.push_back({last, dst});
    } else {
      if (pool_.block(last).has_hash) pool_.uncache(last, id);
      if (pool_.block(last).num_filled() > slot) pool_.truncate_tokens(last, slot);
    }
  }
  for (TokenId token : tokens) {
    if (t.num_tokens % bs == 0) t.blocks.push_back(take_block(id));
    pool_.append_token(t.blocks.back(), token);
    ++t.num_tokens;
  }
  return copies;
}

void KvCacheManager::mark_computed(RequestId id, int32_t num_tokens_computed,
                                   std::span<const PrefixLink> leader_chain) {
  BlockTable& t = mutable_table(id);
  GB_CHECK(num_tokens_computed >= 0 && num_tokens_computed <= t.num_tokens);
  t.num_computed = num_tokens_computed;
  commit_full_blocks(id, t, leader_chain);
  release_out_of_window(id, t);
}

void KvCacheManager::commit_full_blocks(RequestId id, BlockTable& t, std::span<const PrefixLink> leader_chain) {
  if (!t.use_prefix_cache) return;
  const int32_t num_full = t.num_computed / block_size();
  GB_CHECK_MSG(!follower_ || static_cast<int32_t>(leader_chain.size()) >= num_full,
               "KvCacheManager: a follower commits only blocks its leader has committed");
  for (int32_t i = t.num_committed_blocks; i < num_full; ++i) {
    const BlockId b = t.blocks[static_cast<size_t>(i)];
    // Blocks are committed as soon as they are full and computed, and
    // mark_computed releases only after committing, so an uncommitted block
    // is never a released one.
    GB_CHECK(b != kReleasedBlock);
    if (!pool_.block(b).has_hash) {  // else shared with a request that committed it
      // The parent link comes from the table's chain: the parent block itself
      // may already have left the window.
      // A follower's chain holds the leader's links (see above).
      uint64_t parent_hash = pool_.root_hash(t.isolation_id);
      PrefixSerial parent_serial = kNoPrefixSerial;
      if (i > 0) {
        const PrefixLink& parent = t.prefix_chain[static_cast<size_t>(i - 1)];
        parent_hash = parent.hash;
        parent_serial = parent.serial;
      }
      pool_.commit(b, parent_hash, parent_serial, t.isolation_id, id);
    }
    if (follower_) {
      const PrefixLink& link = leader_chain[static_cast<size_t>(i)];
      GB_CHECK_MSG(link.hash == pool_.block(b).hash, "KvCacheManager: a follower's block differs from its leader's");
      t.prefix_chain.push_back(link);
    } else {
      t.prefix_chain.push_back({pool_.block(b).hash, pool_.block(b).serial});
    }
  }
  t.num_committed_blocks = std::max(t.num_committed_blocks, num_full);
}

std::optional<std::vector<BlockCopy>> KvCacheManager::fork(RequestId parent, RequestId child, int32_t num_tokens) {
  GB_CHECK_MSG(!tables_.contains(child), "KvCacheManager::fork: child already exists");
  const BlockTable& p = table(parent);
  GB_CHECK_MSG(num_tokens >= 0 && num_tokens <= p.num_computed, "fork point beyond the computed tokens");
  const int32_t bs = block_size();
  const int32_t num_full = num_tokens / bs;
  const int32_t num_partial = num_tokens % bs;
  GB_CHECK_MSG(can_fork(parent, num_tokens), "KvCacheManager::fork: the parent released blocks the child reads");
  if (num_partial > 0 && num_available() < 1) return std::nullopt;

  BlockTable c;
  c.isolation_id = p.isolation_id;
  c.use_prefix_cache = p.use_prefix_cache;
  std::vector<BlockCopy> copies;
  // Slots before the child's window start released (announced, so observers
  // rebuilding tables from events keep positions); the rest are shared.
  const int32_t num_released = std::min(num_releasable_blocks(num_tokens), num_full);
  for (int32_t i = 0; i < num_full; ++i) {
    const BlockId b = p.blocks[static_cast<size_t>(i)];
    if (i < num_released) {
      pool_.note_slot_released(child);
      c.blocks.push_back(kReleasedBlock);
      continue;
    }
    pool_.retain(b, child, KvEventKind::Shared);
    c.blocks.push_back(b);
  }
  c.num_released = num_released;
  if (num_partial > 0) {
    // The parent will keep writing into this block, so the child needs its own.
    const BlockId src = p.blocks[static_cast<size_t>(num_full)];
    const BlockId dst = take_block(child);
    pool_.copy_tokens(src, dst, num_partial, child);
    c.blocks.push_back(dst);
    copies.push_back({src, dst});
  }
  c.num_tokens = c.num_computed = num_tokens;
  c.num_committed_blocks = std::min(p.num_committed_blocks, num_full);
  c.prefix_chain.assign(p.prefix_chain.begin(), p.prefix_chain.begin() + c.num_committed_blocks);
  tables_.emplace(child, std::move(c));
  return copies;
}

bool KvCacheManager::can_fork(RequestId parent, int32_t num_tokens) const {
  const BlockTable& p = table(parent);
  // The child reads blocks num_releasable_blocks(num_tokens) .. the one holding
  // position num_tokens - 1; the parent must not have released any of them.
  return p.num_released <= std::min(num_releasable_blocks(num_tokens), num_tokens / block_size());
}

void KvCacheManager::truncate(RequestId id, int32_t num_tokens) {
  BlockTable& t = mutable_table(id);
  GB_CHECK(num_tokens >= 0 && num_tokens <= t.num_tokens);
  const int32_t bs = block_size();
  const int32_t new_num_tokens = t.num_tokens - num_tokens;
  const int32_t keep = ceil_div(new_num_tokens, bs);
  // Only positions the window still covers can be cut back (speculative
  // rollback and failed steps cut uncomputed slots): a released block is gone.
  GB_CHECK_MSG(keep >= t.num_released && (new_num_tokens % bs == 0 || keep > t.num_released),
               "KvCacheManager::truncate into blocks released by the sliding window");
  while (t.num_blocks() > keep) {
    pool_.release(t.blocks.back(), id);
    t.blocks.pop_back();
  }
  const int32_t slot = new_num_tokens % bs;
  if (slot != 0) {
    const BlockId last = t.blocks.back();
    // A block only this request holds is cut back now (and leaves the prefix
    // index: its contents are about to change). A shared one stays intact for
    // the others; append_slots copies it before the first write.
    if (pool_.block(last).ref_count == 1) {
      if (pool_.block(last).has_hash) pool_.uncache(last, id);
      pool_.truncate_tokens(last, slot);
    }
  }
  t.num_tokens = new_num_tokens;
  t.num_computed = std::min(t.num_computed, new_num_tokens);
  t.num_committed_blocks = std::min(t.num_committed_blocks, new_num_tokens / bs);
  t.prefix_chain.resize(static_cast<size_t>(t.num_committed_blocks));
}

bool KvCacheManager::must_copy(BlockId b) const {
  return pool_.block(b).ref_count > 1 || copy_sources_.contains(b.value);
}

std::optional<BlockId> KvCacheManager::make_writable(RequestId id, BlockTable& t, int32_t i) {
  const BlockId b = t.blocks[static_cast<size_t>(i)];
  GB_CHECK(b != kReleasedBlock);
  t.num_committed_blocks = std::min(t.num_committed_blocks, i);
  t.prefix_chain.resize(std::min(t.prefix_chain.size(), static_cast<size_t>(t.num_committed_blocks)));
  // Shared, or the source of a copy this step (its copier let go of it, but
  // the copy runs after the moves): copied, never rewritten in place.
  if (must_copy(b)) {
    const BlockId fresh = take_block(id);
    pool_.copy_tokens(b, fresh, pool_.block(b).num_filled(), id);
    pool_.release(b, id);
    t.blocks[static_cast<size_t>(i)] = fresh;
    return b;
  }
  if (pool_.block(b).has_hash) pool_.uncache(b, id);
  return std::nullopt;
}

std::optional<std::vector<SlotMove>> KvCacheManager::compact(RequestId id, std::span<const int32_t> kept,
                                                            std::span<const TokenId> kept_tokens) {
  BlockTable& t = mutable_table(id);
  const int32_t bs = block_size();
  const auto num_kept = static_cast<int32_t>(kept.size());
  GB_CHECK_MSG(sliding_window_ == 0 && !follower_ && t.num_released == 0,
               "KvCacheManager::compact: eviction works on a leader without a sliding window");
  GB_CHECK_MSG(t.num_computed == t.num_tokens, "KvCacheManager::compact with uncomputed slots");
  GB_CHECK(kept_tokens.size() == kept.size());
  for (int32_t d = 0; d < num_kept; ++d)
    GB_CHECK_MSG(kept[static_cast<size_t>(d)] >= d && kept[static_cast<size_t>(d)] < t.num_tokens &&
                     (d == 0 || kept[static_cast<size_t>(d)] > kept[static_cast<size_t>(d - 1)]),
                 "KvCacheManager::compact: kept slots must be ascending computed slots");
  const int32_t new_blocks = ceil_div(num_kept, bs);
  // Blocks that receive a moved row, and how many of those need a copy.
  std::vector<char> changed(static_cast<size_t>(new_blocks), 0);
  int32_t num_copies = 0;
  for (int32_t d = 0; d < num_kept; ++d)
    if (kept[static_cast<size_t>(d)] != d) changed[static_cast<size_t>(d / bs)] = 1;
  for (int32_t i = 0; i < new_blocks; ++i)
    if (changed[static_cast<size_t>(i)] && must_copy(t.blocks[static_cast<size_t>(i)])) ++num_copies;
  if (num_copies > num_available()) return std::nullopt;

  const std::vector<BlockId> old = t.blocks;
  const auto physical = [bs](BlockId b, int32_t slot) { return b.value * bs + slot % bs; };
  std::vector<SlotMove> moves;
  // Ascending destinations: a row moves down (kept[d] >= d), so no move reads
  // a row an earlier one wrote; copies read from blocks others keep intact.
  for (int32_t i = 0; i < new_blocks; ++i) {
    if (!changed[static_cast<size_t>(i)]) continue;
    const std::optional<BlockId> from = make_writable(id, t, i);
    const BlockId to = t.blocks[static_cast<size_t>(i)];
    const int32_t end = std::min(num_kept, (i + 1) * bs);
    for (int32_t d = i * bs; d < end; ++d) {
      const int32_t src = kept[static_cast<size_t>(d)];
      if (from || src != d) moves.push_back({physical(old[static_cast<size_t>(src / bs)], src), physical(to, d)});
      pool_.set_token(to, d % bs, kept_tokens[static_cast<size_t>(d)]);
    }
  }
  // The blocks past the kept slots, last first (as free_request does).
  while (t.num_blocks() > new_blocks) {
    pool_.release(t.blocks.back(), id);
    t.blocks.pop_back();
  }
  t.num_tokens = t.num_computed = num_kept;
  t.num_committed_blocks = std::min(t.num_committed_blocks, num_kept / bs);
  t.prefix_chain.resize(std::min(t.prefix_chain.size(), static_cast<size_t>(t.num_committed_blocks)));
  return moves;
}

std::optional<std::vector<SlotMove>> KvCacheManager::reuse_slot(RequestId id, int32_t slot, TokenId token) {
  BlockTable& t = mutable_table(id);
  const int32_t bs = block_size();
  GB_CHECK_MSG(sliding_window_ == 0 && !follower_ && t.num_released == 0,
               "KvCacheManager::reuse_slot: eviction works on a leader without a sliding window");
  GB_CHECK_MSG(slot >= 0 && slot < t.num_computed, "KvCacheManager::reuse_slot: not a computed slot");
  const int32_t i = slot / bs;
  if (must_copy(t.blocks[static_cast<size_t>(i)]) && num_available() < 1) return std::nullopt;
  std::vector<SlotMove> moves;
  if (const std::optional<BlockId> from = make_writable(id, t, i)) {
    const BlockId to = t.blocks[static_cast<size_t>(i)];
    const int32_t end = std::min(t.num_tokens, (i + 1) * bs);
    for (int32_t d = i * bs; d < end; ++d)
      if (d != slot) moves.push_back({from->value * bs + d % bs, to.value * bs + d % bs});
  }
  pool_.set_token(t.blocks[static_cast<size_t>(i)], slot % bs, token);
  return moves;
}

void KvCacheManager::free_request(RequestId id) {
  BlockTable& t = mutable_table(id);
  // Last block first: cached blocks enter the LRU queue tail-first, so a
  // sequence's tail (least likely to be shared) is evicted before its head.
  for (auto it = t.blocks.rbegin(); it != t.blocks.rend(); ++it)
    if (*it != kReleasedBlock) pool_.release(*it, id);
  tables_.erase(id);
  hold_last_window_.erase(id);
}

KvSnapshot KvCacheManager::snapshot() const {
  KvSnapshot s;
  s.block_size = block_size();
  s.num_free = num_free();
  s.num_cached = num_cached();
  s.num_owned = num_owned();
  s.blocks.resize(static_cast<size_t>(num_blocks()));
  for (int32_t i = 0; i < num_blocks(); ++i) {
    const KvBlock& b = pool_.block(BlockId{i});
    KvBlockView& v = s.blocks[static_cast<size_t>(i)];
    v.id = b.id;
    v.state = b.state();
    v.ref_count = b.ref_count;
    v.num_filled = b.num_filled();
    v.has_hash = b.has_hash;
    v.hash = b.hash;
    v.tokens = b.tokens;
    v.window_released = b.window_released;
    s.num_window_released += b.window_released ? 1 : 0;
  }
  s.num_window_released_total = pool_.num_window_released_total();
  s.sliding_window = sliding_window_;
  for (const auto& [id, t] : tables_) {
    s.num_table_slots_released += t.num_released;
    for (BlockId b : t.blocks)
      if (b != kReleasedBlock) s.blocks[static_cast<size_t>(b.value)].owners.push_back(id);
  }
  for (const auto& [id, blocks] : lookahead_)
    for (BlockId b : blocks) {
      s.blocks[static_cast<size_t>(b.value)].owners.push_back(id);
      s.blocks[static_cast<size_t>(b.value)].lookahead = true;
    }
  for (KvBlockView& v : s.blocks) std::sort(v.owners.begin(), v.owners.end());
  s.free_queue = pool_.free_queue_order();
  return s;
}

Status KvCacheManager::check_invariants() const {
  const int32_t bs = block_size();
  std::vector<int32_t> holders(static_cast<size_t>(num_blocks()), 0);
  for (const auto& [id, t] : tables_) {
    const std::string name = "KvCacheManager invariant: request " + std::to_string(id.value);
    auto fail = [&](const char* what) { return Status(make_error(name + ": " + what)); };
    if (t.num_blocks() != ceil_div(t.num_tokens, bs)) return fail("block count does not match its tokens");
    if (t.num_computed < 0 || t.num_computed > t.num_tokens) return fail("computed tokens out of range");
    if (t.num_committed_blocks > t.num_blocks()) return fail("more committed blocks than blocks");
    if (t.use_prefix_cache && static_cast<int32_t>(t.prefix_chain.size()) != t.num_committed_blocks)
      return fail("prefix chain length differs from the committed blocks");
    if (t.num_released < 0 || t.num_released > num_releasable_blocks(t.num_computed))
      return fail("released blocks a future query may still read");
    if (t.num_released > t.num_committed_blocks && t.use_prefix_cache)
      return fail("released a block before committing it");
    std::vector<int32_t> seen;
    for (int32_t i = 0; i < t.num_blocks(); ++i) {
      const BlockId b = t.blocks[static_cast<size_t>(i)];
      if ((b == kReleasedBlock) != (i < t.num_released)) return fail("released entries are not exactly the leading ones");
      if (b == kReleasedBlock) continue;
      if (b.value < 0 || b.value >= num_blocks()) return fail("block id out of range");
      seen.push_back(b.value);
      ++holders[static_cast<size_t>(b.value)];
      const KvBlock& block = pool_.block(b);
      const int32_t used = std::min(bs, t.num_tokens - i * bs);
      if (block.num_filled() < used) return fail("a block holds fewer tokens than the table uses");
      if (i < t.num_committed_blocks && !block.has_hash) return fail("a committed block lost its hash");
      if (i < t.num_committed_blocks && t.use_prefix_cache) {
        const PrefixLink& link = t.prefix_chain[static_cast<size_t>(i)];
        // A follower's chain is its leader's: its blocks hang under the
        // leader's serial of the block before (see above).
        const PrefixSerial parent = i > 0 ? t.prefix_chain[static_cast<size_t>(i - 1)].serial : kNoPrefixSerial;
        if (block.hash != link.hash || (follower_ ? block.parent_serial != parent : block.serial != link.serial))
          return fail("prefix chain disagrees with a committed block");
      }
      if (block.isolation_id != 0 && block.isolation_id != t.isolation_id)
        return fail("holds a block committed under another isolation key");
    }
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) return fail("holds one block twice");
  }
  GB_TRY(check_lookahead(holders));
  return pool_.check_invariants(holders);
}

// Lookahead blocks: each held once, by one request, outside every table, empty
// as far as the pool knows (the backend writes them; the pool records no
// tokens); at most the reserve lent; the unused reserve free.
Status KvCacheManager::check_lookahead(std::span<int32_t> holders) const {
  auto fail = [](const std::string& what) { return Status(make_error("KvCacheManager invariant: " + what)); };
  int32_t num_held = 0;
  for (const auto& [id, blocks] : lookahead_) {
    for (BlockId b : blocks) {
      if (b.value < 0 || b.value >= num_blocks()) return fail("lookahead block id out of range");
      if (++holders[static_cast<size_t>(b.value)] != 1)
        return fail("lookahead block " + std::to_string(b.value) + " is also held elsewhere");
      const KvBlock& block = pool_.block(b);
      if (block.has_hash || block.num_filled() != 0)
        return fail("lookahead block " + std::to_string(b.value) + " holds tokens or a hash");
    }
    num_held += static_cast<int32_t>(blocks.size());
  }
  if (num_held != num_lookahead_held_) return fail("lookahead count drifted");
  if (num_held > num_lookahead_) return fail("more lookahead blocks lent than reserved");
  if (pool_.num_free() < lookahead_reserve_left()) return fail("the unused lookahead reserve is not free");
  return {};
}

}  // namespace gb
