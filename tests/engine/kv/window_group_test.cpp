// Window groups in the paged KV cache: a model whose sliding layers sit beside
// global ones (Gemma 2/3) keeps the sliding layers in a pool of their own, one
// follower KvCacheManager in lockstep with the main one (kv/scheduler.h).
//
// The randomized test runs the Scheduler over a two-group fake model and
// compares every request's output with the same function computed from its
// token list; between steps every window table must have released exactly the
// blocks outside its window and the main tables none.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fake_paged_model.h"
#include "gb_test.h"
#include "kv/scheduler.h"
#include "runtime/step_layout.h"
#include "window_test_support.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace window_group_test {

using gbtest::window::is_stop;
using gbtest::window::kSeed;
using gbtest::window::live_block_bound;
using gbtest::window::make_spec;
using gbtest::window::random_tokens;
using gbtest::window::uniform;
using gb::RequestId;
using gb::TokenId;

namespace {

// --- window groups: global layers beside sliding ones (Gemma 2/3) ---------------
//
// The two-group fake model: a "global layer" whose K/V at p is chained from
// p - 1 through the main table and read at every position 0 .. p, and a
// "sliding layer" whose K/V at p (a function of the global K/V at p) lives in
// the window group's pool and is read only at p - W + 1 .. p through the
// window tables. The token at p folds both. A window block released too early,
// a main block lost, a stale window block or a wrong prefix hit in either
// group changes the tokens.

uint64_t window_kv(uint64_t main_kv, TokenId token) { return gbtest::fake_kv(main_kv ^ 0x5a5a5a5aull, token); }

TokenId two_group_token(const std::vector<uint64_t>& main, const std::vector<uint64_t>& window, int32_t pos,
                        int32_t w) {
  uint64_t h = 0x99;
  for (int32_t q = 0; q <= pos; ++q) h = gbtest::fake_kv(h ^ main[static_cast<size_t>(q)], 1);
  for (int32_t q = std::max(0, pos - w + 1); q <= pos; ++q)
    h = gbtest::fake_kv(h ^ window[static_cast<size_t>(q)], static_cast<TokenId>(q % 1000));
  return gbtest::fake_token_from_kv(h);
}

std::vector<TokenId> two_group_reference(std::vector<TokenId> seq, int32_t max_tokens, int32_t max_total, int32_t w) {
  std::vector<uint64_t> main, window;
  uint64_t prev = kSeed;
  const auto push = [&](TokenId t) {
    main.push_back(prev = gbtest::fake_kv(prev, t));
    window.push_back(window_kv(main.back(), t));
  };
  for (TokenId t : seq) push(t);
  std::vector<TokenId> out;
  for (;;) {
    const TokenId t = two_group_token(main, window, static_cast<int32_t>(main.size()) - 1, w);
    out.push_back(t);
    seq.push_back(t);
    if (is_stop(t) || static_cast<int32_t>(out.size()) >= max_tokens || static_cast<int32_t>(seq.size()) >= max_total)
      return out;
    push(t);
  }
}

class TwoGroupFakeModel {
 public:
  TwoGroupFakeModel(int32_t num_blocks, int32_t num_window_blocks, int32_t block_size, int32_t window)
      : bs_(block_size), w_(window), main_(static_cast<size_t>(num_blocks * block_size), 0),
        window_(static_cast<size_t>(num_window_blocks * block_size), 0) {}

  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& copies, bool window) {
    std::vector<uint64_t>& kv = window ? window_ : main_;
    for (auto [src, dst] : copies)
      for (int32_t s = 0; s < bs_; ++s) kv[at(dst, s)] = kv[at(src, s)];
  }

  std::vector<TokenId> forward(const gb::BatchLayout& b) {
    std::vector<TokenId> out;
    if (!b.has_window_tables()) {
      error_ = "a step without window tables";
      return out;
    }
    size_t next_row = 0;
    for (int32_t s = 0; s < b.num_seqs(); ++s) {
      const int32_t* main_table = b.table(s, false);
      const int32_t* window_table = b.table(s, true);
      const auto slot = [&](const int32_t* table, std::vector<uint64_t>& kv, int32_t pos) -> uint64_t* {
        const int32_t block = table[pos / bs_];
        if (block < 0) {
          error_ = "read position " + std::to_string(pos) + " in a released block";
          return nullptr;
        }
        return &kv[at(block, pos % bs_)];
      };
      const int32_t begin = b.seq_token_indptr[static_cast<size_t>(s)];
      const int32_t end = b.seq_token_indptr[static_cast<size_t>(s) + 1];
      for (int32_t i = begin; i < end; ++i) {
        const int32_t pos = b.positions[static_cast<size_t>(i)];
        const TokenId token = b.token_ids[static_cast<size_t>(i)];
        uint64_t prev = kSeed;
        if (pos > 0) {
          const uint64_t* p = slot(main_table, main_, pos - 1);
          if (!p) return out;
          if (*p == 0) error_ = "read an unwritten main slot at position " + std::to_string(pos - 1);
          prev = *p;
        }
        uint64_t* here = slot(main_table, main_, pos);
        uint64_t* here_w = slot(window_table, window_, pos);
        if (!here || !here_w) return out;
        *here = gbtest::fake_kv(prev, token);
        *here_w = window_kv(*here, token);
      }
      for (; next_row < b.logit_token_indices.size() && b.logit_token_indices[next_row] < end; ++next_row) {
        const int32_t pos = b.positions[static_cast<size_t>(b.logit_token_indices[next_row])];
        std::vector<uint64_t> main(static_cast<size_t>(pos + 1), 0), window(static_cast<size_t>(pos + 1), 0);
        for (int32_t q = 0; q <= pos; ++q) {
          const uint64_t* p = slot(main_table, main_, q);
          if (!p) return out;
          main[static_cast<size_t>(q)] = *p;
        }
        for (int32_t q = std::max(0, pos - w_ + 1); q <= pos; ++q) {
          const uint64_t* p = slot(window_table, window_, q);
          if (!p) return out;
          if (*p == 0) error_ = "read an unwritten window slot at position " + std::to_string(q);
          window[static_cast<size_t>(q)] = *p;
        }
        out.push_back(two_group_token(main, window, pos, w_));
      }
    }
    return out;
  }

  const std::string& error() const { return error_; }

 private:
  size_t at(int32_t block, int32_t slot) const {
    return static_cast<size_t>(block) * static_cast<size_t>(bs_) + static_cast<size_t>(slot);
  }
  int32_t bs_, w_;
  std::vector<uint64_t> main_, window_;
  std::string error_;
};

struct GroupTrial {
  gb::SchedulerConfig config;
  std::map<RequestId, gb::RequestSpec> specs;
  std::map<RequestId, gb::FinishedRequest> finished;
  std::set<RequestId> cancelled;
  std::string failure;
  int64_t num_window_released = 0;
  int32_t num_forks = 0, num_forks_refused = 0, num_prefix_hit_tokens = 0, num_preemptions = 0;
  int32_t longest_finished = 0;
  void fail(const std::string& what) {
    if (failure.empty()) failure = what;
  }
};

// Between steps: the window group's tables have released exactly the blocks
// outside their window (no more, no fewer) and hold at most the bound; the
// main group releases nothing.
void check_groups(const gb::Scheduler& sched, GroupTrial& t, const std::vector<RequestId>& live) {
  if (gb::Status s = sched.check_invariants(); !s.ok()) return t.fail(s.error().message);
  const gb::KvCacheManager& main = sched.kv_cache();
  const gb::KvCacheManager& win = *sched.window_kv_cache();
  const int32_t bound = live_block_bound(t.config.window_group.window, t.config.block_size);
  for (RequestId id : live) {
    if (!main.has_request(id)) continue;
    const gb::BlockTable& a = main.table(id);
    const gb::BlockTable& w = win.table(id);
    if (a.num_released != 0) return t.fail("the main group released a block");
    if (w.num_released != win.num_releasable_blocks(w.num_computed))
      return t.fail("request " + std::to_string(id.value) + ": window table released " +
                    std::to_string(w.num_released) + " blocks, " +
                    std::to_string(win.num_releasable_blocks(w.num_computed)) + " are outside its window");
    if (w.num_live_blocks() > bound)
      return t.fail("request " + std::to_string(id.value) + " holds " + std::to_string(w.num_live_blocks()) +
                    " window blocks, bound " + std::to_string(bound));
  }
}

void run_group_trial(std::mt19937_64& rng, GroupTrial& t) {
  gb::SchedulerConfig& c = t.config;
  const int32_t sizes[] = {1, 2, 4, 8, 16};
  c.block_size = sizes[uniform(rng, 0, 4)];
  c.window_group.window = uniform(rng, 2, 40);
  const int32_t min_window_blocks = (c.window_group.window + c.block_size - 1) / c.block_size + 1;
  c.window_group.num_blocks = min_window_blocks + uniform(rng, 0, 8);
  c.max_context = uniform(rng, 64, 300);
  c.num_blocks = (c.max_context + c.block_size - 1) / c.block_size + uniform(rng, 0, 40);
  c.max_batch_tokens = uniform(rng, 2, 64);
  c.max_seqs = uniform(rng, 1, 6);
  c.max_prefill_chunk = uniform(rng, 0, 1) ? 0 : uniform(rng, 1, 24);
  c.admission_watermark = 0.0f;
  c.max_retained = uniform(rng, 0, 2);
  gb::Scheduler sched(c);
  TwoGroupFakeModel model(c.num_blocks, c.window_group.num_blocks, c.block_size, c.window_group.window);
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
        const bool may = sched.window_kv_cache()->can_fork(parent, at);
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
    model.copy_blocks(plan.block_copies, false);
    model.copy_blocks(plan.window_block_copies, true);
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
    for (const gb::KvEvent& e : sched.window_kv_cache()->drain_events())
      t.num_window_released += e.kind == gb::KvEventKind::WindowReleased && e.block.value >= 0;
    for (const gb::KvEvent& e : sched.kv_cache().drain_events())
      if (e.kind == gb::KvEventKind::WindowReleased) t.fail("the main group released a block by window");
    std::vector<RequestId> live;
    for (uint64_t id = 1; id < next_id; ++id) live.push_back(RequestId{id});
    check_groups(sched, t, live);
  }
  if (sched.has_work()) t.fail("work left at the end");
  for (const auto& [id, f] : t.finished) {
    const gb::RequestSpec& s = t.specs.at(id);
    const auto want = two_group_reference(s.prompt_ids, s.max_tokens, sched.max_tokens_per_request(),
                                          c.window_group.window);
    if (!std::ranges::equal(f.output_ids(), want))
      t.fail("request " + std::to_string(id.value) + " output differs from the two-group reference");
  }
  for (const auto& [id, s] : t.specs)
    if (t.finished.contains(id) == t.cancelled.contains(id)) t.fail("a request neither finished nor was cancelled");
  for (RequestId id : sched.retained_requests()) sched.release(id);
  if (sched.kv_cache().num_owned() != 0 || sched.window_kv_cache()->num_owned() != 0)
    t.fail("blocks still owned at the end");
  if (gb::Status s = sched.check_invariants(); !s.ok()) t.fail(s.error().message);
}

}  // namespace

GB_TEST(random_two_group_workloads_free_exactly_the_window_blocks_and_match_the_reference) {
  std::mt19937_64 rng(7411);
  int64_t released = 0;
  int32_t forks = 0, refused = 0, hits = 0, preemptions = 0, longer_than_window_pool = 0;
  for (int trial = 0; trial < 100; ++trial) {
    GroupTrial t;
    run_group_trial(rng, t);
    QVERIFY2(t.failure.empty(), ("trial " + std::to_string(trial) + " (W " +
                                 std::to_string(t.config.window_group.window) + ", block " +
                                 std::to_string(t.config.block_size) + ", " + std::to_string(t.config.num_blocks) +
                                 " + " + std::to_string(t.config.window_group.num_blocks) + " blocks): " + t.failure)
                                    .c_str());
    released += t.num_window_released;
    forks += t.num_forks;
    refused += t.num_forks_refused;
    hits += t.num_prefix_hit_tokens;
    preemptions += t.num_preemptions;
    longer_than_window_pool += t.longest_finished > t.config.window_group.num_blocks * t.config.block_size;
  }
  std::printf("100 two-group trials: %lld window blocks released, %d forks (%d refused by the window), %d prefix-hit "
              "tokens, %d preemptions, %d trials with a request longer than the window pool\n",
              static_cast<long long>(released), forks, refused, hits, preemptions, longer_than_window_pool);
  QVERIFY2(released > 1000, std::to_string(released).c_str());
  QVERIFY2(forks > 20 && refused > 5, (std::to_string(forks) + " forks, " + std::to_string(refused) + " refused").c_str());
  QVERIFY2(hits > 100, std::to_string(hits).c_str());
  QVERIFY2(preemptions > 10, std::to_string(preemptions).c_str());
  QVERIFY2(longer_than_window_pool > 30, std::to_string(longer_than_window_pool).c_str());
}


}  // namespace window_group_test
