// KV eviction (kv/kv_policy.h, kv/scheduler.h "KV eviction"):
//  - kv_select_kept against a plain greedy reference on random slots and scores;
//  - a randomized scheduler workload (every policy, forks, preemption, window
//    groups) over a fake pool whose rows record (position, token): after every
//    step each table slot must hold the position the scheduler says, every
//    query must read exactly the kept positions, and the policies' invariants
//    (budget, sinks, recent window) must hold;
//  - sink decoding at the budget moves no rows and keeps exactly sinks + recent.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gb_test.h"
#include "kv/kv_policy.h"
#include "kv/scheduler.h"
#include "runtime/step_layout.h"

namespace kv_eviction_test {

using gb::KvPolicy;
using gb::KvPolicyKind;
using gb::RequestId;
using gb::TokenId;

namespace {

int32_t pick(std::mt19937_64& rng, int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }

// The reference: drop one slot at a time until `keep` remain -- the lowest
// ranked of the unforced slots (rank, then position, ascending), else the
// oldest of the recent window, else the latest sink.
std::set<int32_t> reference_kept(const KvPolicy& p, const std::vector<int32_t>& pos, const std::vector<float>& scores,
                                 int32_t keep, int32_t end_pos) {
  const auto n = static_cast<int32_t>(pos.size());
  std::vector<float> rank(scores);
  if (p.kind == KvPolicyKind::SnapKV)
    for (int32_t i = 0; i < n; ++i) {
      float m = -1e30f;
      for (int32_t j = i - p.pool / 2; j <= i + p.pool / 2; ++j)
        if (j >= 0 && j < n) m = std::max(m, scores[static_cast<size_t>(j)]);
      rank[static_cast<size_t>(i)] = m;
    }
  if (p.kind == KvPolicyKind::Sink) std::fill(rank.begin(), rank.end(), 0.0f);
  std::set<int32_t> left;
  for (int32_t i = 0; i < n; ++i) left.insert(i);
  while (static_cast<int32_t>(left.size()) > std::max(0, keep)) {
    int32_t victim = -1;
    for (int32_t i : left) {
      const int32_t q = pos[static_cast<size_t>(i)];
      if (q < p.sinks || q >= end_pos - p.recent) continue;
      if (victim < 0) { victim = i; continue; }
      const float a = rank[static_cast<size_t>(i)], b = rank[static_cast<size_t>(victim)];
      if (a < b || (a == b && q < pos[static_cast<size_t>(victim)])) victim = i;
    }
    if (victim < 0)
      for (int32_t i : left)
        if (pos[static_cast<size_t>(i)] >= p.sinks && (victim < 0 || pos[static_cast<size_t>(i)] < pos[static_cast<size_t>(victim)]))
          victim = i;
    if (victim < 0)
      for (int32_t i : left)
        if (victim < 0 || pos[static_cast<size_t>(i)] > pos[static_cast<size_t>(victim)]) victim = i;
    left.erase(victim);
  }
  return left;
}

KvPolicy random_policy(std::mt19937_64& rng, KvPolicyKind kind, int32_t budget) {
  KvPolicy p;
  p.kind = kind;
  p.budget = budget;
  p.sinks = pick(rng, 0, 1) ? -1 : pick(rng, 0, std::max(0, budget / 3));
  if (kind == KvPolicyKind::H2O) p.recent = pick(rng, 0, 1) ? -1 : pick(rng, 1, std::max(1, budget - std::max(0, p.sinks)));
  if (kind == KvPolicyKind::SnapKV) {
    p.window = pick(rng, 1, std::max(1, budget / 2));
    p.pool = 2 * pick(rng, 0, 4) + 1;
  }
  return p;
}

}  // namespace

GB_TEST(kept_sets_equal_a_greedy_reference_on_random_slots) {
  std::mt19937_64 rng(7);
  int32_t checked = 0;
  for (int32_t trial = 0; trial < 3000; ++trial) {
    const KvPolicyKind kind = std::array{KvPolicyKind::Sink, KvPolicyKind::H2O, KvPolicyKind::SnapKV}[static_cast<size_t>(trial % 3)];
    const int32_t budget = pick(rng, 1, 40);
    auto p = gb::resolve_kv_policy(random_policy(rng, kind, budget));
    if (!p) continue;
    const int32_t end_pos = pick(rng, 1, 120);
    // Distinct positions before end_pos, in random slot order (a decode that
    // reused slots scrambles them); snapkv prunes an unscrambled prompt.
    std::vector<int32_t> all(static_cast<size_t>(end_pos));
    for (int32_t i = 0; i < end_pos; ++i) all[static_cast<size_t>(i)] = i;
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<size_t>(pick(rng, 0, end_pos)));
    if (kind == KvPolicyKind::SnapKV || pick(rng, 0, 1)) std::sort(all.begin(), all.end());
    std::vector<float> scores;
    for (size_t i = 0; i < all.size(); ++i) scores.push_back(static_cast<float>(pick(rng, 0, 6)) * 0.25f);  // ties
    const int32_t keep = pick(rng, 0, static_cast<int32_t>(all.size()) + 2);
    const std::vector<int32_t> kept = gb::kv_select_kept(*p, all, scores, keep, end_pos);
    QVERIFY(std::is_sorted(kept.begin(), kept.end()));
    const std::set<int32_t> want = reference_kept(*p, all, scores, keep, end_pos);
    if (!all.empty() && kind != KvPolicyKind::SnapKV) {
      // The one-pass victim of a decode at the budget.
      const std::set<int32_t> rest = reference_kept(*p, all, scores, static_cast<int32_t>(all.size()) - 1, end_pos);
      const int32_t victim = gb::kv_select_victim(*p, all, scores, end_pos);
      QVERIFY2(!rest.contains(victim) && victim >= 0 && victim < static_cast<int32_t>(all.size()),
               (gb::describe_kv_policy(*p) + " victim, trial " + std::to_string(trial)).c_str());
    }
    QVERIFY2(std::set<int32_t>(kept.begin(), kept.end()) == want,
             (gb::describe_kv_policy(*p) + " keep " + std::to_string(keep) + " trial " + std::to_string(trial)).c_str());
    ++checked;
  }
  QVERIFY(checked > 2000);
}

GB_TEST(policies_parse_resolve_and_refuse_what_cannot_fit) {
  QVERIFY(gb::kv_policy_from_name("h2o").ok());
  QVERIFY(!gb::kv_policy_from_name("lru").ok());
  KvPolicy sink{KvPolicyKind::Sink, 64};
  auto r = gb::resolve_kv_policy(sink);
  QVERIFY(r.ok());
  QCOMPARE(r->sinks, 4);
  QCOMPARE(r->recent, 60);
  QCOMPARE(gb::kv_policy_chunk_limit(*r), 60);
  QVERIFY(!gb::resolve_kv_policy(KvPolicy{KvPolicyKind::Sink, 4}).ok());  // no room after 4 sinks
  QVERIFY(!gb::resolve_kv_policy(KvPolicy{KvPolicyKind::H2O, 0}).ok());
  KvPolicy snap{KvPolicyKind::SnapKV, 16};
  snap.pool = 4;
  QVERIFY(!gb::resolve_kv_policy(snap).ok());
  const auto h2o = gb::resolve_kv_policy(KvPolicy{KvPolicyKind::H2O, 100});
  QVERIFY(h2o.ok());
  QCOMPARE(gb::describe_kv_policy(h2o.value()), std::string("h2o B=100 S=0 R=50"));
}

namespace {

// A pool whose every row records the (position, token) written there.
uint64_t tag(int32_t pos, TokenId token) { return (static_cast<uint64_t>(pos) << 32) | static_cast<uint32_t>(token) | (1ull << 63); }

struct Driver {
  gb::Scheduler sched;
  int32_t bs;
  std::vector<uint64_t> rows;  // main pool
  std::mt19937_64 rng;
  std::string failure;
  int64_t moves = 0, evicted = 0, reuses = 0;
  int32_t stop_one_in = 60;  // a sampled token stops its request with this odds (0: never)

  Driver(const gb::SchedulerConfig& c, uint64_t seed)
      : sched(c), bs(c.block_size), rows(static_cast<size_t>((c.num_blocks + c.num_lookahead_blocks) * c.block_size), 0),
        rng(seed) {}

  int32_t phys(const gb::ScheduledRequest& r, int32_t slot) const {
    return r.block_ids[static_cast<size_t>(slot / bs)] * bs + slot % bs;
  }

  // The debug hook: each running request's slots and mass before the step,
  // so the tokens the scheduler evicts can be checked against reference_kept
  // over the same attention mass.
  struct Before {
    std::vector<int32_t> positions;
    std::vector<float> mass;
    int32_t computed = 0;
  };
  std::map<uint64_t, Before> before;
  int64_t checked_evictions = 0;

  bool check_evictions(const gb::StepPlan& plan) {
    for (const gb::EvictedTokens& e : plan.evictions) {
      const gb::Request* r = sched.find(e.id);
      auto b = before.find(e.id.value);
      if (r == nullptr || b == before.end() || b->second.positions.empty()) continue;
      const gb::KvPolicy& p = r->kv_policy;
      const auto it = std::find_if(plan.requests.begin(), plan.requests.end(),
                                   [&](const gb::ScheduledRequest& q) { return q.id == e.id; });
      if (it == plan.requests.end()) continue;
      const Before& pre = b->second;
      const auto num_slots = static_cast<int32_t>(pre.positions.size());
      std::vector<int32_t> positions = pre.positions;
      std::vector<float> mass = pre.mass;
      int32_t keep = 0, end_pos = 0;
      if (gb::kv_policy_row(p.kind).evicts_while_running) {
        const int32_t n = it->num_new_tokens;
        keep = n == 1 && num_slots == p.budget ? num_slots - 1 : p.budget - n;
        end_pos = pre.computed + n;
      } else {  // snapkv: the prompt's slots alone, to the budget
        std::vector<int32_t> prompt_positions;
        std::vector<float> prompt_mass;
        for (int32_t i = 0; i < num_slots; ++i)
          if (positions[static_cast<size_t>(i)] < r->num_prompt) {
            prompt_positions.push_back(positions[static_cast<size_t>(i)]);
            if (!mass.empty()) prompt_mass.push_back(mass[static_cast<size_t>(i)]);
          }
        positions = std::move(prompt_positions);
        mass = std::move(prompt_mass);
        keep = p.budget;
        end_pos = r->num_prompt;
      }
      if (mass.empty()) mass.assign(positions.size(), 0.0f);
      const std::set<int32_t> kept = reference_kept(p, positions, mass, keep, end_pos);
      std::set<int32_t> want;
      for (int32_t i = 0; i < static_cast<int32_t>(positions.size()); ++i)
        if (!kept.contains(i)) want.insert(positions[static_cast<size_t>(i)]);
      if (want != std::set<int32_t>(e.positions.begin(), e.positions.end())) {
        failure = "request " + std::to_string(e.id.value) + " (" + gb::describe_kv_policy(p) +
                  ") evicted other positions than the reference over the same mass";
        return false;
      }
      ++checked_evictions;
    }
    return true;
  }

  bool step() {
    before.clear();
    for (uint64_t id = 1; id < 100000; ++id) {
      const gb::Request* r = sched.find(RequestId{id});
      if (r == nullptr) {
        if (id > 4000) break;
        continue;
      }
      before[id] = {r->kv_positions, r->kv_mass, r->num_tokens_computed};
    }
    gb::StepPlan plan = sched.schedule();
    if (plan.empty()) return false;
    if (!check_evictions(plan)) return false;
    const auto copy = [&](std::pair<int32_t, int32_t> c) {
      for (int32_t o = 0; o < bs; ++o) rows[static_cast<size_t>(c.second * bs + o)] = rows[static_cast<size_t>(c.first * bs + o)];
    };
    for (int32_t i = 0; i < plan.num_fork_copies; ++i) copy(plan.block_copies[static_cast<size_t>(i)]);
    for (auto [src, dst] : plan.slot_moves) rows[static_cast<size_t>(dst)] = rows[static_cast<size_t>(src)];
    for (size_t i = static_cast<size_t>(plan.num_fork_copies); i < plan.block_copies.size(); ++i) copy(plan.block_copies[i]);
    moves += static_cast<int64_t>(plan.slot_moves.size());
    evicted += plan.stats.num_evicted_tokens;
    const gb::BatchLayout layout = gb::to_batch_layout(plan);
    std::vector<gb::StepToken> sampled;
    for (size_t s = 0; s < plan.requests.size(); ++s) {
      const gb::ScheduledRequest& r = plan.requests[s];
      const gb::Request* req = sched.find(r.id);
      if (r.kv_slots.size() == 1 && r.kv_slots[0] < r.num_kv_slots - 1) ++reuses;
      if (gb::kv_policy_row(req->kv_policy.kind).evicts_while_running && r.num_kv_slots > req->kv_policy.budget) {
        failure = "request " + std::to_string(r.id.value) + " runs with " + std::to_string(r.num_kv_slots) +
                  " slots, over its budget of " + std::to_string(req->kv_policy.budget);
        return false;
      }
      const int32_t begin = layout.seq_token_indptr[s];
      for (int32_t i = 0; i < r.num_new_tokens; ++i) {
        const auto li = static_cast<size_t>(begin + i);
        const int32_t slot = layout.has_kv_slots() ? layout.kv_slots[li] : r.start_pos + i;
        rows[static_cast<size_t>(phys(r, slot))] = tag(r.start_pos + i, r.token_ids[static_cast<size_t>(i)]);
      }
      // Each query reads its visible slots: positions at or before its own,
      // and the last one reads exactly the positions the request keeps.
      for (int32_t i = 0; i < r.num_new_tokens; ++i) {
        const auto li = static_cast<size_t>(begin + i);
        const int32_t seen = layout.has_kv_slots() ? layout.kv_visible[li] : r.start_pos + i + 1;
        std::set<int32_t> read;
        for (int32_t j = 0; j < seen; ++j) {
          const uint64_t v = rows[static_cast<size_t>(phys(r, j))];
          const auto p = static_cast<int32_t>((v >> 32) & 0x7fffffff);
          if (v == 0 || p > r.start_pos + i) {
            failure = "request " + std::to_string(r.id.value) + " reads slot " + std::to_string(j) +
                      (v == 0 ? ", never written" : ", a later position");
            return false;
          }
          read.insert(p);
        }
        if (i + 1 == r.num_new_tokens && !req->kv_positions.empty() &&
            read != std::set<int32_t>(req->kv_positions.begin(), req->kv_positions.end())) {
          failure = "request " + std::to_string(r.id.value) + " reads other positions than it keeps";
          failure += " start " + std::to_string(r.start_pos) + " n " + std::to_string(r.num_new_tokens) + " slots " + std::to_string(r.num_kv_slots) + " policy " + gb::describe_kv_policy(req->kv_policy) + " read:";
          for (int32_t q : read) failure += " " + std::to_string(q);
          failure += " kept:";
          for (int32_t q : req->kv_positions) failure += " " + std::to_string(q);
          return false;
        }
      }
      if (r.mass_from >= 0) {
        std::vector<float> mass;
        for (int32_t j = 0; j < r.num_kv_slots; ++j) mass.push_back(static_cast<float>(pick(rng, 0, 100)) * 0.01f);
        sched.add_kv_mass(r.id, mass);
      }
      if (r.needs_logits())
        sampled.push_back({r.id, static_cast<TokenId>(pick(rng, 0, 999)), stop_one_in > 0 && pick(rng, 1, stop_one_in) == 1});
    }
    sched.on_step_done(plan, sampled);
    if (gb::Status st = sched.check_invariants(); !st) {
      failure = st.error().message;
      return false;
    }
    return check_contents(plan);
  }

  // Every slot of every running request holds the position it is said to.
  bool check_contents(const gb::StepPlan& plan) {
    for (const gb::ScheduledRequest& r : plan.requests) {
      const gb::Request* req = sched.find(r.id);
      if (req == nullptr || req->state != gb::RequestState::Running) continue;
      const gb::BlockTable& t = sched.kv_cache().table(r.id);
      for (int32_t slot = 0; slot < t.num_tokens; ++slot) {
        const int32_t pos = req->kv_positions.empty() ? slot : req->kv_positions[static_cast<size_t>(slot)];
        const int32_t at = t.blocks[static_cast<size_t>(slot / bs)].value * bs + slot % bs;
        if (rows[static_cast<size_t>(at)] != tag(pos, req->token_at(pos))) {
          failure = "request " + std::to_string(r.id.value) + " slot " + std::to_string(slot) + " does not hold position " +
                    std::to_string(pos);
          return false;
        }
      }
    }
    return true;
  }
};

gb::RequestSpec spec_for(uint64_t id, std::vector<TokenId> prompt, int32_t max_tokens, const KvPolicy& p) {
  gb::RequestSpec s;
  s.id = RequestId{id};
  s.prompt_ids = std::move(prompt);
  s.max_tokens = max_tokens;
  s.isolation = {"fake", "v1", "", "", "", ""};
  s.kv_policy = p;
  s.retain_kv = id % 3 == 0;
  return s;
}

std::vector<TokenId> tokens(std::mt19937_64& rng, int32_t n) {
  std::vector<TokenId> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(static_cast<TokenId>(pick(rng, 0, 999)));
  return v;
}

}  // namespace

GB_TEST(random_workloads_keep_the_policies_promises_in_the_paged_pool) {
  int64_t total_moves = 0, total_evicted = 0, total_reuses = 0, total_forks = 0, total_checked = 0;
  for (int32_t trial = 0; trial < 60; ++trial) {
    std::mt19937_64 rng(1000 + static_cast<uint64_t>(trial));
    gb::SchedulerConfig c;
    c.block_size = std::array{2, 4, 8}[static_cast<size_t>(trial % 3)];
    c.num_blocks = pick(rng, 24, 80) * 8 / c.block_size;
    c.max_batch_tokens = pick(rng, 8, 64);
    c.max_seqs = pick(rng, 2, 6);
    c.max_context = 400;
    c.max_positions = 600;
    c.max_prefill_chunk = pick(rng, 0, 1) ? 0 : pick(rng, 4, 32);
    if (trial % 4 == 3) c.window_group = {c.num_blocks, pick(rng, 4, 16)};
    Driver d(c, 99 + static_cast<uint64_t>(trial));
    uint64_t next_id = 1;
    std::vector<RequestId> ids;
    for (int32_t round = 0; round < 300 && d.failure.empty(); ++round) {
      if (pick(rng, 0, 3) == 0 && d.sched.num_waiting() < 4) {
        const auto kind = static_cast<KvPolicyKind>(pick(rng, 0, 3));
        const KvPolicy p = kind == KvPolicyKind::Full ? KvPolicy{} : random_policy(rng, kind, pick(rng, 8, 48));
        const gb::Status st = d.sched.submit(spec_for(next_id, tokens(rng, pick(rng, 1, 90)), pick(rng, 1, 80), p));
        if (st) ids.push_back(RequestId{next_id});
        ++next_id;
      }
      if (pick(rng, 0, 6) == 0 && !ids.empty()) {
        // A fork of a running or retained request, at its end or before.
        const RequestId parent = ids[static_cast<size_t>(pick(rng, 0, static_cast<int32_t>(ids.size()) - 1))];
        const int32_t held = d.sched.num_tokens_held(parent);
        const gb::Request* pr = d.sched.find(parent);
        if (held > 1 && pr != nullptr) {
          const int32_t at = pick(rng, 0, 1) ? held : pick(rng, 1, held);
          std::vector<TokenId> prompt(pr->tokens.begin(), pr->tokens.begin() + at);
          prompt.push_back(7);
          const auto kind = static_cast<KvPolicyKind>(pick(rng, 0, 2));
          const KvPolicy p = kind == KvPolicyKind::Full ? KvPolicy{} : random_policy(rng, kind, pick(rng, 8, 48));
          if (d.sched.fork(parent, spec_for(next_id, prompt, pick(rng, 2, 30), p), at).ok()) {
            ids.push_back(RequestId{next_id});
            ++total_forks;
          }
          ++next_id;
        }
      }
      if (pick(rng, 0, 40) == 0 && !ids.empty())
        d.sched.cancel(ids[static_cast<size_t>(pick(rng, 0, static_cast<int32_t>(ids.size()) - 1))]);
      if (!d.step() && !d.failure.empty()) break;
    }
    while (d.failure.empty() && d.step()) {}
    QVERIFY2(d.failure.empty(), ("trial " + std::to_string(trial) + ": " + d.failure).c_str());
    for (RequestId id : d.sched.retained_requests()) d.sched.release(id);
    QCOMPARE(d.sched.kv_cache().num_owned(), 0);
    total_moves += d.moves;
    total_evicted += d.evicted;
    total_reuses += d.reuses;
    total_checked += d.checked_evictions;
  }
  QVERIFY2(total_checked > 1000, std::to_string(total_checked).c_str());
  // The workload reached what it is for.
  QVERIFY2(total_evicted > 1000, std::to_string(total_evicted).c_str());
  QVERIFY2(total_moves > 100, std::to_string(total_moves).c_str());
  QVERIFY2(total_reuses > 300, std::to_string(total_reuses).c_str());
  QVERIFY2(total_forks > 20, std::to_string(total_forks).c_str());
}

GB_TEST(sink_decoding_at_the_budget_moves_nothing_and_keeps_sinks_and_recent) {
  gb::SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = 16;
  c.max_context = 64;
  c.max_positions = 200;
  Driver d(c, 5);
  d.stop_one_in = 0;
  KvPolicy p{KvPolicyKind::Sink, 12};
  p.sinks = 2;
  std::mt19937_64 rng(3);
  QVERIFY(d.sched.submit(spec_for(1, tokens(rng, 5), 150, p)).ok());
  int32_t steps = 0;
  for (;;) {
    const gb::Request* r = d.sched.find(RequestId{1});
    if (r == nullptr) break;
    QVERIFY(d.step() || !d.failure.empty());
    QVERIFY2(d.failure.empty(), d.failure.c_str());
    r = d.sched.find(RequestId{1});
    if (r == nullptr) break;
    const int32_t c_now = r->num_tokens_computed;
    std::set<int32_t> want{0, 1};
    for (int32_t q = std::max(2, c_now - 10); q < c_now; ++q) want.insert(q);
    QVERIFY(std::set<int32_t>(r->kv_positions.begin(), r->kv_positions.end()) == want);
    QVERIFY(d.sched.kv_cache().table(RequestId{1}).num_blocks() <= 3);
    ++steps;
  }
  QVERIFY(steps > 100);        // past the 64-token context
  QCOMPARE(d.moves, int64_t{0});  // decode at the budget overwrites; nothing moves
  QVERIFY(d.reuses > 100);
}

}  // namespace kv_eviction_test
