// The JSON object `generate --json` prints for each token: id, text, logprob, the
// top candidates with logit and logprob, and the sampler record (probability
// after each stage, entropy, rank, draw). Documented in docs/trace-format.md.
#pragma once

#include <nlohmann/json.hpp>

#include "trace/trace_event.h"

namespace gb::cli {

nlohmann::json token_json(const TokenSampledEvent& token);

// Writes `j` as one line of compact JSON to stdout (invalid UTF-8 replaced) and
// flushes, so a reader of a pipe sees each line as it is made.
void print_json_line(const nlohmann::json& j);

}  // namespace gb::cli
