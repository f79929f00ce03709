// Sliding-window release in the paged KV cache (every layer slides): blocks no
// future query can read leave the request's table (-1) and go back to the pool.
//
// The randomized test runs the Scheduler over a windowed fake model: the K/V of
// position p is chained from the K/V of p - 1 (read back through the block
// table) and the token at p, and the token sampled at p is a fingerprint of
// the K/V of positions p - W + 1 .. p, all read through the table -- like
// windowed attention. A released slot that is still read, a block reused while
// a request still needs it, or a wrong prefix hit changes the tokens, which
// are compared with the same function computed straight from the token list.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fake_paged_model.h"
#include "window_test_support.h"
#include "gb_test.h"
#include "kv/scheduler.h"
#include "runtime/step_layout.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace sliding_window_test {

namespace {

using gb::BlockId;
using gb::RequestId;
using gb::TokenId;

using gbtest::window::is_stop;
using gbtest::window::kSeed;
using gbtest::window::live_block_bound;
using gbtest::window::make_spec;
using gbtest::window::random_tokens;
using gbtest::window::uniform;


TokenId window_token(const std::vector<uint64_t>& kv, int32_t pos, int32_t window) {
  uint64_t h = 0x77;
  for (int32_t q = std::max(0, pos - window + 1); q <= pos; ++q)
    h = gbtest::fake_kv(h ^ kv[static_cast<size_t>(q)], static_cast<TokenId>(q % 1000));
  return gbtest::fake_token_from_kv(h);
}

// The windowed fake transformer on a plain token list: its next token.
std::vector<TokenId> reference_output(std::vector<TokenId> seq, int32_t max_tokens, int32_t max_total,
                                      int32_t window) {
  std::vector<uint64_t> kv;
  uint64_t prev = kSeed;
  for (TokenId t : seq) kv.push_back(prev = gbtest::fake_kv(prev, t));
  std::vector<TokenId> out;
  for (;;) {
    const TokenId t = window_token(kv, static_cast<int32_t>(kv.size()) - 1, window);
    out.push_back(t);
    seq.push_back(t);
    if (is_stop(t) || static_cast<int32_t>(out.size()) >= max_tokens || static_cast<int32_t>(seq.size()) >= max_total)
      return out;
    kv.push_back(gbtest::fake_kv(kv.back(), t));
  }
}

// The same function, reading K/V only through the block tables.
class WindowedFakeModel {
 public:
  WindowedFakeModel(int32_t num_blocks, int32_t block_size, int32_t window)
      : block_size_(block_size), window_(window), kv_(static_cast<size_t>(num_blocks * block_size), 0) {}

  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& copies) {
    for (auto [src, dst] : copies)
      for (int32_t s = 0; s < block_size_; ++s) kv_[index(dst, s)] = kv_[index(src, s)];
  }

  std::vector<TokenId> forward(const gb::BatchLayout& b) {
    std::vector<TokenId> out;
    size_t next_row = 0;
    for (int32_t s = 0; s < b.num_seqs(); ++s) {
      const int32_t* table = b.block_ids.data() + b.block_indptr[static_cast<size_t>(s)];
      const auto slot = [&](int32_t pos) -> uint64_t* {
        const int32_t block = table[pos / block_size_];
        if (block < 0) {
          error_ = "read position " + std::to_string(pos) + " in a block released by the sliding window";
          return nullptr;
        }
        return &kv_[index(block, pos % block_size_)];
      };
      const int32_t begin = b.seq_token_indptr[static_cast<size_t>(s)];
      const int32_t end = b.seq_token_indptr[static_cast<size_t>(s) + 1];
      for (int32_t i = begin; i < end; ++i) {
        const int32_t pos = b.positions[static_cast<size_t>(i)];
        uint64_t prev = kSeed;
        if (pos > 0) {
          const uint64_t* p = slot(pos - 1);
          if (!p) return out;
          if (*p == 0) error_ = "read an unwritten KV slot at position " + std::to_string(pos - 1);
          prev = *p;
        }
        uint64_t* here = slot(pos);
        if (!here) return out;
        *here = gbtest::fake_kv(prev, b.token_ids[static_cast<size_t>(i)]);
      }
      // Logit rows of this sequence, after all its writes.
      for (; next_row < b.logit_token_indices.size() && b.logit_token_indices[next_row] < end; ++next_row) {
        const int32_t pos = b.positions[static_cast<size_t>(b.logit_token_indices[next_row])];
        std::vector<uint64_t> kv(static_cast<size_t>(pos + 1), 0);
        for (int32_t q = std::max(0, pos - window_ + 1); q <= pos; ++q) {
          const uint64_t* p = slot(q);
          if (!p) return out;
          kv[static_cast<size_t>(q)] = *p;
        }
        out.push_back(window_token(kv, pos, window_));
      }
    }
    return out;
  }

  const std::string& error() const { return error_; }

 private:
  size_t index(int32_t block, int32_t slot) const {
    return static_cast<size_t>(block) * static_cast<size_t>(block_size_) + static_cast<size_t>(slot);
  }
  int32_t block_size_, window_;
  std::vector<uint64_t> kv_;  // (num_blocks, block_size) fingerprints
  std::string error_;
};


struct Trial {
  gb::SchedulerConfig config;
  std::map<RequestId, gb::RequestSpec> specs;
  std::map<RequestId, gb::FinishedRequest> finished;
  std::set<RequestId> cancelled;
  std::string failure;
  int64_t num_window_released = 0;
  int32_t longest_finished = 0;
  int32_t num_forks = 0, num_forks_refused = 0, num_prefix_hit_tokens = 0, num_preemptions = 0;

  void fail(const std::string& what) {
    if (failure.empty()) failure = what;
  }
};

// Between steps: invariants, and no table above the bound.
void check_tables(const gb::Scheduler& sched, Trial& t) {
  if (gb::Status s = sched.check_invariants(); !s.ok()) return t.fail(s.error().message);
  const gb::KvSnapshot snap = sched.kv_cache().snapshot();
  std::map<RequestId, int32_t> held;
  for (const gb::KvBlockView& b : snap.blocks)
    for (RequestId owner : b.owners) ++held[owner];
  const int32_t bound = live_block_bound(t.config.sliding_window, t.config.block_size);
  for (const auto& [id, n] : held) {
    if (n > bound)
      return t.fail("request " + std::to_string(id.value) + " holds " + std::to_string(n) + " blocks, bound " +
                    std::to_string(bound));
    if (n != sched.kv_cache().table(id).num_live_blocks()) return t.fail("snapshot owners disagree with the table");
  }
  int32_t marked = 0;
  for (const gb::KvBlockView& b : snap.blocks) {
    if (b.window_released && b.state == gb::BlockState::Owned) return t.fail("an owned block is marked released");
    marked += b.window_released ? 1 : 0;
  }
  if (marked != snap.num_window_released) t.fail("snapshot's released count is off");
}

void run_trial(std::mt19937_64& rng, Trial& t) {
  gb::SchedulerConfig& c = t.config;
  const int32_t sizes[] = {1, 2, 4, 8, 16};
  c.block_size = sizes[uniform(rng, 0, 4)];
  c.sliding_window = uniform(rng, 2, 40);
  // From the least that lets one request run past the pool to a few more.
  const int32_t min_blocks = (c.sliding_window + c.block_size - 1) / c.block_size + 1;
  c.num_blocks = min_blocks + uniform(rng, 0, 6);
  c.max_batch_tokens = uniform(rng, 2, 64);
  c.max_seqs = uniform(rng, 1, 6);
  c.max_context = uniform(rng, 64, 400);
  c.max_prefill_chunk = uniform(rng, 0, 1) ? 0 : uniform(rng, 1, 24);
  c.admission_watermark = 0.0f;
  c.max_retained = uniform(rng, 0, 2);
  gb::Scheduler sched(c);
  WindowedFakeModel model(c.num_blocks, c.block_size, c.sliding_window);
  if (sched.max_tokens_per_request() != c.max_context) return t.fail("the window does not lift the pool limit");
  const bool prefix_cache = uniform(rng, 0, 3) != 0;
  const std::vector<TokenId> system = random_tokens(rng, 60);
  uint64_t next_id = 1;
  for (int64_t step = 0; step < 6000 && t.failure.empty(); ++step) {
    if (step < 80 && uniform(rng, 0, 3) == 0) {
      std::vector<TokenId> prompt(system.begin(), system.begin() + uniform(rng, 0, 60));
      for (TokenId tok : random_tokens(rng, uniform(rng, 1, 80))) prompt.push_back(tok);
      if (static_cast<int32_t>(prompt.size()) >= c.max_context) prompt.resize(static_cast<size_t>(c.max_context / 2));
      auto s = make_spec(next_id++, std::move(prompt), uniform(rng, 1, 300), prefix_cache);
      s.retain_kv = uniform(rng, 0, 4) == 0;
      t.specs[s.id] = s;
      if (!sched.submit(s).ok()) t.fail("a prompt shorter than max_context was refused");
    }
    if (next_id > 1 && uniform(rng, 0, 60) == 0) {
      if (const RequestId victim{static_cast<uint64_t>(uniform(rng, 1, static_cast<int32_t>(next_id) - 1))};
          sched.cancel(victim))
        t.cancelled.insert(victim);
    }
    if (next_id > 1 && uniform(rng, 0, 30) == 0) {
      // Fork a running or retained request at its end or somewhere earlier;
      // a fork into released blocks is refused and then submitted plainly.
      const RequestId parent{static_cast<uint64_t>(uniform(rng, 1, static_cast<int32_t>(next_id) - 1))};
      const int32_t held = sched.num_tokens_held(parent);
      if (held > 1 && held + 2 < c.max_context) {
        const gb::Request* r = sched.find(parent);
        const std::vector<TokenId>& all = r ? r->tokens : t.finished.at(parent).tokens;
        const int32_t at = uniform(rng, 0, 1) ? held : uniform(rng, 1, held);
        std::vector<TokenId> prompt(all.begin(), all.begin() + at);
        prompt.push_back(static_cast<TokenId>(uniform(rng, 0, 999)));
        auto s = make_spec(next_id++, prompt, uniform(rng, 1, 100), prefix_cache);
        t.specs[s.id] = s;
        const bool may = sched.kv_cache().can_fork(parent, at);
        const gb::Status st = sched.fork(parent, s, at);
        if (st.ok()) ++t.num_forks;
        else if (!may) ++t.num_forks_refused;
        else if (st.error().message.find("no free KV block") == std::string::npos)
          t.fail("a fork the window allows was refused: " + st.error().message);
        if (!st.ok() && !sched.submit(s).ok()) t.fail("a refused fork could not be submitted");
      }
    }
    gb::StepPlan plan = sched.schedule();
    if (plan.empty()) {
      if (step >= 80 && !sched.has_work()) break;
      if (sched.stalled_request()) t.fail("stalled");
      continue;
    }
    t.num_prefix_hit_tokens += plan.stats.num_prefix_hit_tokens;
    t.num_preemptions += plan.stats.num_preemptions;
    const gb::BatchLayout layout = gb::to_batch_layout(plan);
    model.copy_blocks(plan.block_copies);
    const std::vector<TokenId> tokens = model.forward(layout);
    if (!model.error().empty()) return t.fail(model.error());
    std::vector<gb::StepToken> sampled;
    size_t row = 0;
    for (const gb::ScheduledRequest& r : plan.requests)
      if (r.needs_logits()) sampled.push_back({r.id, tokens[row], is_stop(tokens[row])}), ++row;
    for (gb::FinishedRequest& f : sched.on_step_done(plan, sampled)) {
      t.longest_finished = std::max(t.longest_finished, static_cast<int32_t>(f.tokens.size()));
      t.finished[f.id] = std::move(f);
    }
    for (const gb::KvEvent& e : sched.kv_cache().drain_events())
      t.num_window_released += e.kind == gb::KvEventKind::WindowReleased && e.block.value >= 0;
    check_tables(sched, t);
  }
  if (sched.has_work()) t.fail("work left at the end");
  for (const auto& [id, f] : t.finished) {
    const gb::RequestSpec& s = t.specs.at(id);
    const auto want = reference_output(s.prompt_ids, s.max_tokens, sched.max_tokens_per_request(), c.sliding_window);
    if (!std::ranges::equal(f.output_ids(), want))
      t.fail("request " + std::to_string(id.value) + " output differs from the windowed reference");
  }
  for (const auto& [id, s] : t.specs)
    if (t.finished.contains(id) == t.cancelled.contains(id)) t.fail("a request neither finished nor was cancelled");
  for (RequestId id : sched.retained_requests()) sched.release(id);
  if (sched.kv_cache().num_owned() != 0) t.fail("blocks still owned at the end");
  if (gb::Status s = sched.check_invariants(); !s.ok()) t.fail(s.error().message);
}

}  // namespace

GB_TEST(random_workloads_release_blocks_within_the_bound_and_match_the_windowed_reference) {
  std::mt19937_64 rng(6013);
  int64_t released = 0;
  int32_t longer_than_pool = 0, forks = 0, refused = 0, hits = 0, preemptions = 0;
  for (int trial = 0; trial < 120; ++trial) {
    Trial t;
    run_trial(rng, t);
    QVERIFY2(t.failure.empty(), ("trial " + std::to_string(trial) + " (W " + std::to_string(t.config.sliding_window) +
                                 ", block " + std::to_string(t.config.block_size) + ", " +
                                 std::to_string(t.config.num_blocks) + " blocks): " + t.failure)
                                    .c_str());
    released += t.num_window_released;
    longer_than_pool += t.longest_finished > t.config.num_blocks * t.config.block_size;
    forks += t.num_forks;
    refused += t.num_forks_refused;
    hits += t.num_prefix_hit_tokens;
    preemptions += t.num_preemptions;
  }
  std::printf("120 trials: %lld blocks released by the window, %d trials with a request longer than the pool, "
              "%d forks (%d refused by the window), %d prefix-hit tokens, %d preemptions\n",
              static_cast<long long>(released), longer_than_pool, forks, refused, hits, preemptions);
  // The workloads must reach the paths that matter.
  QVERIFY2(released > 1000, std::to_string(released).c_str());
  QVERIFY2(longer_than_pool > 30, std::to_string(longer_than_pool).c_str());
  QVERIFY2(forks > 20 && refused > 5, (std::to_string(forks) + " forks, " + std::to_string(refused) + " refused").c_str());
  QVERIFY2(hits > 100, std::to_string(hits).c_str());
  QVERIFY2(preemptions > 10, std::to_string(preemptions).c_str());
}

// Exact ids, states and events on a small hand-checked case: W = 6, blocks of 4.
GB_TEST(manager_releases_blocks_that_left_the_window_and_keeps_them_as_prefix_hits) {
  gb::KvCacheManager kv(8, 4, 0, 6);
  const std::vector<TokenId> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const gb::IsolationKey key{"m", "", "", ""};
  const RequestId a{1};
  kv.add_request(a, {}, key);
  QVERIFY(kv.append_slots(a, tokens).has_value());  // blocks 0, 1, 2, 3
  kv.drain_events();
  // 14 computed: the next query (position 14) reads 9 .. 14, so blocks 0 and 1
  // (positions 0 .. 7) are read by nobody; block 2 (8 .. 11) still is.
  kv.mark_computed(a, 14);
  QCOMPARE(kv.num_releasable_blocks(14), 2);
  QCOMPARE(kv.num_releasable_blocks(13), 2);
  QCOMPARE(kv.num_releasable_blocks(12), 1);
  const gb::BlockTable& t = kv.table(a);
  QCOMPARE(t.num_released, 2);
  QCOMPARE(t.num_live_blocks(), 2);
  QCOMPARE(t.block_ids(), (std::vector<int32_t>{-1, -1, 2, 3}));
  // Both were committed first, so they stay findable: cached, marked released.
  for (int32_t b : {0, 1}) {
    QVERIFY(kv.pool().block(BlockId{b}).state() == gb::BlockState::Cached);
    QVERIFY(kv.pool().block(BlockId{b}).window_released);
  }
  int32_t released_events = 0;
  for (const gb::KvEvent& e : kv.drain_events())
    released_events += e.kind == gb::KvEventKind::WindowReleased && e.request == a;
  QCOMPARE(released_events, 2);
  QVERIFY(kv.check_invariants().ok());
  QCOMPARE(kv.snapshot().num_window_released, 2);
  QCOMPARE(kv.snapshot().num_table_slots_released, 2);

  // A 13-token prompt with the same start hits blocks 0, 1, 2 (12 tokens). At
  // position 12 it reads 7 .. 12: block 0 is matched (it verifies the chain)
  // but goes straight back, block 1 is revived from the cache, block 2 shared.
  const RequestId b{2};
  const gb::PrefixMatch match = kv.find_prefix(std::span(tokens).first(13), key);
  QCOMPARE(match.num_blocks, 3);
  QCOMPARE(match.num_released, 1);
  QCOMPARE(match.num_unreferenced, 1);
  QCOMPARE(kv.add_request(b, std::span(tokens).first(13), key), 12);
  QCOMPARE(kv.table(b).block_ids(), (std::vector<int32_t>{-1, 1, 2}));
  QCOMPARE(kv.pool().block(BlockId{1}).ref_count, 1);
  QVERIFY(!kv.pool().block(BlockId{1}).window_released);
  QCOMPARE(kv.pool().block(BlockId{2}).ref_count, 2);
  QVERIFY(kv.pool().block(BlockId{0}).state() == gb::BlockState::Cached);
  QVERIFY(kv.check_invariants().ok());

  // a forks at 14 (its end): the child starts with two released slots, shares
  // block 2 and copies the partial block 3. A fork at 8 would read block 1.
  QVERIFY(kv.can_fork(a, 14));
  QVERIFY(kv.can_fork(a, 13));
  QVERIFY(!kv.can_fork(a, 12));
  QVERIFY(!kv.can_fork(a, 8));
  const auto copies = kv.fork(a, RequestId{3}, 14);
  QVERIFY(copies.has_value() && copies->size() == 1 && (*copies)[0].src == BlockId{3});
  QCOMPARE(kv.table(RequestId{3}).num_released, 2);
  QCOMPARE(kv.table(RequestId{3}).block_ids()[2], 2);
  int32_t slot_events = 0;
  for (const gb::KvEvent& e : kv.drain_events())
    slot_events += e.kind == gb::KvEventKind::WindowReleased && e.block == gb::kReleasedBlock;
  QCOMPARE(slot_events, 2);
  QVERIFY(kv.check_invariants().ok());

  // The child goes on: after 8 more tokens block 2 leaves its window too.
  QVERIFY(kv.append_slots(RequestId{3}, std::span(tokens).first(8)).has_value());
  kv.mark_computed(RequestId{3}, 22);
  QCOMPARE(kv.table(RequestId{3}).num_released, 4);
  QCOMPARE(kv.pool().block(BlockId{2}).ref_count, 2);  // a and b still hold it
  QVERIFY(kv.check_invariants().ok());

  kv.free_request(a);
  kv.free_request(b);
  kv.free_request(RequestId{3});
  QCOMPARE(kv.num_owned(), 0);
  QVERIFY(kv.check_invariants().ok());
}

GB_TEST(no_window_or_a_global_layer_releases_nothing) {
  gb::KvCacheManager kv(8, 4, 0, 0);
  const std::vector<TokenId> tokens(20, 3);
  kv.add_request(RequestId{1}, {}, gb::IsolationKey{"m", "", "", ""});
  QVERIFY(kv.append_slots(RequestId{1}, tokens).has_value());
  kv.mark_computed(RequestId{1}, 20);
  QCOMPARE(kv.table(RequestId{1}).num_released, 0);
  QCOMPARE(kv.table(RequestId{1}).num_live_blocks(), 5);
  // A scheduler without a window keeps the pool limit.
  gb::SchedulerConfig c;
  c.num_blocks = 8;
  c.block_size = 4;
  c.max_context = 1000;
  QCOMPARE(gb::Scheduler(c).max_tokens_per_request(), 32);
  c.sliding_window = 6;
  QCOMPARE(gb::Scheduler(c).max_tokens_per_request(), 1000);
  // A pool that cannot hold the window and a block stays limited.
  c.sliding_window = 40;
  QCOMPARE(gb::Scheduler(c).max_tokens_per_request(), 32);
}

}  // namespace sliding_window_test
