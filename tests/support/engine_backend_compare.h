// Engine-level backend comparison: one scenario (a model, an EngineConfig and a
// driver that submits, steps and forks) runs through a gb::Engine on two
// backends, and what the engines emitted is compared request by request. The
// backends come from factories, so the same harness holds the CPU backend at
// one thread against two threads (tests/engine/runtime) and the CPU backend
// against the CUDA backend (tests/kernels/cuda); the scenarios themselves are
// in engine_backend_scenarios.h.
//
// The comparison (compare_runs), with `tolerance` the caller's bound on one
// logit's difference between the backends:
//   - each request's prompt (forks: the shared tokens) and greedy tokens are
//     equal, and so are the finish reason and the number of tokens;
//   - where a token differs, the reference's top-1/top-2 logit gap there must
//     be at most 2 x `tolerance`, as each of the two logits may move by it (a
//     genuine near-tie: noted, and the rest of that
//     request is not compared); otherwise it fails naming the request, the
//     position, both tokens and the gap;
//   - the per-token records (TokenRecord): the same number of candidates, the
//     logits of ids in both top-N lists within `tolerance`, an id in only one
//     list no more than `tolerance` above the other list's last logit (a swap
//     across the top-N boundary), the chosen logit within `tolerance`, the
//     chosen log-probability and each candidate's raw probability within
//     2 x tolerance (log p = z - log Z moves by both), the entropy within
//     tolerance x log(candidates) (it moves by the logit error times the mean
//     absolute deviation of the surprisal, which stays below log V).
//   A tolerance of 0 asks for bit-identical results.
// Every scenario also states what it must have exercised (preemptions, window
// releases, shared blocks, accepted drafts...), checked on both runs: a
// scenario that did not happen proves nothing.
//
// Threads: test code, one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "sampling/token_record.h"
#include "tokenizer/tokenizer.h"
#include "trace/trace_event.h"

namespace gbtest {

// Makes the backend one engine runs on (a fresh one per engine).
using BackendFactory = std::function<gb::Result<std::unique_ptr<gb::Backend>>(std::shared_ptr<const gb::Model>)>;

struct NamedBackend {
  std::string name;  // for messages: "cpu, 1 thread", "cuda"
  BackendFactory make;
};

// The two sides of a comparison and the bound on one logit's difference.
struct BackendPair {
  NamedBackend reference;
  NamedBackend candidate;
  float logit_tolerance = 0.0f;
};

// What one request produced, from the engine's events.
struct RequestOutput {
  std::vector<gb::TokenId> prompt;        // RequestSubmittedEvent (a fork: the shared tokens)
  std::optional<uint64_t> parent;         // a fork's or branch's parent
  std::vector<gb::TokenId> tokens;        // (num_generated)
  std::vector<gb::TokenRecord> records;   // (num_generated); top empty where nothing was recorded (forced)
  std::vector<gb::TokenOrigin> origins;   // (num_generated)
  std::string finish_reason;
  int32_t num_verifications = 0;          // its SpeculativeEvents
  int64_t num_accepted = 0;               // drafted tokens they accepted
};

// What the engine did, counted from its events (evidence a scenario ran as meant).
struct EngineCounts {
  int32_t steps = 0;
  int32_t max_seqs_in_step = 0;         // StepEvent::num_seqs, the largest batch
  int32_t mixed_steps = 0;              // steps with prefill and decode tokens together
  int32_t max_chunks_per_request = 0;   // PrefillChunkEvents of the most chunked request
  int32_t prefix_hit_tokens = 0;        // RequestAdmittedEvent::num_cached_tokens, summed
  int32_t preemptions = 0;              // RequestPreemptedEvents
  int32_t forks = 0;                    // submitted events naming a parent
  int32_t shared_blocks = 0;            // KvEventKind::Shared (fork: a parent's full block)
  int32_t copied_blocks = 0;            // KvEventKind::Copied (copy-on-write)
  int32_t window_released = 0;          // KvEventKind::WindowReleased of real blocks (main pool)
  int64_t window_group_released = 0;    // the window group pool's releases (Gemma-style models)
  int32_t verifications = 0;            // SpeculativeEvents
  int64_t drafted = 0, accepted = 0;    // their drafted and accepted tokens
  int64_t tokens = 0;                   // TokenSampledEvents
  int64_t records = 0;                  // of those, with candidates recorded
};

struct EngineRun {
  std::string backend;
  std::map<uint64_t, RequestOutput> requests;  // by request id
  EngineCounts counts;
  bool supports_window_group = false;  // Backend::supports_window_group()
  bool window_group = false;           // the engine kept one (Scheduler::window_kv_cache)
  std::string error;                   // a failed start, driver or step, or an ErrorEvent
};

// One engine workload. `drive` submits, steps and forks (everything it does
// must depend only on the engine's state, never on timings); the engine's
// events stay buffered until it returns. `exercised` returns "" when the run
// shows what the scenario is about, else what is missing.
struct Scenario {
  std::string name;
  std::shared_ptr<const gb::Model> model;
  std::shared_ptr<const gb::Tokenizer> tokenizer;
  gb::EngineConfig config;  // check_invariants is forced on
  std::function<gb::Status(gb::Engine&)> drive;
  std::function<std::string(const EngineRun&)> exercised;
};

// Runs the scenario on a fresh engine over `backend.make(model)`.
EngineRun run_scenario(const Scenario& scenario, const NamedBackend& backend);

// Requests, tokens and records gathered from an engine's events.
void collect_events(const std::vector<gb::TraceEvent>& events, EngineRun& run);

struct CompareReport {
  std::vector<std::string> failures;   // empty: the runs agree
  std::vector<std::string> near_ties;  // accepted divergences (the rest of that request not compared)
  int64_t num_tokens_compared = 0;
  int64_t num_records_compared = 0;
  double max_logit_diff = 0.0;  // over the compared candidates and chosen logits
  double max_logprob_diff = 0.0;
  double max_entropy_diff = 0.0;
  std::string summary() const;  // one line: counts and the largest differences
};

CompareReport compare_runs(const EngineRun& reference, const EngineRun& candidate, float logit_tolerance);

// One line of the counts, for the test log.
std::string describe_counts(const EngineCounts& counts);

// Runs the scenario on both backends, prints what each did, checks that both
// exercised it and that the candidate matches the reference (a test failure
// otherwise; near-ties are printed as notes).
void check_scenario(const Scenario& scenario, const BackendPair& pair);

// A greedy request with fixed length (ignore_eos) that records top_n candidates.
gb::GenerationRequest greedy_request(std::vector<gb::TokenId> prompt, int32_t max_tokens, int32_t top_n = 8);

}  // namespace gbtest
