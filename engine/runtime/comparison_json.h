// The JSON and CSV forms of a finished Comparison, shared by `glassbox-cli
// compare --json` and the workbench's Compare export. Schema: docs/compare.md.
// nlohmann_json stays inside the .cpp.
// Threads: pure functions of a Comparison that is no longer changing.
#pragma once

#include <string>
#include <string_view>

#include "runtime/comparison.h"

namespace gb {

struct ComparisonJsonOptions {
  std::string prompt_text;     // echoed as "prompt" (a chat: the rendered prompt)
  std::string chat_format;     // a chat prompt: "model" or the built-in format used ("" = a plain prompt)
  bool token_records = true;   // per token: logprob, rank, draw, entropy, top candidates
  int indent = -1;             // < 0: one line
};

std::string comparison_to_json(const Comparison& comparison, const ComparisonJsonOptions& options = {});

// A lane's settings as the CLI's --lane and the workbench's lane editor give
// them: the sampler settings JSON (sampling/sampler_settings_json.h) with an
// optional "kv_policy" member (kv/kv_policy_json.h, the server's field), e.g.
//   {"temperature": 0, "kv_policy": {"policy": "h2o", "budget": 256}}
// `source` names the text in error messages.
Result<ComparisonLane> comparison_lane_from_json(std::string name, std::string_view text, std::string_view source);
// The inverse: the settings JSON, with "kv_policy" when the lane has one.
std::string comparison_lane_to_json(const ComparisonLane& lane, int indent = -1);
// One row per lane x sample: lane, sample, seed, statistics, stop reason, text.
std::string comparison_to_csv(const Comparison& comparison);

}  // namespace gb
