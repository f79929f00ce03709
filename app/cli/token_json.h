// The JSON object `generate --json` prints for each token: id, text, logprob, the
// top candidates with logit and logprob, and the sampler record (probability
// after each stage, entropy, rank, draw). Documented in docs/trace-format.md.
#pragma once

#include <nlohmann/json.hpp>

#include "trace/trace_event.h"

namespace gb::cli {

nlohmann::json token_json(const TokenSampledEvent& token);

}  // namespace gb::cli
