// AdaptiveK: one request's choice, before each decode step, between drafting k
// tokens and plain decoding, and of k itself.
//
// k: after a verification with all k accepted, k + 1; after a rejection at
// position a (a accepted), min(k - 1, a + 1); always within [k_min, k_max].
//
// Fallback ("drafting must not cost more than it saves"):
//   timing mode   -- exponential moving averages of milliseconds per emitted
//                    token, speculative (draft + verify step, divided by the
//                    tokens it emitted) and plain (a plain decode step). The
//                    request starts with kBaselineSteps plain steps to measure
//                    the plain cost. After kMinVerifications speculative steps
//                    (or after one, if it cost over kClearlySlower x plain, which
//                    also skips one cooldown step),
//                    if speculative >= kMargin x plain, it decodes plainly for a
//                    cooldown (64 tokens, x8 on each consecutive failure up to
//                    2048, reset when speculation pays), then probes again with
//                    k halved (a probe costs ~kMinVerifications x k tokens at the
//                    speculative price). Probes then take a shrinking share of
//                    the tokens, so a never-useful drafter converges to plain
//                    speed (measured in docs/speculative.md).
//   deterministic -- (timing_fallback = false) the same cooldowns, but the test
//                    is on tokens emitted per verification (EMA < kMinTokensPerStep),
//                    so the sequence of choices, and therefore seeded sampled
//                    output, does not depend on timings.
//
// Plain value; engine thread.
#pragma once

#include <cstdint>

namespace gb {

class AdaptiveK {
 public:
  static constexpr int32_t kBaselineSteps = 2;
  static constexpr int32_t kMinVerifications = 3;
  static constexpr double kMargin = 0.97;
  static constexpr double kClearlySlower = 1.5;  // ends a probe after one verification
  static constexpr double kMinTokensPerStep = 1.3;
  static constexpr int32_t kMinCooldown = 64;
  static constexpr int32_t kMaxCooldown = 2048;

  AdaptiveK(int32_t k, int32_t k_min, int32_t k_max, bool adaptive, bool timing);

  // The k to draft this step; 0 means decode plainly.
  int32_t next_k() const;
  int32_t k() const { return k_; }
  // A verification: drafted `num_drafted`, kept `num_accepted`, `ms` for draft + step.
  void on_verified(int32_t num_drafted, int32_t num_accepted, double ms);
  // A plain decode step (no draft) that took `ms`.
  void on_plain(double ms);
  int32_t num_fallbacks() const { return num_fallbacks_; }
  bool in_fallback() const { return plain_left_ > 0; }

 private:
  void decide();

  int32_t k_, k_min_, k_max_;
  bool adaptive_, timing_;
  int32_t plain_left_ = 0;         // plain steps before speculating again
  int32_t cooldown_ = kMinCooldown;
  int32_t verifications_since_probe_ = 0;
  double ema_spec_ms_per_token_ = -1.0;
  double ema_plain_ms_per_token_ = -1.0;
  double ema_tokens_per_step_ = -1.0;
  int32_t num_fallbacks_ = 0;
};

}  // namespace gb
