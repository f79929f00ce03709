// KvCacheManager: per-request block tables on top of one BlockPool. It decides
// which blocks a request's tokens go to, shares full blocks through the prefix
// cache and through forks, and turns writes into shared blocks into
// copy-on-write. It never touches K/V data: every copy it decides on is returned
// as a BlockCopy for the backend (Backend::copy_blocks) to run before the next
// forward pass.
//
// Life of a request's tokens:
//   add_request   -> table created; the longest cached prefix (full blocks, never
//                    the whole sequence) is taken by reference, already computed
//   append_slots  -> slots reserved and token ids recorded for the next forward
//   mark_computed -> after the forward pass; full computed blocks are committed
//                    to the prefix index (only then, so nobody can hit a block
//                    whose K/V is not yet written); with a sliding window, then
//                    blocks no future query can read are released
//   truncate      -> drop the last tokens (speculative rollback)
//   fork          -> a child shares the first N tokens (copy-on-write)
//   free_request  -> every block released: cached if committed, else free
//
// Lookahead blocks (speculative scratch, in the spirit of vLLM's
// allocate_slots(num_lookahead_tokens)): a self-drafting request writes its
// drafted positions into blocks outside its table, because the table's blocks
// may be shared and the drafts are not verified yet. They come from this same
// pool, held by the request (so snapshot owners, invariants and the Lookahead
// KV events see them) but kept apart from its table. A reserve of
// num_lookahead_blocks extra blocks is set aside for them: tables never take it
// (num_available() leaves it out) and it is kept free, never caching, so for
// tables the pool behaves exactly like one of num_blocks blocks.
//
//   pool: | num_blocks for tables (free / cached / owned) | unused reserve, free |
//         (block ids are not partitioned: the reserve is a count, not a range)
//
// Sliding window (sliding_window W > 0: the model's every layer slides, see
// ModelConfig::kv_release_window): the next query of a request with c computed
// tokens is at position c and reads c - W + 1 .. c, so a block ending at or
// before c - W + 1 is read by nobody in that request again. It is released as
// soon as that holds: its table entry becomes kReleasedBlock and the block goes
// back to the pool like any released block -- cached (evictable, still a prefix
// hit for others) if it is committed and indexed, else free. Prefix hits take
// only the matched blocks inside the window (the chain is still verified from
// block 0), a fork's child starts with the same released slots, and a table
// holds at most ceil((W + block_size - 2) / block_size) blocks between steps
// (positions c - W + 1 .. c - 1, anywhere in their first block).
//
// Follower (a layer group of a model whose layers do not all slide, e.g.
// Gemma 3's sliding layers beside its global ones; kv/scheduler.h): the
// scheduler keeps one manager per layer group in lockstep, token for token. The
// leader (the global layers) verifies prefix identities from block 0 as above;
// a follower (the sliding layers, a window W) holds only its window and takes
// its prefix identities from the leader's chain: its table's prefix_chain is
// the leader's (hashes are the same function of the tokens), it commits block i
// under the leader's serial of block i - 1, and a prefix hit needs only its
// blocks inside the window to be cached (blocks before it are never looked
// up), so evicting them does not cost the others a hit. Calls that commit or
// match take the leader's links (leader_chain): the leader's table's
// prefix_chain, or the leader's matched links (prefix_links()).
//
// KV eviction (kv/kv_policy.h, a leader without a sliding window): a table's
// slots stop being its positions. compact() keeps a chosen subset of the
// computed slots, moved down in order so they fill the first slots, and
// releases the blocks past them; reuse_slot() lets the next forward pass
// overwrite one computed slot (a decode at the budget puts its token where the
// evicted one was). Both write into blocks: a block someone else holds (a fork,
// the prefix cache) is first copied into a fresh one (every row of it moved
// there), and a block in the prefix index leaves it. The data moves are
// returned as SlotMoves for the backend (Backend::move_slots), to run in list
// order before anything else writes the pool (before the step's block copies).
//
// Expected pressure (no block available) is a nullopt and changes nothing.
// Programmer errors (unknown request, bad counts) fail GB_CHECK.
//
// Thread: engine thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/isolation_key.h"
#include "kv/kv_snapshot.h"

namespace gb {

inline constexpr int32_t kNoTokenLimit = 0x7fffffff;

// One K/V row moved inside the pool, every layer of the group: physical slot
// src (block * block_size + offset) copied to dst.
struct SlotMove {
  int32_t src = 0;
  int32_t dst = 0;
  friend bool operator==(const SlotMove&, const SlotMove&) = default;
};

struct PrefixMatch {
  int32_t num_tokens = 0;       // cached tokens (num_blocks * block_size)
  int32_t num_blocks = 0;
  int32_t num_unreferenced = 0; // of those inside the window, cached blocks nobody holds (taking them uses up available blocks)
  int32_t num_released = 0;     // of those, blocks before the sliding window (matched, not taken)
};

class KvCacheManager {
 public:
  // The pool holds num_blocks + num_lookahead_blocks blocks. sliding_window: 0,
  // or W when every layer of the model slides (blocks that leave the window are
  // released).
  KvCacheManager(int32_t num_blocks, int32_t block_size, int32_t num_lookahead_blocks = 0, int32_t sliding_window = 0,
                 bool follower = false);

  int32_t block_size() const { return pool_.block_size(); }
  // Every block of the pool, the lookahead reserve included.
  int32_t num_blocks() const { return pool_.num_blocks(); }
  // Blocks tables can take now: free + cached, less the unused lookahead reserve.
  int32_t num_available() const { return pool_.num_available() - lookahead_reserve_left(); }
  int32_t num_free() const { return pool_.num_free(); }
  int32_t num_cached() const { return pool_.num_cached(); }
  int32_t num_owned() const { return pool_.num_owned(); }
  const BlockPool& pool() const { return pool_; }
  int32_t sliding_window() const { return sliding_window_; }
  bool is_follower() const { return follower_; }
  // Leading blocks of a table with num_computed computed tokens that no future
  // query reads: max(0, num_computed - W + 1) / block_size, 0 without a window.
  int32_t num_releasable_blocks(int32_t num_computed) const;

  // Longest cached prefix of `tokens` under `key`, without taking it. At most
  // (tokens.size() - 1) / block_size blocks: the last token is always left to
  // compute so the forward pass produces its logits.
  // At most max_tokens (rounded down to whole blocks). A follower matches
  // within leader_chain (the leader's links of its own match).
  PrefixMatch find_prefix(std::span<const TokenId> tokens, const IsolationKey& key,
                          int32_t max_tokens = kNoTokenLimit, std::span<const PrefixLink> leader_chain = {}) const;
  // The links (hash, serial) of the first max_tokens / block_size blocks of
  // find_prefix's match: what a follower matches and commits under.
  std::vector<PrefixLink> prefix_links(std::span<const TokenId> tokens, const IsolationKey& key,
                                       int32_t max_tokens = kNoTokenLimit) const;
  // Creates the request's table and takes the cached prefix (if
  // use_prefix_cache), at most max_tokens of it. Returns the number of tokens
  // already computed through the cache.
  int32_t add_request(RequestId id, std::span<const TokenId> tokens, const IsolationKey& key,
                      bool use_prefix_cache = true, int32_t max_tokens = kNoTokenLimit,
                      std::span<const PrefixLink> leader_chain = {});
  bool has_request(RequestId id) const { return tables_.contains(id); }
  int32_t num_requests() const { return static_cast<int32_t>(tables_.size()); }
  const BlockTable& table(RequestId id) const;

  // Blocks append_slots(id, n tokens) would take from the pool (new blocks plus a
  // copy-on-write of a shared last block).
  int32_t num_blocks_needed(RequestId id, int32_t num_new_tokens) const;
  // Reserves slots for `tokens` after the request's current tokens and records
  // their ids. Returns the copies to run first, or nullopt (nothing changed) when
  // the pool has too few blocks.
  std::optional<std::vector<BlockCopy>> append_slots(RequestId id, std::span<const TokenId> tokens);
  // The backend has written K/V for the first num_tokens_computed tokens. A
  // follower commits its full blocks under leader_chain (the leader table's
  // prefix_chain after the leader's mark_computed).
  void mark_computed(RequestId id, int32_t num_tokens_computed, std::span<const PrefixLink> leader_chain = {});
  // `child` starts with the first num_tokens (already computed) tokens of `parent`:
  // full blocks shared, a partial last block copied. nullopt when no block is free.
  std::optional<std::vector<BlockCopy>> fork(RequestId parent, RequestId child, int32_t num_tokens);
  // Whether `parent` still holds every block a child forked at num_tokens
  // reads (the sliding window may have released some).
  bool can_fork(RequestId parent, int32_t num_tokens) const;
  // Drops the last num_tokens tokens. Blocks no longer needed are released; a
  // block that will be overwritten loses its prefix hash (or is copied on the
  // next write if someone else still holds it).
  void truncate(RequestId id, int32_t num_tokens);
  void free_request(RequestId id);
  // With a sliding window: `id` (from now until it is freed) releases blocks
  // as if its next query were one position earlier, so the window of its last
  // computed position stays readable (an inspection re-runs that position,
  // runtime/inside.h). Without a window nothing changes.
  void hold_last_window(RequestId id) { hold_last_window_.insert(id); }
  void end_hold_last_window(RequestId id) { hold_last_window_.erase(id); }  // also done by free_request
  // Evicts the least recently freed cached block. False when none is cached.
  bool evict_lru_cached() { return pool_.evict_lru_cached(); }

  // --- KV eviction (see above) -------------------------------------------------
  // Keeps only the computed slots `kept` (ascending), in order, recording
  // kept_tokens (one per kept slot) as their tokens; the table then holds
  // kept.size() computed tokens. nullopt (nothing changed) when a shared block
  // needs a copy and no block is available.
  std::optional<std::vector<SlotMove>> compact(RequestId id, std::span<const int32_t> kept,
                                               std::span<const TokenId> kept_tokens);
  // From now on the table commits nothing to the prefix index (a fork whose
  // cache will be evicted; what it committed before stays).
  void stop_prefix_commits(RequestId id) { mutable_table(id).use_prefix_cache = false; }
  // The step's plan is complete: its copies' sources may be rewritten from
  // the next step on (see copy_sources_).
  void end_step_copies() { copy_sources_.clear(); }
  // The computed slot `slot` is overwritten by `token` in the next forward
  // pass: its block is made writable. nullopt (nothing changed) when it must be
  // copied and no block is available.
  std::optional<std::vector<SlotMove>> reuse_slot(RequestId id, int32_t slot, TokenId token);

  // --- lookahead (see above) ----------------------------------------------------
  int32_t num_lookahead_blocks() const { return num_lookahead_; }  // the reserve
  int32_t num_lookahead_held() const { return num_lookahead_held_; }
  // num_blocks free blocks lent to `id` outside its table (it need not have a
  // table), or nullopt (nothing changed) when the reserve has fewer left. A
  // request holds at most one set at a time.
  std::optional<std::vector<BlockId>> allocate_lookahead(RequestId id, int32_t num_blocks);
  // Gives back id's lookahead blocks (free again); none held is fine.
  // free_request() does not touch them.
  void free_lookahead(RequestId id);
  // id's lookahead blocks (empty when none).
  std::span<const BlockId> lookahead_blocks(RequestId id) const;

  KvSnapshot snapshot() const;
  std::vector<KvEvent> drain_events() { return pool_.drain_events(); }
  Status check_invariants() const;
  void set_hash_mask_for_testing(uint64_t mask) { pool_.set_hash_mask_for_testing(mask); }

 private:
  BlockTable& mutable_table(RequestId id);
  // Blocks of the cached prefix (see find_prefix), in order, at most max_blocks.
  std::vector<BlockId> match_blocks(std::span<const TokenId> tokens, uint32_t isolation_id,
                                    int32_t max_blocks) const;
  // A follower's match within leader_chain: the most blocks k whose window
  // blocks (num_releasable_blocks(k * block_size) .. k - 1) are all cached under
  // the leader's identities; those blocks, in order.
  struct FollowerMatch {
    int32_t num_blocks = 0;
    int32_t num_released = 0;
    std::vector<BlockId> window_blocks;  // (num_blocks - num_released)
  };
  FollowerMatch follower_match(std::span<const TokenId> tokens, uint32_t isolation_id, int32_t max_blocks,
                               std::span<const PrefixLink> leader_chain) const;
  int32_t lookahead_reserve_left() const { return num_lookahead_ - num_lookahead_held_; }
  // A block for a table (the caller checked num_available()). When only the
  // reserve is free, the least recently freed cached block is evicted first and
  // taken instead, as a pool without the reserve would.
  BlockId take_block(RequestId id);
  Status check_lookahead(std::span<int32_t> holders) const;
  // Commits the table's full computed blocks to the prefix index, in order.
  void commit_full_blocks(RequestId id, BlockTable& t, std::span<const PrefixLink> leader_chain);
  // Table block i becomes writable for `id`. A shared one is replaced by a
  // fresh block and the old one is returned (the caller moves the rows it
  // keeps from there); an indexed one leaves the index. The table's committed
  // prefix ends before block i. The caller checked that a block is available.
  std::optional<BlockId> make_writable(RequestId id, BlockTable& t, int32_t i);
  // Whether block b must be copied before a row lands in it: shared, or the
  // source of a copy-on-write made this step (copy_sources_).
  bool must_copy(BlockId b) const;
  // Releases the table's blocks that left the window (see above).
  void release_out_of_window(RequestId id, BlockTable& t);

  BlockPool pool_;
  int32_t sliding_window_ = 0;
  bool follower_ = false;
  std::unordered_map<RequestId, BlockTable> tables_;
  std::unordered_set<RequestId> hold_last_window_;  // see hold_last_window()
  std::unordered_map<RequestId, std::vector<BlockId>> lookahead_;  // lent blocks, by holder
  int32_t num_lookahead_ = 0;       // the reserve's size
  int32_t num_lookahead_held_ = 0;  // blocks lent now
  // Blocks a copy-on-write of this step reads (append_slots): the copies run
  // after the step's row moves (StepPlan::slot_moves), so eviction must not
  // rewrite them in place even once their copier let go. Cleared by
  // end_step_copies() when the scheduler's step plan is complete.
  std::unordered_set<int32_t> copy_sources_;
};

}  // namespace gb
