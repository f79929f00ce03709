// Workload files for `serve-bench`: one JSON object per line describing a request
// (prompt or prompt_ids, max_tokens, optional arrival_ms, priority, sampling,
// isolation_key). Errors name the file and line.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "runtime/engine.h"

namespace gb::cli {

struct WorkloadItem {
  GenerationRequest request;  // prompt ids filled by load_workload (tokenized if given as text)
  double arrival_ms = 0.0;    // when to submit, from the start of the run
};

Result<std::vector<WorkloadItem>> load_workload(const std::string& path, const Tokenizer& tokenizer);

}  // namespace gb::cli
