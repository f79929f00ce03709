// Hand-worked scenarios for BlockPool / KvCacheManager: exact block ids,
// ref_counts and free-queue order, derived on paper from the documented rules
// (queue = free blocks, most recently freed first, then cached blocks, least
// recently freed first; a request's blocks are released last block first).
// Block size 4 keeps the arithmetic visible.
#include <numeric>
#include <vector>

#include "gb_test.h"
#include "kv/kv_cache_manager.h"

namespace {

using gb::BlockId;
using gb::KvCacheManager;
using gb::RequestId;
using gb::TokenId;

const gb::IsolationKey kKey{"model-a", "tmpl-1", "", "tenant-1"};

std::vector<TokenId> iota_tokens(int32_t n, TokenId first) {
  std::vector<TokenId> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> ids(const std::vector<BlockId>& blocks) {
  std::vector<int32_t> out;
  for (BlockId b : blocks) out.push_back(b.value);
  return out;
}

// Adds a request, appends all of `tokens` past its cached prefix and marks them computed.
int32_t run_prompt(KvCacheManager& kv, RequestId id, const std::vector<TokenId>& tokens,
                   const gb::IsolationKey& key = kKey) {
  const int32_t cached = kv.add_request(id, tokens, key);
  auto copies = kv.append_slots(id, std::span(tokens).subspan(static_cast<size_t>(cached)));
  GB_CHECK(copies && copies->empty());
  kv.mark_computed(id, static_cast<int32_t>(tokens.size()));
  return cached;
}

bool invariants_ok(const KvCacheManager& kv) {
  gb::Status s = kv.check_invariants();
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.error().message.c_str());
  return s.ok();
}

}  // namespace

GB_TEST(allocate_then_free_caches_full_blocks_in_lru_order) {
  KvCacheManager kv(6, 4);
  QCOMPARE(kv.pool().free_queue_order(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  QCOMPARE(run_prompt(kv, RequestId{1}, iota_tokens(10, 100)), 0);
  QCOMPARE(ids(kv.table(RequestId{1}).blocks), (std::vector<int32_t>{0, 1, 2}));
  QCOMPARE(kv.pool().free_queue_order(), (std::vector<int32_t>{3, 4, 5}));
  for (int32_t b = 0; b < 3; ++b) QCOMPARE(kv.pool().block(BlockId{b}).ref_count, 1);
  // 10 computed tokens: blocks 0 and 1 are full and committed, block 2 holds 2.
  QVERIFY(kv.pool().block(BlockId{0}).has_hash && kv.pool().block(BlockId{1}).has_hash);
  QVERIFY(!kv.pool().block(BlockId{2}).has_hash);
  QCOMPARE(kv.pool().block(BlockId{2}).tokens, (std::vector<TokenId>{108, 109}));
  QVERIFY(invariants_ok(kv));

  kv.free_request(RequestId{1});
  // Released 2, 1, 0: block 2 (no hash) to the front, 1 then 0 to the back.
  QCOMPARE(kv.pool().free_queue_order(), (std::vector<int32_t>{2, 3, 4, 5, 1, 0}));
  QCOMPARE(kv.num_free(), 4);
  QCOMPARE(kv.num_cached(), 2);
  QCOMPARE(kv.num_owned(), 0);
  QVERIFY(kv.pool().block(BlockId{2}).tokens.empty());
  QCOMPARE(kv.pool().block(BlockId{1}).tokens, (std::vector<TokenId>{104, 105, 106, 107}));
  QVERIFY(invariants_ok(kv));
}

GB_TEST(prefix_hit_revives_cached_blocks_and_never_covers_the_last_token) {
  KvCacheManager kv(6, 4);
  run_prompt(kv, RequestId{1}, iota_tokens(10, 100));
  kv.free_request(RequestId{1});
  (void)kv.drain_events();

  // Same 10 tokens: (10 - 1) / 4 = 2 full blocks can come from the cache.
  const auto prompt = iota_tokens(10, 100);
  QCOMPARE(kv.find_prefix(prompt, kKey).num_tokens, 8);
  QCOMPARE(kv.find_prefix(prompt, kKey).num_unreferenced, 2);
  QCOMPARE(kv.add_request(RequestId{2}, prompt, kKey), 8);
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{0, 1}));
  QCOMPARE(kv.table(RequestId{2}).num_computed, 8);
  QCOMPARE(kv.pool().free_queue_order(), (std::vector<int32_t>{2, 3, 4, 5}));
  auto events = kv.drain_events();
  QCOMPARE(events.size(), size_t{2});
  QVERIFY(events[0].kind == gb::KvEventKind::PrefixHit && events[0].block == BlockId{0});
  QVERIFY(events[1].kind == gb::KvEventKind::PrefixHit && events[1].block == BlockId{1});
  QVERIFY(events[1].request == RequestId{2});
  // The remaining 2 tokens go to the most recently freed free block, 2.
  auto copies = kv.append_slots(RequestId{2}, std::span(prompt).subspan(8));
  QVERIFY(copies && copies->empty());
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{0, 1, 2}));

  // A second holder of the same prefix: ref_count 2.
  QCOMPARE(kv.add_request(RequestId{3}, prompt, kKey), 8);
  QCOMPARE(kv.pool().block(BlockId{0}).ref_count, 2);
  QVERIFY(invariants_ok(kv));

  // An 8-token prompt whose both blocks are cached still computes its last
  // token: only (8 - 1) / 4 = 1 block is reused.
  QCOMPARE(kv.find_prefix(iota_tokens(8, 100), kKey).num_tokens, 4);
  QCOMPARE(kv.find_prefix(std::vector<TokenId>{}, kKey).num_tokens, 0);
}

GB_TEST(eviction_takes_free_blocks_first_then_least_recently_freed_cached) {
  KvCacheManager kv(4, 4);
  run_prompt(kv, RequestId{1}, iota_tokens(8, 100));  // blocks 0, 1
  kv.free_request(RequestId{1});                       // queue: 2 3 | 1 0
  QCOMPARE(kv.pool().free_queue_order(), (std::vector<int32_t>{2, 3, 1, 0}));
  run_prompt(kv, RequestId{2}, iota_tokens(8, 500));  // takes free 2, 3
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{2, 3}));
  QCOMPARE(kv.num_cached(), 2);
  (void)kv.drain_events();
  run_prompt(kv, RequestId{3}, iota_tokens(4, 900));  // must evict: LRU cached is 1
  QCOMPARE(ids(kv.table(RequestId{3}).blocks), (std::vector<int32_t>{1}));
  auto events = kv.drain_events();
  QVERIFY(events.size() >= 2);
  QVERIFY(events[0].kind == gb::KvEventKind::Evicted && events[0].block == BlockId{1});
  QVERIFY(events[1].kind == gb::KvEventKind::Allocated && events[1].request == RequestId{3});
  // Request 1's prefix now only matches its first block (block 0 survived).
  QCOMPARE(kv.find_prefix(iota_tokens(9, 100), kKey).num_tokens, 4);
  QVERIFY(invariants_ok(kv));
  // Explicit eviction empties the cache; then there is nothing left to evict.
  QVERIFY(kv.evict_lru_cached());
  QCOMPARE(kv.num_cached(), 0);
  QVERIFY(!kv.evict_lru_cached());
  QCOMPARE(kv.find_prefix(iota_tokens(9, 100), kKey).num_tokens, 0);
  QVERIFY(invariants_ok(kv));
}

GB_TEST(out_of_blocks_is_a_nullopt_that_changes_nothing) {
  KvCacheManager kv(2, 4);
  kv.add_request(RequestId{1}, {}, kKey);
  const auto tokens = iota_tokens(9, 0);
  QCOMPARE(kv.num_blocks_needed(RequestId{1}, 9), 3);
  QVERIFY(!kv.append_slots(RequestId{1}, tokens).has_value());
  QCOMPARE(kv.table(RequestId{1}).num_tokens, 0);
  QCOMPARE(kv.num_available(), 2);
  QVERIFY(kv.append_slots(RequestId{1}, std::span(tokens).first(8)).has_value());
  QCOMPARE(kv.num_available(), 0);
  QVERIFY(invariants_ok(kv));
}

GB_TEST(fork_shares_full_blocks_and_copies_the_partial_one) {
  KvCacheManager kv(8, 4);
  run_prompt(kv, RequestId{1}, iota_tokens(6, 10));  // blocks 0 (full), 1 (2 tokens)
  (void)kv.drain_events();
  auto copies = kv.fork(RequestId{1}, RequestId{2}, 6);
  const auto events = kv.drain_events();  // shared 0, allocated 2, copied 1 -> 2
  QCOMPARE(events.size(), size_t{3});
  QVERIFY(events[0].kind == gb::KvEventKind::Shared && events[0].block == BlockId{0} && events[0].ref_count == 2);
  QVERIFY(events[1].kind == gb::KvEventKind::Allocated && events[1].block == BlockId{2});
  QVERIFY(events[2].kind == gb::KvEventKind::Copied && events[2].block == BlockId{2} &&
          events[2].other_block == BlockId{1} && events[2].request == RequestId{2});
  QVERIFY(copies.has_value());
  QCOMPARE(copies->size(), size_t{1});
  QVERIFY(((*copies)[0] == gb::BlockCopy{BlockId{1}, BlockId{2}}));
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{0, 2}));
  QCOMPARE(kv.pool().block(BlockId{0}).ref_count, 2);
  QCOMPARE(kv.pool().block(BlockId{1}).ref_count, 1);
  QCOMPARE(kv.pool().block(BlockId{2}).tokens, (std::vector<TokenId>{14, 15}));
  // At a block boundary nothing is copied.
  copies = kv.fork(RequestId{1}, RequestId{3}, 4);
  QVERIFY(copies && copies->empty());
  QCOMPARE(ids(kv.table(RequestId{3}).blocks), (std::vector<int32_t>{0}));
  QCOMPARE(kv.pool().block(BlockId{0}).ref_count, 3);
  // Parent and child then diverge without touching each other's blocks.
  QVERIFY(kv.append_slots(RequestId{1}, std::vector<TokenId>{70}).has_value());
  QVERIFY(kv.append_slots(RequestId{2}, std::vector<TokenId>{80}).has_value());
  QCOMPARE(kv.pool().block(BlockId{1}).tokens, (std::vector<TokenId>{14, 15, 70}));
  QCOMPARE(kv.pool().block(BlockId{2}).tokens, (std::vector<TokenId>{14, 15, 80}));
  QVERIFY(invariants_ok(kv));
  for (uint64_t r : {1, 2, 3}) kv.free_request(RequestId{r});
  QCOMPARE(kv.num_owned(), 0);
  QVERIFY(invariants_ok(kv));
}

GB_TEST(truncate_uncaches_a_private_block_and_copies_a_shared_one_on_write) {
  KvCacheManager kv(8, 4);
  run_prompt(kv, RequestId{1}, iota_tokens(10, 0));  // 0, 1 committed; 2 partial
  kv.truncate(RequestId{1}, 3);                      // 7 tokens: block 2 released, block 1 cut
  QCOMPARE(ids(kv.table(RequestId{1}).blocks), (std::vector<int32_t>{0, 1}));
  QVERIFY(!kv.pool().block(BlockId{1}).has_hash);
  QCOMPARE(kv.pool().block(BlockId{1}).tokens, (std::vector<TokenId>{4, 5, 6}));
  QCOMPARE(kv.table(RequestId{1}).num_committed_blocks, 1);
  QCOMPARE(kv.find_prefix(iota_tokens(10, 0), kKey).num_tokens, 4);
  QVERIFY(invariants_ok(kv));

  // Shared case: request 2 hits request 3's committed blocks, then rolls back into them.
  run_prompt(kv, RequestId{3}, iota_tokens(8, 50));  // queue was 2 3 4 ..: takes 2, 3
  QCOMPARE(ids(kv.table(RequestId{3}).blocks), (std::vector<int32_t>{2, 3}));
  const auto prompt = iota_tokens(9, 50);
  QCOMPARE(run_prompt(kv, RequestId{2}, prompt), 8);  // shares 2, 3; its 9th token in block 4
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{2, 3, 4}));
  QCOMPARE(kv.pool().block(BlockId{3}).ref_count, 2);
  kv.truncate(RequestId{2}, 3);  // 6 tokens: block 4 released, block 3 shared so left intact
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{2, 3}));
  QVERIFY(kv.pool().block(BlockId{3}).has_hash);
  QCOMPARE(kv.pool().block(BlockId{3}).num_filled(), 4);
  QVERIFY(invariants_ok(kv));
  // The first write copies block 3 into the most recently freed block, 4.
  QCOMPARE(kv.num_blocks_needed(RequestId{2}, 1), 1);
  auto copies = kv.append_slots(RequestId{2}, std::vector<TokenId>{99});
  QVERIFY(copies.has_value());
  QCOMPARE(copies->size(), size_t{1});
  QVERIFY(((*copies)[0] == gb::BlockCopy{BlockId{3}, BlockId{4}}));
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{2, 4}));
  QCOMPARE(kv.pool().block(BlockId{4}).tokens, (std::vector<TokenId>{54, 55, 99}));
  QCOMPARE(kv.pool().block(BlockId{3}).tokens, (std::vector<TokenId>{54, 55, 56, 57}));
  QCOMPARE(kv.pool().block(BlockId{3}).ref_count, 1);
  QVERIFY(invariants_ok(kv));
}

GB_TEST(identical_prompts_under_two_isolation_keys_never_share) {
  KvCacheManager kv(32, 4);
  const auto prompt = iota_tokens(13, 7);
  const gb::IsolationKey other_tenant{"model-a", "tmpl-1", "", "tenant-2"};
  const gb::IsolationKey other_template{"model-a", "tmpl-2", "", "tenant-1"};
  const gb::IsolationKey other_adapter{"model-a", "tmpl-1", "lora-x", "tenant-1"};
  const gb::IsolationKey other_model{"model-b", "tmpl-1", "", "tenant-1"};
  QCOMPARE(run_prompt(kv, RequestId{1}, prompt), 0);
  uint64_t next = 2;
  for (const auto& key : {other_tenant, other_template, other_adapter, other_model}) {
    QCOMPARE(kv.find_prefix(prompt, key).num_tokens, 0);
    QCOMPARE(run_prompt(kv, RequestId{next}, prompt, key), 0);
    for (BlockId b : kv.table(RequestId{next}).blocks) QCOMPARE(kv.pool().block(b).ref_count, 1);
    ++next;
  }
  // The same key does share: 3 full blocks of the 13-token prompt.
  QCOMPARE(run_prompt(kv, RequestId{next}, prompt), 12);
  QCOMPARE(kv.pool().block(kv.table(RequestId{1}).blocks[0]).ref_count, 2);
  QVERIFY(invariants_ok(kv));
}

GB_TEST(hash_collisions_are_caught_by_comparing_stored_tokens_and_parents) {
  for (uint64_t mask : {~uint64_t{0}, uint64_t{0}}) {
    KvCacheManager kv(16, 4);
    kv.set_hash_mask_for_testing(mask);  // 0: every block hash is 0
    const std::vector<TokenId> x{1, 2, 3, 4}, y{5, 6, 7, 8}, t{9, 9, 9, 9}, u{7, 7, 7, 7};
    auto cat = [](std::vector<TokenId> a, const std::vector<TokenId>& b, const std::vector<TokenId>& c) {
      a.insert(a.end(), b.begin(), b.end());
      a.insert(a.end(), c.begin(), c.end());
      return a;
    };
    run_prompt(kv, RequestId{1}, cat(x, t, {}));   // [x][t]
    run_prompt(kv, RequestId{2}, cat(y, u, {}));   // [y][u]
    if (mask == 0) QCOMPARE(kv.pool().block(BlockId{0}).hash, kv.pool().block(BlockId{3}).hash);
    // Different tokens in a colliding block: no hit.
    QCOMPARE(kv.find_prefix(cat({0, 0, 0, 0}, t, {1}), kKey).num_tokens, 0);
    // [y][t]: block t exists with the right tokens but after x, not y; reusing it
    // would give attention the K/V of the wrong context.
    QCOMPARE(kv.find_prefix(cat(y, t, {1}), kKey).num_tokens, 4);
    // Genuine hits still work under total collision.
    QCOMPARE(kv.find_prefix(cat(x, t, {1}), kKey).num_tokens, 8);
    QCOMPARE(kv.find_prefix(cat(y, u, {1}), kKey).num_tokens, 8);
    QCOMPARE(run_prompt(kv, RequestId{3}, cat(y, t, {1})), 4);
    QVERIFY(invariants_ok(kv));
  }
}

GB_TEST(duplicate_content_is_indexed_once_and_the_copy_frees_cleanly) {
  KvCacheManager kv(8, 4);
  const auto prompt = iota_tokens(8, 0);
  // Both requests start before either has computed anything: no hit, two copies.
  QCOMPARE(kv.add_request(RequestId{1}, prompt, kKey), 0);
  QCOMPARE(kv.add_request(RequestId{2}, prompt, kKey), 0);
  QVERIFY(kv.append_slots(RequestId{1}, prompt).has_value());
  QVERIFY(kv.append_slots(RequestId{2}, prompt).has_value());
  kv.mark_computed(RequestId{1}, 8);
  kv.mark_computed(RequestId{2}, 8);
  QCOMPARE(ids(kv.table(RequestId{2}).blocks), (std::vector<int32_t>{2, 3}));
  QVERIFY(kv.pool().block(BlockId{0}).indexed && !kv.pool().block(BlockId{2}).indexed);
  QVERIFY(kv.pool().block(BlockId{2}).has_hash);
  QVERIFY(invariants_ok(kv));
  kv.free_request(RequestId{2});  // the private copies become plain free blocks
  QCOMPARE(kv.num_cached(), 0);
  QCOMPARE(kv.pool().free_queue_order(), (std::vector<int32_t>{2, 3, 4, 5, 6, 7}));
  kv.free_request(RequestId{1});
  QCOMPARE(kv.num_cached(), 2);
  QVERIFY(invariants_ok(kv));
}

GB_TEST(snapshot_shows_owners_states_and_tokens) {
  KvCacheManager kv(4, 4);
  run_prompt(kv, RequestId{7}, iota_tokens(5, 20));
  QVERIFY(kv.fork(RequestId{7}, RequestId{9}, 4).has_value());
  const gb::KvSnapshot s = kv.snapshot();
  QCOMPARE(s.blocks.size(), size_t{4});
  QCOMPARE(s.num_owned, 2);
  QCOMPARE(s.num_free, 2);
  QVERIFY(s.blocks[0].state == gb::BlockState::Owned);
  QCOMPARE(s.blocks[0].owners, (std::vector<RequestId>{RequestId{7}, RequestId{9}}));
  QCOMPARE(s.blocks[0].ref_count, 2);
  QVERIFY(s.blocks[0].has_hash);
  QCOMPARE(s.blocks[0].tokens, (std::vector<TokenId>{20, 21, 22, 23}));
  QCOMPARE(s.blocks[1].owners, (std::vector<RequestId>{RequestId{7}}));
  QCOMPARE(s.blocks[1].num_filled, 1);
  QVERIFY(!s.blocks[1].has_hash);
  QVERIFY(s.blocks[2].state == gb::BlockState::Free && s.blocks[2].owners.empty());
  QCOMPARE(s.free_queue, (std::vector<int32_t>{2, 3}));
}
