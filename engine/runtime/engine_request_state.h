// Engine::RequestState: what the engine keeps per request beside the
// scheduler's Request (sampler chain and its random stream, stop-string and
// reasoning-budget state, the streaming decoder, timings). Private to the
// engine's own .cpp files. Engine thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "sampling/reasoning_budget.h"
#include "sampling/sampler_chain.h"
#include "sampling/sampler_rng.h"
#include "sampling/stop_string_matcher.h"

namespace gb {

struct Engine::RequestState {
  SamplerSettings settings;
  std::unique_ptr<SamplerChain> chain;
  SamplerRng rng;
  std::unique_ptr<StopStringMatcher> stop;
  std::unique_ptr<StreamingDecoder> decoder;
  std::unique_ptr<ReasoningBudget> budget;  // present when settings.reasoning.max_tokens >= 0
  bool ignore_eos = false;
  std::vector<TokenId> prompt_ids; // as submitted (a fork: the shared tokens)
  int32_t num_prompt = 0;
  int32_t num_generated = 0;
  int32_t num_cached = 0;         // prompt tokens whose K/V was reused at first admission
  int32_t num_shared = 0;         // a copy-on-write fork: tokens taken from the parent
  int32_t num_hits_seen = 0;      // Request::num_prefix_hit_tokens already reported
  bool admitted = false;          // admitted and not preempted since
  bool ever_admitted = false;
  double submitted_ms = 0.0;
  double first_token_ms = -1.0;
  double last_token_ms = 0.0;
  std::string text;              // emitted text so far
};

}  // namespace gb
