// The Score tool's JSON (docs/compare.md, "Scoring text") for a text scored by
// a remote server (RemoteClient::score: echo + logprobs, max_tokens 0), in the
// local form's shape so the workbench's Score view reads both: per token its
// position, text, logprob, rank among the server's alternatives and those
// alternatives. What top-N logprobs cannot give is null (token ids, entropy;
// rank when the chosen token is not among the alternatives) and listed under
// "not_available"; there is no base model (KL) over the API.
// Threads: pure function.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/remote_client.h"

namespace gb::server {

// The chosen token's rank among t.top, or nullopt when it is not there.
std::optional<int> remote_rank(const RemoteScoredToken& t);

// `url` and `model` name the server; the first token (no logprob) is context only.
std::string remote_score_to_json(const std::vector<RemoteScoredToken>& scored, const std::string& url,
                                 const std::string& model);

}  // namespace gb::server
