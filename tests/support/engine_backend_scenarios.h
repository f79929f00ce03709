// The engine scenarios every backend pair is held to (engine_backend_compare.h
// runs them and compares the two runs): each checks, on both backends, that it
// exercised what it names, then that the candidate's tokens and per-token
// records match the reference's. Models: stories260K from the shared dir (its
// golden prompts in testdata/golden) and synthesized sliding-window models
// (model/synthetic_model.h). Every KV pool is sized explicitly, so both
// engines schedule the same steps whatever memory their device reports.
//
//   check_golden_prompts_batched  the three golden prompts and a 65-token one
//       at once, 16 tokens a step: batching, chunked prefill mixed with
//       decodes; the golden prompts' tokens are also the golden files'.
//   check_forks  Engine::fork of a running request, of a finished retained
//       one and of a fork, and a branch_from submission (an edited chat
//       message): full blocks shared, the partial one copied.
//   check_preemption  four requests in a pool of 10 blocks: preempted and
//       recomputed.
//   check_sliding_window  a Mistral-style model (every layer slides) in a pool
//       smaller than its sequences (blocks released as they leave the window),
//       and a Gemma 3-style one whose sliding layers keep a window group where
//       the backend supports one (else the engine keeps every block).
//   check_speculative  a draft model, the n-gram drafter and self-drafting
//       beside a plain request: drafts verified and accepted.
//   check_token_records  top-32 records on long generations: ids, logits,
//       probabilities, log-probabilities and entropies.
//
// Threads: test code, one thread. Each function fails the current test (Qt
// Test macros) on a mismatch or a missing fixture.
#pragma once

#include "engine_backend_compare.h"

namespace gbtest {

void check_golden_prompts_batched(const BackendPair& pair);
void check_forks(const BackendPair& pair);
void check_preemption(const BackendPair& pair);
void check_sliding_window(const BackendPair& pair);
void check_speculative(const BackendPair& pair);
void check_token_records(const BackendPair& pair);

}  // namespace gbtest
