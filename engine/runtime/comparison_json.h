// The JSON and CSV forms of a finished Comparison, shared by `glassbox-cli
// compare --json` and the workbench's Compare export. Schema: docs/compare.md.
// nlohmann_json stays inside the .cpp.
// Threads: pure functions of a Comparison that is no longer changing.
#pragma once

#include <string>

#include "runtime/comparison.h"

namespace gb {

struct ComparisonJsonOptions {
  std::string prompt_text;     // echoed as "prompt" (a chat: the rendered prompt)
  std::string chat_format;     // a chat prompt: "model" or the built-in format used ("" = a plain prompt)
  bool token_records = true;   // per token: logprob, rank, draw, entropy, top candidates
  int indent = -1;             // < 0: one line
};

std::string comparison_to_json(const Comparison& comparison, const ComparisonJsonOptions& options = {});
// One row per lane x sample: lane, sample, seed, statistics, stop reason, text.
std::string comparison_to_csv(const Comparison& comparison);

}  // namespace gb
