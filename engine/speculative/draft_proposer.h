// DraftProposer: one request's drafter. Each verification step the engine asks
// it for up to k tokens that continue the request's tokens; the target then
// verifies them in one forward pass (Verifier) and tells the drafter how many of
// its tokens survived, so a drafter with state (a draft model's KV) rolls back.
//
//   tokens: | prompt ............ | output ............ |last|
//            target KV computed for every token but `last`
//   draft:                                                  d1 d2 ... dk
//
// q: the drafter's probability of each drafted token. A drafter that samples
// returns the whole distribution it drew from (vocab_size doubles per token); a
// deterministic drafter (n-gram lookup, greedy argmax) returns an empty row,
// which the verifier treats as one-hot q (q(d) = 1). Correctness of the verifier
// needs exactly that: d_i was drawn from q_i.
//
// Thread: engine thread only; one proposer per request.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/result.h"
#include "sampling/sampler_rng.h"

namespace gb {

class SamplerChain;

struct DraftInput {
  std::span<const TokenId> tokens;  // prompt + output; the last one is not yet in the target's KV
  int32_t num_prompt = 0;
  int32_t k = 1;                    // propose at most k tokens (fewer, even none, is fine)
  // Sampling the draft (model drafters): the request's settings in a chain of
  // the drafter's own, and the request's speculative random stream. Drafted
  // token j of the request (output index j) uses spec_rng.uniform_at(j, kPickLane).
  SamplerChain* chain = nullptr;
  bool greedy = true;               // temperature 0: take the argmax, q one-hot
  SamplerRng spec_rng;
  uint64_t first_output_index = 0;  // output index of d1
  // The target's block table and block size (self-draft reads the context's
  // K/V of the skipped-to layers from it; it never writes there).
  std::span<const int32_t> target_block_ids;
  // The target's window-group table (its sliding layers; empty: none).
  std::span<const int32_t> target_window_block_ids;
  int32_t block_size = 16;
};

struct Draft {
  std::vector<TokenId> tokens;         // (k') k' <= k
  std::vector<std::vector<double>> q;  // (k') rows of (vocab_size) or empty = one-hot
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual std::string_view name() const = 0;  // "ngram", "draft", "self", ...
  virtual Result<Draft> propose(const DraftInput& input) = 0;
  // The request finished or was dropped: release what the drafter holds.
  virtual void release() {}
};

}  // namespace gb
