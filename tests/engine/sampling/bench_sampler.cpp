// Cost per token of SamplerChain at vocab 32000, printed (label slow; timings
// are reported, never asserted, since they depend on the machine and its load).
// Logits: a smooth, peaked pseudo-random row like a small LM's (a few dominant
// tokens, a long tail); history: 512 tokens with repeats, for penalties and DRY.
#include <ctime>
#include <cmath>
#include <cstdio>
#include <vector>

#include "sampling_test_support.h"

using namespace gb;
using namespace gbtest::sampling;

namespace {

// Thread CPU time in microseconds: the machine running the suite is shared and
// often overloaded, and CPU time is far less sensitive to that than wall time.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

constexpr int kVocab = 32000;
constexpr int kIterations = 2000;

std::vector<float> lm_like_logits(int variant) {
  std::vector<float> l(kVocab);
  uint64_t x = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(variant + 1);
  for (int i = 0; i < kVocab; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
    l[static_cast<size_t>(i)] = static_cast<float>(-2.0 * std::log(-std::log(u + 1e-12) + 1e-12));  // Gumbel-ish
  }
  l[static_cast<size_t>((variant * 7919) % kVocab)] += 12.0f;
  l[static_cast<size_t>((variant * 104729) % kVocab)] += 10.0f;
  return l;
}

// Mean microseconds per sample() call over kIterations (8 distinct logit rows).
double time_chain(const SamplerSettings& s, const std::vector<TokenId>& history, bool with_record) {
  std::vector<std::vector<float>> rows;
  for (int v = 0; v < 8; ++v) rows.push_back(lm_like_logits(v));
  SamplerChain chain(s);
  SamplerRng rng(1);
  TokenRecord rec;
  long checksum = 0;
  const double t0 = thread_cpu_us();
  for (int i = 0; i < kIterations; ++i) {
    auto t = chain.sample(rows[static_cast<size_t>(i % 8)], history, rng, with_record ? &rec : nullptr);
    checksum += t.ok() ? t->id : -1;
  }
  const double t1 = thread_cpu_us();
  if (checksum < 0) std::printf("(errors while timing)\n");
  return (t1 - t0) / kIterations;
}

}  // namespace

GB_TEST(bench_sampler_vocab_32000) {
  std::vector<TokenId> history;
  for (int i = 0; i < 512; ++i) history.push_back(static_cast<TokenId>((i * 37) % 300 + (i / 64)));

  SamplerSettings defaults;  // penalties off, top_k 40, top_p 0.95, min_p 0.05, T 1
  SamplerSettings greedy = defaults;
  greedy.temperature = 0.0f;
  SamplerSettings nucleus = all_off();  // top-p over the whole vocabulary (no top-k first)
  nucleus.top_p = 0.9f;
  nucleus.order = {SamplerStage::TopP};
  SamplerSettings typical = all_off();
  typical.typical_p = 0.9f;
  typical.order = {SamplerStage::TypicalP};
  SamplerSettings plain = all_off();
  SamplerSettings full = defaults;
  full.repeat_penalty = 1.1f;
  full.frequency_penalty = 0.1f;
  full.presence_penalty = 0.1f;
  full.penalty_last_n = 256;
  full.dry.multiplier = 0.8f;
  full.dry.penalty_last_n = 512;
  full.logit_bias = {{0, -INFINITY}, {1, 2.0f}, {2, -1.0f}};
  full.xtc.probability = 0.5f;
  full.typical_p = 0.95f;

  struct Case {
    const char* name;
    const SamplerSettings* s;
  };
  const Case cases[] = {{"plain softmax (no stages)", &plain},   {"default chain", &defaults},
                        {"greedy (T = 0)", &greedy},             {"top_p 0.9 alone (no top_k)", &nucleus},
                        {"typical_p 0.9 alone", &typical},       {"full chain, 512 history", &full}};
  std::printf("SamplerChain cost per token, vocab %d, %d tokens each (mean us of thread CPU time):\n", kVocab, kIterations);
  std::printf("  %-30s %12s %12s\n", "settings", "no record", "record N=20");
  for (const Case& c : cases) {
    const double bare = time_chain(*c.s, history, false);
    const double recorded = time_chain(*c.s, history, true);
    std::printf("  %-30s %12.1f %12.1f\n", c.name, bare, recorded);
  }
  SamplerChain chain(defaults);
  const auto row = lm_like_logits(0);
  const double t0 = thread_cpu_us();
  for (int i = 0; i < 200; ++i) QVERIFY(chain.distribution(row, history).ok());
  std::printf("  %-30s %12.1f\n", "distribution() default chain", (thread_cpu_us() - t0) / 200);
}
