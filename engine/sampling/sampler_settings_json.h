// JSON form of SamplerSettings, for presets and traces. nlohmann_json stays
// inside the .cpp so users of this header need not link it.
//
// Shape (every key optional on input; missing keys keep their defaults; unknown
// keys are an error so that typos in presets are caught):
//   { "temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "typical_p": 1,
//     "repeat_penalty": 1.1, "presence_penalty": 0, "frequency_penalty": 0,
//     "penalty_last_n": 64,
//     "logit_bias": [[13, -2.5], [2, "-inf"]],          // "-inf" = ban
//     "dry": { "multiplier": 0.8, "base": 1.75, "allowed_length": 2, "penalty_last_n": -1,
//              "sequence_breakers": ["\n", ":"], "sequence_breaker_ids": [13, 29901] },
//     "xtc": { "threshold": 0.1, "probability": 0.5, "protected_ids": [2] },
//     "order": "penalties,dry,logit_bias,top_k,typical_p,top_p,min_p,xtc,temperature",
//     "seed": 42, "top_n_record": 20,
//     "stop_strings": ["\nUser:"], "stop_token_ids": [2], "max_tokens": 256,
//     "reasoning": { "max_tokens": -1, "open_marker": "<think>", "close_marker": "</think>" } }
// "order" is also accepted as an array of stage names. Output always uses the
// canonical stage names. Parsed settings are validated (validate()).
// Threads: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "sampling/sampler_settings.h"

namespace gb {

// indent < 0: one line; otherwise pretty-printed with that many spaces.
std::string sampler_settings_to_json(const SamplerSettings& settings, int indent = -1);

// `source` names where the text came from (a preset file) for error messages.
Result<SamplerSettings> sampler_settings_from_json(std::string_view text,
                                                   std::string_view source = "sampler settings JSON");

}  // namespace gb
