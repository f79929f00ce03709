// Scheduler tests, driven through a FakePagedModel (fake_paged_model.h) whose
// sampled tokens depend on the K/V it reads back through the block tables. Every
// finished request's output is compared with reference_output(): the same fake
// model run on the plain token list, alone, uncached, uninterrupted. So these
// tests also pin preempt-and-resume = uninterrupted, batched = alone and
// prefix-cache hit = cold for the bookkeeping (the real-model versions come with
// the engine loop).
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fake_paged_model.h"
#include "gb_test.h"
#include "kv/scheduler.h"
#include "runtime/step_layout.h"

namespace {

using gb::RequestId;
using gb::TokenId;

bool is_stop(TokenId t) { return t % 50 == 7; }  // ~2% of tokens end a request

std::vector<TokenId> reference_output(std::vector<TokenId> seq, int32_t max_tokens, int32_t max_total) {
  std::vector<TokenId> out;
  for (;;) {
    const TokenId t = gbtest::reference_next_token(seq);
    out.push_back(t);
    seq.push_back(t);
    if (is_stop(t) || static_cast<int32_t>(out.size()) >= max_tokens || static_cast<int32_t>(seq.size()) >= max_total)
      return out;
  }
}

std::vector<TokenId> random_prompt(std::mt19937_64& rng, int32_t n) {
  std::vector<TokenId> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(std::uniform_int_distribution<TokenId>(0, 999)(rng));
  return v;
}

// Runs engine steps the way runtime/ will, checking every step.
class Driver {
 public:
  explicit Driver(const gb::SchedulerConfig& c) : sched(c), model(c.num_blocks, c.block_size), config(c) {}

  gb::Status submit(gb::RequestSpec spec) {
    specs[spec.id] = spec;
    return sched.submit(std::move(spec));
  }

  // One step; false when there was nothing to run. Failures go to `failure`.
  bool step() {
    gb::StepPlan plan = sched.schedule();
    plans.push_back(plan);
    if (plan.empty()) return false;
    if (plan.num_tokens() > config.max_batch_tokens) fail("token budget exceeded");
    if (static_cast<int32_t>(plan.requests.size()) > config.max_seqs) fail("sequence limit exceeded");
    bool seen_prefill = false;
    for (const gb::ScheduledRequest& r : plan.requests) {
      if (r.is_decode && seen_prefill) fail("a decode was scheduled after a prefill chunk");
      seen_prefill = seen_prefill || !r.is_decode;
      if (r.num_new_tokens <= 0) fail("empty scheduled request");
    }
    const gb::BatchLayout layout = gb::to_batch_layout(plan);
    if (layout.num_logits() != plan.num_logits()) fail("layout logit rows differ from the plan");
    model.copy_blocks(plan.block_copies);
    const std::vector<TokenId> tokens = model.forward(layout);
    if (!model.error().empty()) fail(model.error());
    std::vector<gb::StepToken> sampled;
    size_t row = 0;
    for (const gb::ScheduledRequest& r : plan.requests)
      if (r.needs_logits()) sampled.push_back({r.id, tokens[row], is_stop(tokens[row])}), ++row;
    for (gb::FinishedRequest& f : sched.on_step_done(plan, sampled)) {
      finish_step[f.id] = num_steps;
      finished[f.id] = std::move(f);
    }
    if (gb::Status s = sched.check_invariants(); !s.ok()) fail(s.error().message);
    ++num_steps;
    return true;
  }

  void run(int64_t max_steps) {
    while (failure.empty() && sched.has_work() && num_steps < max_steps) step();
    if (sched.has_work()) fail("work left after " + std::to_string(max_steps) + " steps");
  }

  // Every finished output equals the uninterrupted reference.
  void check_outputs() {
    for (const auto& [id, f] : finished) {
      const gb::RequestSpec& s = specs.at(id);
      const auto want = reference_output(s.prompt_ids, s.max_tokens, sched.max_tokens_per_request());
      if (!std::ranges::equal(f.output_ids(), want)) fail("request " + std::to_string(id.value) + " output differs from the reference");
    }
  }

  void fail(const std::string& what) {
    if (failure.empty()) failure = "step " + std::to_string(num_steps) + ": " + what;
  }

  gb::Scheduler sched;
  gbtest::FakePagedModel model;
  gb::SchedulerConfig config;
  std::map<RequestId, gb::RequestSpec> specs;
  std::map<RequestId, gb::FinishedRequest> finished;
  std::map<RequestId, int64_t> finish_step;
  std::vector<gb::StepPlan> plans;
  int64_t num_steps = 0;
  std::string failure;
};

gb::RequestSpec spec(uint64_t id, std::vector<TokenId> prompt, int32_t max_tokens,
                     gb::Priority priority = gb::Priority::Interactive) {
  gb::RequestSpec s;
  s.id = RequestId{id};
  s.prompt_ids = std::move(prompt);
  s.max_tokens = max_tokens;
  s.priority = priority;
  s.isolation = {"fake", "v1", "", ""};
  return s;
}

}  // namespace

GB_TEST(randomized_workloads_respect_budget_and_finish_with_reference_tokens) {
  std::mt19937_64 rng(2024);
  int32_t total_preemptions = 0, total_hits = 0;
  for (int trial = 0; trial < 150; ++trial) {
    gb::SchedulerConfig c;
    c.block_size = std::uniform_int_distribution<int>(0, 1)(rng) ? 4 : 16;
    c.num_blocks = std::uniform_int_distribution<int32_t>(8, 40)(rng);
    c.max_batch_tokens = std::uniform_int_distribution<int32_t>(4, 96)(rng);
    c.max_seqs = std::uniform_int_distribution<int32_t>(1, 8)(rng);
    c.max_context = std::uniform_int_distribution<int32_t>(40, 300)(rng);
    c.max_prefill_chunk = std::uniform_int_distribution<int>(0, 1)(rng) ? 0 : std::uniform_int_distribution<int32_t>(1, 20)(rng);
    c.admission_watermark = std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0f : 0.1f;
    Driver d(c);
    const std::vector<TokenId> shared = random_prompt(rng, 40);  // common system prompt
    std::set<RequestId> admitted, cancelled;
    uint64_t next_id = 1;
    for (int64_t step = 0; step < 4000 && d.failure.empty(); ++step) {
      if (step < 60 && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
        const int32_t len = std::uniform_int_distribution<int32_t>(1, 120)(rng);
        std::vector<TokenId> prompt = std::uniform_int_distribution<int>(0, 1)(rng)
                                          ? std::vector<TokenId>(shared.begin(), shared.begin() + std::min<int32_t>(len, 40))
                                          : std::vector<TokenId>{};
        for (TokenId t : random_prompt(rng, len)) prompt.push_back(t);
        auto s = spec(next_id++, std::move(prompt), std::uniform_int_distribution<int32_t>(1, 40)(rng),
                      std::uniform_int_distribution<int>(0, 1)(rng) ? gb::Priority::Interactive : gb::Priority::Batch);
        const RequestId id = s.id;
        if (d.submit(std::move(s)).ok()) admitted.insert(id);
      }
      if (!admitted.empty() && std::uniform_int_distribution<int>(0, 40)(rng) == 0) {
        const RequestId victim{std::uniform_int_distribution<uint64_t>(1, next_id - 1)(rng)};
        if (d.sched.cancel(victim)) cancelled.insert(victim);
      }
      if (!d.step() && step >= 60) break;
    }
    d.run(8000);
    d.check_outputs();
    QVERIFY2(d.failure.empty(), ("trial " + std::to_string(trial) + ": " + d.failure).c_str());
    for (RequestId id : admitted)
      QVERIFY2(d.finished.contains(id) != cancelled.contains(id), "an admitted request neither finished nor was cancelled");
    QCOMPARE(d.sched.kv_cache().num_owned(), 0);
    for (const gb::StepPlan& p : d.plans) {
      total_preemptions += p.stats.num_preemptions;
      total_hits += p.stats.num_prefix_hit_tokens;
    }
  }
  // The workloads must actually exercise the hard paths.
  QVERIFY2(total_preemptions > 20, std::to_string(total_preemptions).c_str());
  QVERIFY2(total_hits > 100, std::to_string(total_hits).c_str());
}

GB_TEST(a_pool_of_8_blocks_completes_ten_times_its_size_with_preemption) {
  gb::SchedulerConfig c;
  c.num_blocks = 8;
  c.block_size = 16;  // 128 token slots
  c.max_batch_tokens = 64;
  c.max_seqs = 8;
  c.max_context = 128;
  c.admission_watermark = 0.0f;
  Driver d(c);
  std::mt19937_64 rng(7);
  int32_t total_blocks_needed = 0;
  for (uint64_t id = 1; id <= 20; ++id) {
    const int32_t len = std::uniform_int_distribution<int32_t>(30, 60)(rng);
    total_blocks_needed += (len + 40 + 15) / 16;
    QVERIFY(d.submit(spec(id, random_prompt(rng, len), 40)).ok());
  }
  QVERIFY(total_blocks_needed >= 80);  // 10x the pool
  d.run(5000);
  d.check_outputs();
  QVERIFY2(d.failure.empty(), d.failure.c_str());
  QCOMPARE(d.finished.size(), size_t{20});
  int32_t preemptions = 0;
  for (const gb::StepPlan& p : d.plans) preemptions += p.stats.num_preemptions;
  QVERIFY2(preemptions > 0, "the pool never ran out: the test proves nothing about resume");
  QCOMPARE(d.sched.kv_cache().num_owned(), 0);
}

GB_TEST(impossible_prompts_are_rejected_at_once_and_alone) {
  gb::SchedulerConfig c;
  c.num_blocks = 4;
  c.block_size = 16;  // 64 slots
  c.max_context = 100;
  gb::Scheduler s(c);
  gb::Status too_long = s.submit(spec(1, std::vector<TokenId>(100, 3), 5));
  QVERIFY(!too_long.ok());
  QVERIFY2(too_long.error().message.find("request 1") != std::string::npos, too_long.error().message.c_str());
  QVERIFY(too_long.error().message.find("context") != std::string::npos);
  gb::Status too_big = s.submit(spec(2, std::vector<TokenId>(64, 3), 5));
  QVERIFY(!too_big.ok());
  QVERIFY2(too_big.error().message.find("KV blocks") != std::string::npos, too_big.error().message.c_str());
  QVERIFY(!s.submit(spec(3, {}, 5)).ok());
  QVERIFY(!s.submit(spec(4, {1, 2}, 0)).ok());
  // The largest prompt that fits, and a normal one, still run.
  QVERIFY(s.submit(spec(5, std::vector<TokenId>(63, 3), 5)).ok());
  QVERIFY(s.submit(spec(6, {1, 2, 3}, 5)).ok());
  QCOMPARE(s.num_waiting(), 2);
  QVERIFY(s.find(RequestId{1}) == nullptr);
}

GB_TEST(interactive_requests_run_before_batch_ones) {
  gb::SchedulerConfig c;
  c.num_blocks = 16;
  c.block_size = 4;
  c.max_seqs = 1;
  Driver d(c);
  QVERIFY(d.submit(spec(1, {1, 2, 3}, 3, gb::Priority::Batch)).ok());
  QVERIFY(d.submit(spec(2, {4, 5, 6}, 3, gb::Priority::Batch)).ok());
  QVERIFY(d.submit(spec(3, {7, 8, 9}, 3, gb::Priority::Interactive)).ok());
  d.run(100);
  QVERIFY2(d.failure.empty(), d.failure.c_str());
  std::vector<uint64_t> first_seen;
  for (const gb::StepPlan& p : d.plans)
    for (const gb::ScheduledRequest& r : p.requests)
      if (std::find(first_seen.begin(), first_seen.end(), r.id.value) == first_seen.end()) first_seen.push_back(r.id.value);
  QCOMPARE(first_seen, (std::vector<uint64_t>{3, 1, 2}));
}

GB_TEST(out_of_blocks_preempts_the_lowest_priority_latest_arrival) {
  // Block size 4, 6 blocks, no watermark. A (interactive) and B (batch) have
  // 7-token prompts (2 blocks each), C (batch, latest) a 3-token prompt (1 block).
  gb::SchedulerConfig c;
  c.num_blocks = 6;
  c.block_size = 4;
  c.admission_watermark = 0.0f;
  Driver d(c);
  QVERIFY(d.submit(spec(1, {1, 2, 3, 4, 5, 6, 7}, 8, gb::Priority::Interactive)).ok());
  QVERIFY(d.submit(spec(2, {11, 12, 13, 14, 15, 16, 17}, 8, gb::Priority::Batch)).ok());
  QVERIFY(d.submit(spec(3, {21, 22, 23}, 8, gb::Priority::Batch)).ok());
  // Step 0: all three prefill (5 blocks). Step 1: each decodes into its last
  // slot. Step 2: A takes the last free block; B needs one: C is evicted.
  for (int i = 0; i < 3; ++i) QVERIFY(d.step());
  QVERIFY2(d.failure.empty(), d.failure.c_str());
  QVERIFY(d.plans[0].preempted.empty() && d.plans[1].preempted.empty());
  QCOMPARE(d.plans[2].preempted, (std::vector<RequestId>{RequestId{3}}));
  QCOMPARE(d.plans[2].requests.size(), size_t{2});
  QVERIFY(d.sched.find(RequestId{3})->state == gb::RequestState::Preempted);
  QCOMPARE(d.sched.find(RequestId{3})->num_preemptions, 1);
  d.run(200);
  d.check_outputs();
  QVERIFY2(d.failure.empty(), d.failure.c_str());
  QCOMPARE(d.finished.size(), size_t{3});
}

GB_TEST(cancellation_returns_every_block) {
  gb::SchedulerConfig c;
  c.num_blocks = 12;
  c.block_size = 4;
  Driver d(c);
  QVERIFY(d.submit(spec(1, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 30)).ok());
  QVERIFY(d.submit(spec(2, {9, 8, 7, 6, 5}, 30)).ok());
  QVERIFY(d.submit(spec(3, std::vector<TokenId>(30, 4), 30)).ok());
  for (int i = 0; i < 3; ++i) QVERIFY(d.step());
  QVERIFY(d.sched.kv_cache().num_owned() > 0);
  QVERIFY(d.sched.cancel(RequestId{2}));   // running, mid-decode
  QVERIFY(!d.sched.cancel(RequestId{2}));  // already gone
  QVERIFY(d.sched.check_invariants().ok());
  QVERIFY(d.sched.cancel(RequestId{1}));
  QVERIFY(d.sched.cancel(RequestId{3}));
  QCOMPARE(d.sched.kv_cache().num_owned(), 0);
  QCOMPARE(d.sched.kv_cache().num_free() + d.sched.kv_cache().num_cached(), 12);
  QVERIFY(!d.sched.has_work());
  QVERIFY(d.sched.check_invariants().ok());
}

GB_TEST(long_prompts_are_chunked_and_decodes_go_first) {
  gb::SchedulerConfig c;
  c.num_blocks = 64;
  c.block_size = 16;
  c.max_batch_tokens = 32;
  Driver d(c);
  QVERIFY(d.submit(spec(1, std::vector<TokenId>(100, 5), 4)).ok());
  std::vector<int32_t> chunks;
  std::vector<bool> logits;
  for (int i = 0; i < 4; ++i) {
    QVERIFY(d.step());
    chunks.push_back(d.plans.back().requests[0].num_new_tokens);
    logits.push_back(d.plans.back().requests[0].needs_logits());
  }
  QCOMPARE(chunks, (std::vector<int32_t>{32, 32, 32, 4}));
  QCOMPARE(logits, (std::vector<bool>{false, false, false, true}));
  QCOMPARE(d.plans.back().stats.num_prefill_tokens, 4);
  // Request 1 now decodes; a new long prompt fills what the decode leaves.
  QVERIFY(d.submit(spec(2, std::vector<TokenId>(50, 6), 2)).ok());
  QVERIFY(d.step());
  const gb::StepPlan& p = d.plans.back();
  QCOMPARE(p.requests.size(), size_t{2});
  QVERIFY(p.requests[0].id == RequestId{1} && p.requests[0].is_decode && p.requests[0].num_new_tokens == 1);
  QVERIFY(p.requests[1].id == RequestId{2} && p.requests[1].num_new_tokens == 31);
  QCOMPARE(p.stats.num_decode_tokens, 1);
  QCOMPARE(p.stats.num_prefill_tokens, 31);
  d.run(100);
  d.check_outputs();
  QVERIFY2(d.failure.empty(), d.failure.c_str());

  // With max_prefill_chunk, chunks are capped below the budget.
  c.max_prefill_chunk = 10;
  Driver e(c);
  QVERIFY(e.submit(spec(1, std::vector<TokenId>(25, 5), 1)).ok());
  e.run(10);
  QVERIFY2(e.failure.empty(), e.failure.c_str());
  std::vector<int32_t> capped;
  for (const gb::StepPlan& plan : e.plans)
    if (!plan.empty()) capped.push_back(plan.requests[0].num_new_tokens);
  QCOMPARE(capped, (std::vector<int32_t>{10, 10, 5}));
}

GB_TEST(a_repeated_prompt_hits_the_prefix_cache_and_gives_the_same_tokens) {
  gb::SchedulerConfig c;
  c.num_blocks = 32;
  c.block_size = 4;
  Driver d(c);
  std::mt19937_64 rng(3);
  const auto prompt = random_prompt(rng, 18);
  QVERIFY(d.submit(spec(1, prompt, 6)).ok());
  d.run(100);
  QVERIFY(d.submit(spec(2, prompt, 6)).ok());
  QVERIFY(d.step());
  QCOMPARE(d.plans.back().stats.num_prefix_hit_tokens, 16);  // 4 full blocks; 2 tokens computed
  QCOMPARE(d.plans.back().requests[0].start_pos, 16);
  QCOMPARE(d.plans.back().requests[0].num_new_tokens, 2);
  d.run(100);
  d.check_outputs();
  QVERIFY2(d.failure.empty(), d.failure.c_str());
  const auto output = [&](uint64_t id) {
    const std::span<const TokenId> out = d.finished.at(RequestId{id}).output_ids();
    return std::vector<TokenId>(out.begin(), out.end());
  };
  QCOMPARE(output(1), output(2));
}

GB_TEST(no_request_starves_under_a_bounded_load) {
  // A steady stream of short requests (one per 2 steps, well under capacity) and
  // one long request in the middle: everything finishes within a bounded delay.
  gb::SchedulerConfig c;
  c.num_blocks = 24;
  c.block_size = 4;
  c.max_batch_tokens = 16;
  c.max_seqs = 4;
  Driver d(c);
  std::mt19937_64 rng(11);
  std::map<RequestId, int64_t> submitted_at;
  uint64_t id = 1;
  for (int64_t step = 0; step < 400; ++step) {
    if (step % 2 == 0) {
      const bool big = step == 100;
      auto s = spec(id, random_prompt(rng, big ? 60 : 6), big ? 20 : 4);
      submitted_at[s.id] = d.num_steps;
      QVERIFY(d.submit(std::move(s)).ok());
      ++id;
    }
    d.step();
  }
  d.run(1000);
  d.check_outputs();
  QVERIFY2(d.failure.empty(), d.failure.c_str());
  QCOMPARE(d.finished.size(), submitted_at.size());
  int64_t worst = 0;
  for (const auto& [rid, at] : submitted_at) worst = std::max(worst, d.finish_step.at(rid) - at);
  QVERIFY2(worst < 60, std::to_string(worst).c_str());
}

GB_TEST(a_failed_step_gives_its_slots_back) {
  gb::SchedulerConfig c;
  c.num_blocks = 8;
  c.block_size = 4;
  gb::Scheduler s(c);
  QVERIFY(s.submit(spec(1, {1, 2, 3, 4, 5, 6}, 3)).ok());
  gb::StepPlan plan = s.schedule();
  QCOMPARE(plan.num_tokens(), 6);
  s.on_step_failed(plan);
  QVERIFY(s.check_invariants().ok());
  gb::StepPlan again = s.schedule();
  QCOMPARE(again.requests.size(), size_t{1});
  QCOMPARE(again.requests[0].start_pos, 0);
  QCOMPARE(again.requests[0].num_new_tokens, 6);
}

GB_TEST(batch_layout_matches_the_plan) {
  gb::SchedulerConfig c;
  c.num_blocks = 8;
  c.block_size = 4;
  c.max_batch_tokens = 8;
  gb::Scheduler s(c);
  QVERIFY(s.submit(spec(1, {10, 11, 12}, 3)).ok());
  QVERIFY(s.submit(spec(2, {20, 21, 22, 23, 24, 25, 26}, 3)).ok());
  const gb::StepPlan plan = s.schedule();  // 3 tokens of 1 (logits), first 5 of 2 (none)
  const gb::BatchLayout b = gb::to_batch_layout(plan);
  QCOMPARE(b.token_ids, (std::vector<TokenId>{10, 11, 12, 20, 21, 22, 23, 24}));
  QCOMPARE(b.positions, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3, 4}));
  QCOMPARE(b.seq_token_indptr, (std::vector<int32_t>{0, 3, 8}));
  QCOMPARE(b.seq_kv_len, (std::vector<int32_t>{3, 5}));
  QCOMPARE(b.block_indptr, (std::vector<int32_t>{0, 1, 3}));
  QCOMPARE(b.block_ids, (std::vector<int32_t>{0, 1, 2}));
  QCOMPARE(b.logit_token_indices, (std::vector<int32_t>{2}));
  QCOMPARE(b.block_size, 4);
}

// The rows that get logits are decided once, by the scheduler: a plain decode
// has one, a verification [last, drafts...] one per position, a prefill chunk
// with prompt left none, a last prefill chunk one (its last token); the layout
// asks the backend for exactly those rows, in plan order.
GB_TEST(logit_rows_of_a_decode_a_verification_and_prefill_chunks) {
  gb::SchedulerConfig c;
  c.num_blocks = 16;
  c.block_size = 4;
  c.max_batch_tokens = 10;
  c.max_prefill_chunk = 3;
  gb::Scheduler s(c);
  QVERIFY(s.submit(spec(1, {10, 11, 12}, 8)).ok());  // A: will decode plainly
  QVERIFY(s.submit(spec(2, {20, 21}, 8)).ok());      // B: will verify a draft
  gb::StepPlan first = s.schedule();
  QCOMPARE(first.requests.size(), size_t{2});
  const std::vector<gb::StepToken> first_tokens{{RequestId{1}, 13, false}, {RequestId{2}, 22, false}};
  QVERIFY(s.on_step_done(first, first_tokens).empty());

  s.set_draft(RequestId{2}, {23, 24, 25});
  QVERIFY(s.submit(spec(3, std::vector<TokenId>(10, 30), 4)).ok());  // C: first chunk of 3
  QVERIFY(s.submit(spec(4, {40, 41}, 4)).ok());                       // D: whole prompt
  const gb::StepPlan plan = s.schedule();
  std::vector<int32_t> ids, rows, sizes;
  for (const gb::ScheduledRequest& r : plan.requests) {
    ids.push_back(static_cast<int32_t>(r.id.value));
    rows.push_back(r.num_logit_rows);
    sizes.push_back(r.num_new_tokens);
  }
  QCOMPARE(ids, (std::vector<int32_t>{1, 2, 3, 4}));
  QCOMPARE(sizes, (std::vector<int32_t>{1, 4, 3, 2}));
  QCOMPARE(rows, (std::vector<int32_t>{1, 4, 0, 1}));
  QCOMPARE(plan.num_logits(), 6);
  const gb::BatchLayout b = gb::to_batch_layout(plan);
  QCOMPARE(b.token_ids, (std::vector<TokenId>{13, 22, 23, 24, 25, 30, 30, 30, 40, 41}));
  QCOMPARE(b.logit_token_indices, (std::vector<int32_t>{0, 1, 2, 3, 4, 9}));

  // B keeps one of its three drafts: 22, 23 computed, then the new token.
  const std::vector<gb::StepToken> tokens{
      {RequestId{1}, 14, false}, {RequestId{2}, 50, false, 1}, {RequestId{4}, 42, false}};
  QVERIFY(s.on_step_done(plan, tokens).empty());
  QVERIFY(s.check_invariants().ok());
  QCOMPARE(s.find(RequestId{2})->num_tokens_computed, 4);  // 20, 21, 22, 23
  QCOMPARE(s.find(RequestId{2})->num_tokens_output(), 3);  // 22, 23, 50
}
