// Batch-1 speed of speculative decoding against plain decoding on stories260K
// (label slow; prints a table, asserts only that greedy outputs agree). Each
// drafter runs side by side with a plain run of the same request, alternating,
// best of kRepeats each, so machine noise hits both alike; the ratio is what
// to read. Columns: tok/s plain and speculative, speed-up, acceptance rate,
// mean accepted length (tokens per verification), target forwards per token,
// time in the drafter and in verification per emitted token.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "spec_engine_support.h"

namespace {

using namespace spectest;
constexpr int kRepeats = 3;

struct Run {
  double ms = 0;
  std::vector<gb::TokenId> tokens;
  std::optional<gb::SpeculativeStats> stats;
};

Run run_once(const Fixture& f, const gb::GenerationRequest& r) {
  gb::EngineConfig config;
  config.check_invariants = false;  // timing: no sweeps
  config.num_scratch_blocks = 8;
  config.max_seqs = 1;  // batch 1 (also sizes the draft model's pool)
  gb::CpuBackendOptions cpu;
  cpu.num_threads = 1;
  gb::Engine engine(f.model, f.tokenizer, gb::make_cpu_backend(f.model, cpu), config);
  GB_CHECK(engine.start().ok());
  Run out;
  // Submitting loads a draft model file and sizes its pool: a one-off cost,
  // kept out of the decode timing.
  auto id = engine.submit(r);
  GB_CHECK(id.ok());
  const auto t0 = std::chrono::steady_clock::now();
  GB_CHECK(engine.run_until_idle().ok());
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.tokens = collect(engine.drain_events())[id->value].tokens;
  out.stats = engine.speculative_stats(*id);
  return out;
}

void bench(const Fixture& f, const std::string& name, const std::vector<gb::TokenId>& prompt, int max_tokens,
           std::optional<gb::SpeculativeConfig> spec) {
  gb::GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.top_n_record = 0;
  r.ignore_eos = true;
  Run best_plain, best_spec;
  best_plain.ms = best_spec.ms = 1e30;
  for (int i = 0; i < kRepeats; ++i) {
    Run p = run_once(f, r);
    if (p.ms < best_plain.ms) best_plain = p;
    gb::GenerationRequest rs = r;
    rs.speculative = spec;
    Run s = run_once(f, rs);
    if (s.ms < best_spec.ms) best_spec = s;
  }
  QVERIFY2(best_plain.tokens == best_spec.tokens, (name + ": greedy tokens differ").c_str());
  const double n = static_cast<double>(best_spec.tokens.size());
  const gb::SpeculativeStats& s = *best_spec.stats;
  std::printf("%-28s %8.0f %8.0f %7.2fx %6.2f %6.2f %6.2f %8.3f %8.3f  k=%d fallbacks=%lld\n", name.c_str(),
              n / best_plain.ms * 1000, n / best_spec.ms * 1000, best_plain.ms / best_spec.ms, s.acceptance_rate(),
              s.mean_accepted_length(), static_cast<double>(s.target_forwards) / n, s.draft_ms / n, s.verify_ms / n,
              s.current_k, static_cast<long long>(s.num_fallbacks));
}

}  // namespace

GB_TEST(bench_batch1_speedup) {
  const Fixture f = load_stories();
  if (!f.ok()) QFAIL("cannot load stories260K");
  const auto story = f.tokenizer->encode("Once upon a time", true);
  std::string rep;
  for (int i = 0; i < 6; ++i) rep += "Tom and Lily went to the park to play with the big red ball. ";
  const auto repeating = f.tokenizer->encode(rep, true);
  std::printf("%-28s %8s %8s %8s %6s %6s %6s %8s %8s\n", "drafter", "plain/s", "spec/s", "speedup", "accept", "len",
              "fwd/tok", "draft ms", "verif ms");
  auto timed = [](gb::SpeculativeConfig c) { c.timing_fallback = true; return c; };
  bench(f, "ngram (story)", story, 400, timed(spec_of("ngram")));
  bench(f, "ngram (repeating prompt)", repeating, 400, timed(spec_of("ngram")));
  bench(f, "draft F16", story, 400, timed(spec_of("draft:" + shared("models/stories260K/stories260K-F16.gguf"))));
  bench(f, "draft L4", story, 400, timed(spec_of("draft:" + shared("models/stories260K/stories260K_L4_draft.bin"))));
  bench(f, "self 3 layers", story, 400, timed(spec_of("self:3")));
  bench(f, "self 4 layers", story, 400, timed(spec_of("self:4")));
  bench(f, "draft F16 no fallback", story, 400, [] { auto c = spec_of("draft:" + shared("models/stories260K/stories260K-F16.gguf")); c.adaptive = false; c.k = 4; return c; }());
  bench(f, "draft L4 no fallback", story, 400, [] { auto c = spec_of("draft:" + shared("models/stories260K/stories260K_L4_draft.bin")); c.adaptive = false; c.k = 3; return c; }());
  bench(f, "self 4 no fallback", story, 400, [] { auto c = spec_of("self:4"); c.adaptive = false; c.k = 3; return c; }());
}
