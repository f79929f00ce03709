// SamplerRng: one request's random stream. Counter-based, so a draw depends only
// on (seed, token index, lane) — never on other requests in the batch, on how
// many tokens were sampled in one step, or on which thread ran the step.
//
// Every generated token owns one counter value and two lanes:
//   lane 0 (kPickLane): the uniform handed to the final picker;
//   lane 1 (kXtcLane):  the uniform XTC compares with its probability.
// Both exist for every token whether or not they are used, and SamplerChain
// advances the counter exactly once per sampled token, so a trace that stores
// (seed, counter) or the draw itself replays the token exactly.
//
// The generator is splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom
// number generators", OOPSLA 2014) evaluated at a position instead of stepped:
// output k = mix(seed_key + (k + 1) * golden_gamma), k = 2 * counter + lane.
// The top 53 bits become a double in [0, 1).
// Threads: a value type; each request owns its own.
#pragma once

#include <cstdint>

namespace gb {

class SamplerRng {
 public:
  static constexpr uint32_t kPickLane = 0;
  static constexpr uint32_t kXtcLane = 1;

  explicit SamplerRng(uint64_t seed = 0, uint64_t counter = 0)
      : seed_(seed), seed_key_(mix(seed ^ 0x5851F42D4C957F2DULL)), counter_(counter) {}

  uint64_t seed() const { return seed_; }
  // Index of the next token to be sampled with this stream.
  uint64_t counter() const { return counter_; }
  void advance() { ++counter_; }

  // The uniform in [0, 1) of the current token for one lane; does not advance.
  double uniform(uint32_t lane) const { return uniform_at(counter_, lane); }
  double uniform_at(uint64_t counter, uint32_t lane) const {
    const uint64_t k = 2 * counter + lane;
    const uint64_t bits = mix(seed_key_ + (k + 1) * kGoldenGamma);
    return static_cast<double>(bits >> 11) * 0x1.0p-53;
  }

 private:
  static constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;
  // splitmix64's output function (a variant of MurmurHash3's fmix64).
  static constexpr uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  uint64_t seed_;
  uint64_t seed_key_;  // seed scrambled once so nearby seeds give unrelated streams
  uint64_t counter_;
};

}  // namespace gb
