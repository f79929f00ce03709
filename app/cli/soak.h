// The soak behind `glassbox-cli soak`: a long random mixed workload through one
// Engine on a pool small enough to force preemption, with every invariant
// checked after every step and every request replayed alone afterwards.
//
// The workload (all random from --seed): prompt lengths, max tokens, sampler
// settings touching every stage (greedy and sampled), priorities, stop strings,
// reasoning budgets, retained answers, regenerations (branch_from), forks with
// and without a forced token (copy-on-write or re-prefill), cancels at random
// moments and n-gram speculative requests.
//
// Checks:
//   - after every step: the scheduler's and block pool's invariants; free +
//     cached + owned = the pool; the owned blocks are exactly those the live
//     and retained requests' tables hold; at most max_retained kept; no step
//     that runs nothing while work is left (a stall) twice in a row;
//   - every request, once finished: its tokens equal a replay of it alone on a
//     second engine (a fork: its root replayed alone, then the same fork), a
//     cancelled one's a prefix of that replay;
//   - at the end: nothing left to run, and once the retained requests are
//     released nothing owned (every block free or cached); resident memory
//     has not grown by more than rss_growth_mib since the warm-up.
//
// Single-threaded (the caller's thread owns both engines).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_pool_sizing.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace gb::cli {

struct SoakOptions {
  int64_t num_requests = 200;
  uint64_t seed = 1;
  int32_t num_blocks = 0;       // 0: a pool of 1.5 full contexts (forces preemption)
  int32_t max_live = 8;         // requests queued or running at once
  int32_t max_retained = 4;
  KvTypes kv_types;             // the session's (--kv-type-k/-v)
  int64_t rss_growth_mib = 64;  // allowed growth of resident memory after the warm-up
  // Tests of the soak itself: alter one finished request's tokens before its
  // replay comparison, so the run must report a mismatch and fail.
  bool inject_mismatch = false;
  // Share of new roots that evict their KV cache (a random policy and budget,
  // kv/kv_policy.h; never speculative, never forked or regenerated from: a
  // fork of a pruned cache depends on when it is taken, so no replay could
  // match it). Their replays alone must still match token for token.
  double kv_policy_share = 0.0;
};

struct SoakSummary {
  int64_t requests = 0;   // submitted (roots, regenerations and forks)
  int64_t forks = 0;
  int64_t regenerations = 0;
  int64_t speculative = 0;
  int64_t evicting = 0;   // roots with a KV eviction policy
  int64_t cancels = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t tokens = 0;     // emitted by the soaked engine
  int64_t invariant_checks = 0;
  int64_t replays = 0;
  int64_t replay_mismatches = 0;
  int32_t blocks_owned_at_end = 0;
  int64_t rss_warm_kib = 0, rss_end_kib = 0, peak_rss_kib = 0;
  double seconds = 0.0;
  std::vector<std::string> failures;  // every failed check, in order (first ones kept)
  int64_t num_failures = 0;

  bool ok() const { return num_failures == 0; }
  std::string line() const;  // the one-line summary
};

// Runs the soak. Each engine gets its own backend from make_backend().
SoakSummary run_soak(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
                     const std::function<std::unique_ptr<Backend>()>& make_backend, const SoakOptions& options);

}  // namespace gb::cli
