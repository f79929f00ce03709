// Verifier: the acceptance rule of speculative sampling (Leviathan, Kalman,
// Matias 2023, "Fast Inference from Transformers via Speculative Decoding";
// Chen et al. 2023, "Accelerating LLM Decoding with Speculative Sampling").
//
// Given drafted tokens d_1..d_K drawn from the drafter's q_1..q_K and the
// target's distributions p_1..p_{K+1} (p_i conditioned on the context plus
// d_1..d_{i-1}), walk i = 1..K:
//   accept d_i with probability min(1, p_i(d_i) / q_i(d_i))   (u_accept[i] < ratio)
//   on the first rejection emit a token drawn from norm(max(0, p_i - q_i)) and stop;
//   if all K are accepted, emit a bonus token drawn from p_{K+1}.
// Every emitted token is then distributed exactly as p (the theorem the tests
// check empirically). A deterministic drafter has one-hot q (q(d_i) = 1), so
// d_i is accepted with probability p_i(d_i) and the residual is p_i with d_i
// removed. Under greedy sampling p is one-hot at the argmax, so a drafted token
// survives exactly when it equals the argmax and the output is token-identical
// to plain greedy decoding.
//
// p is supplied lazily (a callback) because rows after the first rejection are
// never needed and each row costs a sampler-chain pass over the vocabulary.
// All picks use pick_from_distribution (inverse CDF in id order).
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/ids.h"
#include "core/result.h"

namespace gb {

struct VerifyInput {
  std::span<const TokenId> drafted;                 // (K)
  std::span<const std::vector<double>> q;           // (K) rows of (vocab) or empty = one-hot
  // p(i) for i in 0..K: the target's distribution (vocab) at draft position i
  // (row K is the bonus position). Called in increasing i, at most once each.
  std::function<Result<std::vector<double>>(int32_t)> p;
  std::span<const double> u_accept;                 // (K) uniforms in [0, 1)
  // (K + 1) uniforms: u_final[m] draws the resampled or bonus token after m
  // accepted tokens (it belongs to that token's output index).
  std::span<const double> u_final;
};

struct VerifyResult {
  int32_t num_accepted = 0;          // leading drafted tokens kept
  std::optional<TokenId> rejected;   // d_{num_accepted+1} when one was rejected
  TokenId next = -1;                 // the resampled (after a rejection) or bonus token
  bool bonus = false;                // all K accepted, `next` drawn from p_{K+1}
  std::vector<float> p_of_draft;     // (num examined) p_i(d_i)
  std::vector<float> q_of_draft;     // (num examined) q_i(d_i)
};

Result<VerifyResult> verify_draft(const VerifyInput& input);

// norm(max(0, p - q)) where q is a full row, or one-hot at `drafted` when q is
// empty. Falls back to p when the residual has no mass (p <= q everywhere can
// only happen through rounding, since a rejection needs p(d) < q(d)).
std::vector<double> residual_distribution(std::span<const double> p, std::span<const double> q, TokenId drafted);

}  // namespace gb
