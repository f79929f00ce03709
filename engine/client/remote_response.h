// The answers of a remote OpenAI-compatible server, read into RemoteClient's
// types: the model list, one streamed chunk, a non-streamed completion with n
// choices, an echo answer's prompt logprobs, and an error body's message.
// RemoteClient does the HTTP and hands the text to these; they are pure so the
// tests and the fuzz harness (tests/fuzz/fuzz_remote_response.cpp) call them
// on arbitrary bytes.
//
// Every field is type-checked. A field the API allows to be missing or null
// (logprobs, usage, finish_reason mid-stream, a token's logprob) reads as
// absent; a field of the wrong type is an error that names it
// ("choices[0].logprobs.content[2].token is not a string"), never an exception
// (a server that answers nonsense ends that one request, not the workbench).
// Threads: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/remote_client.h"
#include "core/result.h"

namespace gb::server {

// The usage counts of an answer (OpenAI's usage object; 0 when not reported).
struct RemoteUsage {
  int num_prompt_tokens = 0;
  int num_generated = 0;
  int num_cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens
};

// One data payload of a streamed answer.
struct RemoteStreamChunk {
  // Choice 0's new tokens, t_ms 0 (the caller stamps the arrival time). With
  // logprobs, one per reported token; their strings are the text when they
  // spell the chunk's text exactly, else the chunk's text goes with the last
  // one. Without, the chunk's text is one token (none when it is empty).
  std::vector<RemoteToken> tokens;
  std::string finish_reason;         // "" until the server says
  std::optional<RemoteUsage> usage;  // the usage chunk (stream_options.include_usage)
};

// GET /v1/models: the ids of the listed models, in order; an error when the
// answer is not a model list or lists none.
Result<std::vector<std::string>> parse_models_list(std::string_view body);

// The data of one server-sent-events line ("data: {...}" -> "{...}"), or
// nullopt for any other line (comments, event names, blank lines), for an
// empty data field and for the end marker "[DONE]". `line` has no line break.
std::optional<std::string_view> sse_data(std::string_view line);

// One server-sent event's data (after "data: "; not "[DONE]") of a streamed
// completion (`chat` false) or chat completion. An error when the data is not
// a JSON object, a field has the wrong type, or the server sent an error
// object instead of a chunk (its message).
Result<RemoteStreamChunk> parse_stream_chunk(std::string_view data, bool chat);

// A non-streamed POST /v1/completions answer that must hold `n` choices, each
// in its `index` slot (the array position when the server sends no index).
Result<std::vector<RemoteChoice>> parse_completion(std::string_view body, int n);

// The prompt tokens of an echo answer (POST /v1/completions {echo, logprobs,
// max_tokens 0}); an error when the server did not score the prompt.
Result<std::vector<RemoteScoredToken>> parse_scored_prompt(std::string_view body);

// The message of an error answer ({"error": {"message": ...}} or {"error":
// "..."}), else the body itself (its first 300 bytes).
std::string parse_error_message(std::string_view body);

}  // namespace gb::server
