// POST /glassbox/v1/inspect (a Glassbox extension, docs/server.md): the body
// {"tokens": [ids] | "prompt": "text", "position": N (negative: from the end;
// default -1), "layers": "a-b", "top_k": K, "attention": bool, "residuals":
// bool}, parsed and checked before it reaches the engine thread. The answer is
// the report of docs/inside.md.
// Threads: pure functions.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "core/ids.h"
#include "runtime/inside.h"
#include "server/api_error.h"

namespace gb {
class Tokenizer;
}

namespace gb::server {

struct InspectRequest {
  std::vector<TokenId> tokens;
  int32_t position = 0;  // resolved: 0 .. tokens.size() - 1
  InsideOptions options;
};

std::variant<InspectRequest, ApiError> parse_inspect_request(const std::string& body, const Tokenizer& tokenizer,
                                                            int32_t vocab_size, int32_t max_context);

}  // namespace gb::server
