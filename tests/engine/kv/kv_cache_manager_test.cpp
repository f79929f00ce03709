// Randomized property test of KvCacheManager against a simple model.
//
// The model keeps, per request, the token sequence it should see and an
// isolation key, plus a shadow of the backend's KV storage: shadow[block][slot]
// holds a fingerprint of what a real model would have written there -- a hash of
// (isolation key, every token up to and including that position), because real
// K/V depends on the whole context. The test plays the backend: it executes the
// returned copies on the shadow and writes fingerprints for newly appended tokens.
// After every operation:
//   * check_invariants() passes (ref_count = holders, free + cached + owned = total, ...);
//   * reading each request's sequence through its block table yields exactly the
//     fingerprints of its own context -- so no missed copy-on-write, no prefix hit
//     on the wrong content, key or parent, no stale or reused block;
//   * the available-block count moved by exactly what the model predicts from the
//     previous snapshot (blocks whose last holder left, blocks newly taken).
// Run with real hashes and with every hash forced to collide.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gb_test.h"
#include "kv/kv_cache_manager.h"

namespace {

using gb::BlockId;
using gb::KvCacheManager;
using gb::RequestId;
using gb::TokenId;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kNumBlocks = 40;

struct ModelRequest {
  std::vector<TokenId> tokens;  // what the request's table must hold, in order
  int32_t key = 0;              // index into keys
};

uint64_t fingerprint(uint64_t h, TokenId t) {
  h ^= static_cast<uint64_t>(t) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

class PropertyRun {
 public:
  PropertyRun(uint64_t seed, uint64_t hash_mask) : rng_(seed), kv_(kNumBlocks, kBlockSize) {
    kv_.set_hash_mask_for_testing(hash_mask);
    shadow_.assign(static_cast<size_t>(kNumBlocks), std::vector<uint64_t>(kBlockSize, 0));
    std::uniform_int_distribution<TokenId> tok(0, 5);  // few symbols: many equal blocks
    for (auto& base : bases_)
      for (int i = 0; i < 24; ++i) base.push_back(tok(rng_));
  }

  // Returns an empty string or the first failure.
  std::string step() {
    const int op = std::uniform_int_distribution<int>(0, 99)(rng_);
    const std::vector<int32_t> refs_before = ref_counts();
    const int32_t available_before = kv_.num_available();
    int32_t expected_taken = 0;  // available_before - available_after
    std::string what;
    if (reqs_.empty() || op < 15) {
      what = add(expected_taken);
    } else {
      auto it = reqs_.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, reqs_.size() - 1)(rng_));
      const RequestId id = it->first;
      if (op < 55) what = append(id, expected_taken);
      else if (op < 65) what = fork(id, expected_taken);
      else if (op < 78) what = truncate(id, refs_before, expected_taken);
      else if (op < 92) what = free(id, refs_before, expected_taken);
      else what = evict(expected_taken);
    }
    if (!what.empty()) return what;
    if (available_before - kv_.num_available() != expected_taken)
      return "available blocks moved by " + std::to_string(available_before - kv_.num_available()) +
             ", model expected " + std::to_string(expected_taken);
    return verify();
  }

  int32_t num_hit_tokens() const { return num_hit_tokens_; }
  int32_t num_copies() const { return num_copies_; }

 private:
  std::string add(int32_t& expected_taken) {
    if (reqs_.size() >= 10) return {};
    const RequestId id{next_id_++};
    ModelRequest m;
    m.key = std::uniform_int_distribution<int>(0, 1)(rng_);
    const auto& base = bases_[std::uniform_int_distribution<size_t>(0, bases_.size() - 1)(rng_)];
    const auto n_base = std::uniform_int_distribution<size_t>(0, base.size())(rng_);
    std::vector<TokenId> prompt(base.begin(), base.begin() + static_cast<long>(n_base));
    for (int i = std::uniform_int_distribution<int>(1, 6)(rng_); i > 0; --i) prompt.push_back(random_token());
    const gb::PrefixMatch match = kv_.find_prefix(prompt, keys_[m.key]);
    const int32_t cached = kv_.add_request(id, prompt, keys_[m.key]);
    if (cached != match.num_tokens) return "add_request and find_prefix disagree";
    if (cached % kBlockSize != 0 || cached >= static_cast<int32_t>(prompt.size()))
      return "prefix hit not whole blocks or covering the last token";
    expected_taken = match.num_unreferenced;
    num_hit_tokens_ += cached;
    m.tokens.assign(prompt.begin(), prompt.begin() + cached);
    pending_[id] = std::vector<TokenId>(prompt.begin() + cached, prompt.end());
    reqs_[id] = m;
    return {};
  }

  std::string append(RequestId id, int32_t& expected_taken) {
    ModelRequest& m = reqs_[id];
    std::vector<TokenId>& pending = pending_[id];
    const int32_t n = std::uniform_int_distribution<int32_t>(1, 9)(rng_);
    std::vector<TokenId> tokens;
    for (int32_t i = 0; i < n; ++i) {
      if (!pending.empty()) {
        tokens.push_back(pending.front());
        pending.erase(pending.begin());
      } else {
        tokens.push_back(random_token());
      }
    }
    const int32_t needed = kv_.num_blocks_needed(id, n);
    const int32_t available = kv_.num_available();
    auto copies = kv_.append_slots(id, tokens);
    if (!copies) {
      if (needed <= available) return "append_slots refused although enough blocks were available";
      pending.insert(pending.begin(), tokens.begin(), tokens.end());
      return {};
    }
    expected_taken = needed;
    run_copies(*copies);
    // The "forward pass": write the new positions' fingerprints, then mark computed.
    const gb::BlockTable& t = kv_.table(id);
    for (TokenId tok : tokens) m.tokens.push_back(tok);
    const auto fps = fingerprints(m);
    for (int32_t p = static_cast<int32_t>(m.tokens.size()) - n; p < static_cast<int32_t>(m.tokens.size()); ++p)
      slot(t, p) = fps[static_cast<size_t>(p)];
    kv_.mark_computed(id, t.num_tokens);
    return {};
  }

  std::string fork(RequestId parent, int32_t& expected_taken) {
    if (reqs_.size() >= 10) return {};
    const ModelRequest& pm = reqs_[parent];
    const auto at = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(pm.tokens.size()))(rng_);
    const RequestId child{next_id_++};
    const bool partial = at % kBlockSize != 0;
    const int32_t available = kv_.num_available();
    auto copies = kv_.fork(parent, child, at);
    if (!copies) return partial && available == 0 ? std::string{} : "fork refused with blocks available";
    expected_taken = partial ? 1 : 0;
    run_copies(*copies);
    ModelRequest cm;
    cm.key = pm.key;
    cm.tokens.assign(pm.tokens.begin(), pm.tokens.begin() + at);
    reqs_[child] = cm;
    pending_[child] = {};
    return {};
  }

  std::string truncate(RequestId id, const std::vector<int32_t>& refs, int32_t& expected_taken) {
    ModelRequest& m = reqs_[id];
    const auto n = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(m.tokens.size()))(rng_);
    const auto keep = static_cast<int32_t>(m.tokens.size()) - n;
    const gb::BlockTable& t = kv_.table(id);
    // Blocks past ceil(keep / bs) are released; those we held alone become available.
    for (int32_t i = (keep + kBlockSize - 1) / kBlockSize; i < t.num_blocks(); ++i)
      if (refs[static_cast<size_t>(t.blocks[static_cast<size_t>(i)].value)] == 1) --expected_taken;
    kv_.truncate(id, n);
    m.tokens.resize(static_cast<size_t>(keep));
    pending_[id].clear();  // rejected drafts: the next tokens are new ones
    return {};
  }

  std::string free(RequestId id, const std::vector<int32_t>& refs, int32_t& expected_taken) {
    for (BlockId b : kv_.table(id).blocks)
      if (refs[static_cast<size_t>(b.value)] == 1) --expected_taken;
    kv_.free_request(id);
    reqs_.erase(id);
    pending_.erase(id);
    return {};
  }

  std::string evict(int32_t& expected_taken) {
    const int32_t cached = kv_.num_cached();
    const bool evicted = kv_.evict_lru_cached();
    if (evicted != (cached > 0)) return "evict_lru_cached result disagrees with num_cached";
    expected_taken = 0;  // an evicted block stays available, only its hash goes
    if (evicted && kv_.num_cached() != cached - 1) return "eviction did not drop exactly one cached block";
    return {};
  }

  std::string verify() {
    if (gb::Status s = kv_.check_invariants(); !s.ok()) return s.error().message;
    int32_t owned_blocks = 0;
    std::vector<bool> seen(static_cast<size_t>(kNumBlocks), false);
    for (const auto& [id, m] : reqs_) {
      const gb::BlockTable& t = kv_.table(id);
      if (t.num_tokens != static_cast<int32_t>(m.tokens.size())) return "table length differs from the model";
      if (t.num_computed != t.num_tokens) return "not all tokens computed";
      const auto fps = fingerprints(m);
      for (int32_t p = 0; p < t.num_tokens; ++p) {
        if (slot(t, p) != fps[static_cast<size_t>(p)])
          return "request " + std::to_string(id.value) + " position " + std::to_string(p) + " reads foreign KV";
        const gb::KvBlock& b = kv_.pool().block(t.blocks[static_cast<size_t>(p / kBlockSize)]);
        if (b.tokens[static_cast<size_t>(p % kBlockSize)] != m.tokens[static_cast<size_t>(p)])
          return "block tokens differ from the request's tokens";
      }
      for (BlockId b : t.blocks)
        if (!seen[static_cast<size_t>(b.value)]) seen[static_cast<size_t>(b.value)] = true, ++owned_blocks;
    }
    if (owned_blocks != kv_.num_owned()) return "owned count differs from the blocks the tables hold";
    if (kv_.num_free() + kv_.num_cached() + kv_.num_owned() != kNumBlocks) return "counts do not add up";
    return {};
  }

  std::vector<uint64_t> fingerprints(const ModelRequest& m) const {
    std::vector<uint64_t> out;
    uint64_t h = 0x1234 + static_cast<uint64_t>(m.key);
    for (TokenId t : m.tokens) out.push_back(h = fingerprint(h, t));
    return out;
  }
  uint64_t& slot(const gb::BlockTable& t, int32_t p) {
    return shadow_[static_cast<size_t>(t.blocks[static_cast<size_t>(p / kBlockSize)].value)]
                  [static_cast<size_t>(p % kBlockSize)];
  }
  void run_copies(const std::vector<gb::BlockCopy>& copies) {
    for (const gb::BlockCopy& c : copies) {
      shadow_[static_cast<size_t>(c.dst.value)] = shadow_[static_cast<size_t>(c.src.value)];
      ++num_copies_;
    }
  }
  std::vector<int32_t> ref_counts() const {
    std::vector<int32_t> out;
    for (int32_t i = 0; i < kNumBlocks; ++i) out.push_back(kv_.pool().block(BlockId{i}).ref_count);
    return out;
  }
  TokenId random_token() { return std::uniform_int_distribution<TokenId>(0, 5)(rng_); }

  std::mt19937_64 rng_;
  KvCacheManager kv_;
  std::vector<std::vector<uint64_t>> shadow_;  // (num_blocks, block_size) fingerprints
  std::vector<std::vector<TokenId>> bases_ = std::vector<std::vector<TokenId>>(3);
  const gb::IsolationKey keys_[2] = {{"m", "t", "", "alice"}, {"m", "t", "", "bob"}};
  std::map<RequestId, ModelRequest> reqs_;
  std::map<RequestId, std::vector<TokenId>> pending_;  // prompt tokens not yet appended
  uint64_t next_id_ = 1;
  int32_t num_hit_tokens_ = 0;
  int32_t num_copies_ = 0;
};

void run_property(uint64_t hash_mask) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    PropertyRun run(seed, hash_mask);
    for (int i = 0; i < 3000; ++i) {
      const std::string failure = run.step();
      if (!failure.empty())
        QFAIL(("seed " + std::to_string(seed) + " op " + std::to_string(i) + ": " + failure).c_str());
    }
    // The workload must actually exercise sharing, or the checks prove little.
    QVERIFY2(run.num_hit_tokens() > 100, std::to_string(run.num_hit_tokens()).c_str());
    QVERIFY2(run.num_copies() > 20, std::to_string(run.num_copies()).c_str());
  }
}

}  // namespace

GB_TEST(random_operations_keep_invariants_and_every_request_reads_its_own_kv) {
  run_property(~uint64_t{0});
}

GB_TEST(random_operations_stay_correct_when_every_hash_collides) {
  run_property(0);
}

namespace {

// What tables see: the counts, and each table's blocks (ids too with_ids).
std::string tables_view(const KvCacheManager& m, std::initializer_list<RequestId> ids, bool with_ids) {
  std::string out = "available " + std::to_string(m.num_available()) + " cached " + std::to_string(m.num_cached());
  for (RequestId id : ids) {
    out += " | " + std::to_string(id.value) + ":";
    if (!m.has_request(id)) continue;
    out += " " + std::to_string(m.table(id).num_blocks()) + " blocks";
    if (with_ids)
      for (int32_t b : m.table(id).block_ids()) out += " " + std::to_string(b);
  }
  return out;
}

}  // namespace

// Lookahead blocks (self-draft scratch) come from the same pool, from a reserve
// tables never take: the same table operations give the same counts and
// evictions with and without the reserve, even while lookahead blocks are lent
// (and the same block ids while none is), and the lent blocks are owned, shown
// and swept like any other.
GB_TEST(lookahead_blocks_come_from_a_reserve_tables_never_take) {
  KvCacheManager plain(4, 2);
  KvCacheManager unused(4, 2, 3);
  KvCacheManager kv(4, 2, 3);
  const gb::IsolationKey key{"m", "", ""};
  const std::vector<TokenId> a{1, 2, 3, 4, 5, 6}, b{7, 8, 9, 10, 11, 12, 13, 14};
  const RequestId ra{1}, rb{2}, rc{3}, rd{4};
  const auto tables = [&](KvCacheManager& m, bool lend) {
    m.add_request(ra, a, key);
    GB_CHECK(m.append_slots(ra, a).has_value());
    m.mark_computed(ra, 6);
    if (lend) GB_CHECK(m.allocate_lookahead(rc, 2).has_value());
    m.free_request(ra);  // 3 full blocks cached
    m.add_request(rb, b, key);
    GB_CHECK(m.append_slots(rb, b).has_value());  // 4 blocks: the free one, then LRU evictions
    GB_CHECK(!m.append_slots(rb, std::vector<TokenId>{15}).has_value());  // full for tables
  };
  tables(plain, false);
  tables(unused, false);
  tables(kv, true);
  QCOMPARE(tables_view(unused, {ra, rb}, true), tables_view(plain, {ra, rb}, true));
  QCOMPARE(tables_view(kv, {ra, rb}, false), tables_view(plain, {ra, rb}, false));
  QCOMPARE(kv.num_available(), 0);
  QCOMPARE(kv.num_blocks(), 7);
  QCOMPARE(kv.num_lookahead_held(), 2);
  QVERIFY(kv.check_invariants().ok());

  // Only the reserve's last block is left: a set of two is refused, one is lent.
  QVERIFY(!kv.allocate_lookahead(rd, 2).has_value());
  const auto one = kv.allocate_lookahead(rd, 1);
  QVERIFY(one.has_value() && one->size() == 1);
  const gb::KvSnapshot snap = kv.snapshot();
  int lent = 0;
  for (const gb::KvBlockView& v : snap.blocks) {
    if (!v.lookahead) continue;
    ++lent;
    QCOMPARE(v.state, gb::BlockState::Owned);
    QCOMPARE(v.owners.size(), size_t{1});
    QVERIFY(v.owners[0] == rc || v.owners[0] == rd);
  }
  QCOMPARE(lent, 3);
  QCOMPARE(kv.num_owned(), 4 + 3);
  QVERIFY(kv.check_invariants().ok());

  // Given back, they are free again; the tables never noticed.
  kv.free_lookahead(rc);
  kv.free_lookahead(rd);
  kv.free_lookahead(rd);  // none held: nothing happens
  QCOMPARE(kv.num_lookahead_held(), 0);
  QCOMPARE(kv.num_free(), 3);
  QCOMPARE(tables_view(kv, {ra, rb}, false), tables_view(plain, {ra, rb}, false));
  QVERIFY(kv.check_invariants().ok());
  QVERIFY(unused.check_invariants().ok());
}
