// Engine::RequestState: what the engine keeps per request beside the
// scheduler's Request: the sampler chain and its random stream, the output
// state (RequestOutput: decoder, stop strings, reasoning budget, text, counts,
// token timings) and the admission bookkeeping. Private to the engine's own
// .cpp files. Engine thread only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/output_processor.h"
#include "sampling/sampler_chain.h"
#include "sampling/sampler_rng.h"

namespace gb {

struct Engine::RequestState {
  SamplerSettings settings;
  std::unique_ptr<SamplerChain> chain;
  SamplerRng rng;
  std::optional<RequestOutput> output;  // set at submission
  bool ignore_eos = false;
  int32_t num_prompt = 0;
  int32_t num_cached = 0;         // prompt tokens whose K/V was reused at first admission
  int32_t num_shared = 0;         // a copy-on-write fork: tokens taken from the parent
  int32_t num_hits_seen = 0;      // Request::num_prefix_hit_tokens already reported
  bool admitted = false;          // admitted and not preempted since
  bool ever_admitted = false;
  int32_t num_eviction_events = 0;  // KvEvictionEvents published (kept snapshots every kKeptSnapshotEvery)
  double submitted_ms = 0.0;
  // KV eviction's full-cache shadow (GenerationRequest::kv_shadow). The
  // evicting request: wants one, its id once started, and its logit rows by
  // position until the shadow has reached them. The shadow: whose it is.
  bool wants_shadow = false;
  std::optional<RequestId> shadow;
  std::map<int32_t, std::vector<float>> shadow_rows;
  std::optional<RequestId> shadow_of;
};

}  // namespace gb
