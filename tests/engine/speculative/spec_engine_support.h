// Shared fixtures for the speculative engine tests: stories260K loaded once,
// engines with invariant sweeps after every step, the custom test drafters
// (always wrong, random), and running one request alone or many together.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "gb_test.h"
#include "stories_fixture.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "speculative/draft_model.h"
#include "speculative/draft_proposer.h"
#include "speculative/speculative_decoder.h"
#include "tokenizer/tokenizer.h"

namespace spectest {

using Fixture = gbtest::StoriesFixture;
using gbtest::load_stories;

inline std::string shared(const std::string& rel) { return gbtest::shared_file(rel); }

inline std::unique_ptr<gb::Engine> make_engine(const Fixture& f, gb::EngineConfig config = {}) {
  // Scheduler + block pool are swept after every step (rollbacks included).
  if (config.num_scratch_blocks == 0) config.num_scratch_blocks = 64;
  return gbtest::make_test_engine(f, config);
}

// Proposes the perfect drafter's tokens shifted by one: the first drafted
// token is never the target's greedy choice (the target drafts for itself).
class WrongProposer final : public gb::DraftProposer {
 public:
  explicit WrongProposer(std::shared_ptr<gb::DraftModel> self) : inner_(std::move(self)) {}
  std::string_view name() const override { return "wrong"; }
  gb::Result<gb::Draft> propose(const gb::DraftInput& in) override {
    gb::DraftInput greedy = in;
    greedy.greedy = true;
    auto d = inner_.propose(greedy);
    if (!d) return d;
    for (gb::TokenId& t : d->tokens) t = (t + 1) % 512;
    return d;
  }
  void release() override { inner_.release(); }

 private:
  gb::DraftModelProposer inner_;
};

// Uniformly random tokens, q = the uniform distribution (they were drawn from
// it). The draws come from the request's speculative stream (pick lane, as
// model drafters use it), so they differ between seeds and repeat per seed.
class RandomProposer final : public gb::DraftProposer {
 public:
  std::string_view name() const override { return "random"; }
  gb::Result<gb::Draft> propose(const gb::DraftInput& in) override {
    gb::Draft d;
    for (int32_t i = 0; i < in.k; ++i) {
      const double u = in.spec_rng.uniform_at(in.first_output_index + static_cast<uint64_t>(i), gb::SamplerRng::kPickLane);
      d.tokens.push_back(std::min<gb::TokenId>(511, static_cast<gb::TokenId>(u * 512)));
      d.q.emplace_back(512, 1.0 / 512);
    }
    return d;
  }
};

inline gb::SpeculativeConfig spec_of(const std::string& text) {
  auto c = gb::parse_speculative_spec(text);
  GB_CHECK_MSG(c.ok(), c.ok() ? nullptr : c.error().message.c_str());
  c->timing_fallback = false;  // deterministic choices (timings never change tokens)
  return *c;
}

// The named drafters every test goes through. "perfect" drafts with the
// target file itself; "wrong" and "random" are the custom drafters above.
inline std::vector<std::pair<std::string, gb::SpeculativeConfig>> all_drafters(const Fixture& f) {
  std::vector<std::pair<std::string, gb::SpeculativeConfig>> out;
  out.emplace_back("ngram", spec_of("ngram:n=3,k=4"));
  out.emplace_back("draft F16", spec_of("draft:" + shared("models/stories260K/stories260K-F16.gguf") + ":k=4"));
  out.emplace_back("draft L4", spec_of("draft:" + shared("models/stories260K/stories260K_L4_draft.bin") + ":k=3"));
  out.emplace_back("perfect (target as draft)", spec_of("draft:" + f.model_path + ":k=6"));
  out.emplace_back("self 3 layers", spec_of("self:3:k=3"));
  out.emplace_back("self 1 layer", spec_of("self:1:k=2"));
  gb::SpeculativeConfig wrong = spec_of("ngram:k=2");
  wrong.kind = gb::DrafterKind::Custom;
  wrong.custom_name = "wrong";
  wrong.adaptive = false;  // keep drafting although it never pays
  auto self = gb::DraftModel::load(f.model_path, "", *f.tokenizer, f.model_path, 600, 64, 16);
  GB_CHECK(self.ok());
  std::shared_ptr<gb::DraftModel> dm = *self;
  wrong.make_custom = [dm] { return std::make_unique<WrongProposer>(dm); };
  out.emplace_back("always wrong", wrong);
  gb::SpeculativeConfig random = spec_of("ngram:k=3");
  random.kind = gb::DrafterKind::Custom;
  random.custom_name = "random";
  random.adaptive = false;
  random.make_custom = [] { return std::make_unique<RandomProposer>(); };
  out.emplace_back("random", random);
  return out;
}

struct Output {
  std::vector<gb::TokenId> tokens;
  std::vector<gb::TokenOrigin> origins;
  std::string finish_reason;
  std::string text;
  int32_t num_spec_events = 0;
};

inline std::map<uint64_t, Output> collect(const std::vector<gb::TraceEvent>& events) {
  std::map<uint64_t, Output> out;
  for (const gb::TraceEvent& e : events) {
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      out[t->request.value].tokens.push_back(t->token);
      out[t->request.value].origins.push_back(t->origin);
    } else if (const auto* fin = std::get_if<gb::RequestFinishedEvent>(&e.body)) {
      out[fin->request.value].finish_reason = fin->reason;
      out[fin->request.value].text = fin->text;
    } else if (const auto* s = std::get_if<gb::SpeculativeEvent>(&e.body)) {
      ++out[s->request.value].num_spec_events;
    }
  }
  return out;
}

}  // namespace spectest
