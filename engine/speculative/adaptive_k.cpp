#include "speculative/adaptive_k.h"

#include <algorithm>

namespace gb {
namespace {
// Weight of the newest sample: recent behaviour matters (acceptance drifts with
// the text), but single noisy timings must not flip the decision.
constexpr double kAlpha = 0.25;
double ema(double old, double sample) { return old < 0 ? sample : old + kAlpha * (sample - old); }
}  // namespace

AdaptiveK::AdaptiveK(int32_t k, int32_t k_min, int32_t k_max, bool adaptive, bool timing)
    : k_(std::clamp(k, k_min, k_max)), k_min_(k_min), k_max_(k_max), adaptive_(adaptive), timing_(timing) {
  if (adaptive_ && timing_) plain_left_ = kBaselineSteps;
}

int32_t AdaptiveK::next_k() const { return plain_left_ > 0 ? 0 : k_; }

void AdaptiveK::on_plain(double ms) {
  ema_plain_ms_per_token_ = ema(ema_plain_ms_per_token_, ms);
  if (plain_left_ > 0) --plain_left_;
}

void AdaptiveK::on_verified(int32_t num_drafted, int32_t num_accepted, double ms) {
  const int32_t emitted = num_accepted + 1;
  ema_spec_ms_per_token_ = ema(ema_spec_ms_per_token_, ms / emitted);
  ema_tokens_per_step_ = ema(ema_tokens_per_step_, static_cast<double>(emitted));
  if (!adaptive_) return;
  if (num_accepted == num_drafted) k_ = std::min(k_max_, k_ + 1);
  else k_ = std::max(k_min_, std::min(k_ - 1, num_accepted + 1));
  ++verifications_since_probe_;
  decide();
}

void AdaptiveK::decide() {
  // A probe that is already far slower than plain decoding after its first
  // verification stops there: the remaining verifications would only add cost.
  const bool clearly_slower = timing_ && ema_plain_ms_per_token_ > 0 &&
                              ema_spec_ms_per_token_ > kClearlySlower * ema_plain_ms_per_token_;
  if (verifications_since_probe_ < kMinVerifications && !clearly_slower) return;
  bool pays;
  if (timing_) {
    if (ema_plain_ms_per_token_ < 0) return;  // nothing to compare with yet
    pays = ema_spec_ms_per_token_ < kMargin * ema_plain_ms_per_token_;
  } else {
    pays = ema_tokens_per_step_ >= kMinTokensPerStep;
  }
  if (pays) {
    cooldown_ = kMinCooldown;
    return;
  }
  // A clearly unprofitable drafter backs off one step further at once: each
  // probe costs a catch-up of the draft's context plus a verification.
  const int32_t wait = clearly_slower ? std::min(kMaxCooldown, cooldown_ * 8) : cooldown_;
  plain_left_ = wait;
  cooldown_ = std::min(kMaxCooldown, wait * 8);
  k_ = std::max(k_min_, k_ / 2);  // the next probe is cheaper
  verifications_since_probe_ = 0;
  // A probe starts from scratch: old timings describe other text.
  ema_spec_ms_per_token_ = -1.0;
  ema_tokens_per_step_ = -1.0;
  ++num_fallbacks_;
}

}  // namespace gb
