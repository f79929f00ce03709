// ResponseBuilder: the JSON an OpenAI client expects back, built from the
// ChoiceEvents of one request -- the whole body (non-streaming) or server-sent
// events in OpenAI's chunk format (streaming): "data: {chunk}\n\n" lines, one
// chunk per token and choice, a finish chunk per choice, an optional usage chunk
// (stream_options.include_usage) and "data: [DONE]".
//
// Shapes follow OpenAI: chat logprobs are {"content": [{"token", "logprob",
// "bytes", "top_logprobs": [...]}]}, completions logprobs are {"tokens",
// "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}. Usage
// counts each prompt once (not once per choice) and reports the prompt tokens the
// prefix cache served as prompt_tokens_details.cached_tokens.
//
// Chat with tools (ApiTools::parse_calls): each choice's answer is read back as
// tool calls (tool_calls.h). Whole: message.tool_calls = [{"id", "type":
// "function", "function": {"name", "arguments"}}], content the text around the
// calls or null, finish_reason "tool_calls". Streamed: content is released as it
// comes except from where a call may begin; at the end one chunk per call
// (delta.tool_calls = [{"index", "id", "type", "function": {"name",
// "arguments"}}], the whole arguments at once), then the finish chunk.
// An answer the grammar cut off (engine reason "grammar_dead_end") finishes
// "stop" with "glassbox_finish_reason": "grammar_dead_end" beside it.
// Threads: one builder per request, used by its handler thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "server/request_channel.h"
#include "server/tool_calls.h"

namespace gb::server {

struct ResponseMeta {
  ApiEndpoint endpoint = ApiEndpoint::Completions;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  std::string model;    // the served model's id
  int64_t created = 0;  // unix seconds
  int num_choices = 1;
  int n = 1;            // choices per prompt (choice i belongs to prompt i / n)
  bool logprobs = false;
  bool include_usage = false;
  ApiTools tools;       // chat: read answers back as tool calls when tools.parse_calls()
};

class ResponseBuilder {
 public:
  explicit ResponseBuilder(ResponseMeta meta);

  // Streaming: the SSE text these events produce (possibly empty). The first
  // call also emits each chat choice's role chunk.
  std::string stream(const std::vector<ChoiceEvent>& events);
  // Streaming: the usage chunk (when asked for) and "data: [DONE]".
  std::string stream_end() const;

  // Non-streaming: records the events.
  void add(const std::vector<ChoiceEvent>& events);
  // Non-streaming: the whole response body.
  std::string body() const;

  bool finished() const { return num_finished_ == meta_.num_choices; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  struct Choice {
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::string finish_reason;  // OpenAI's: "stop" | "length" | "tool_calls"
    std::string engine_reason;  // the engine's, when OpenAI's hides it (grammar_dead_end)
    std::optional<ToolCallStreamer> tool_streamer;  // streamed chat with tools
    int32_t num_prompt_tokens = 0, num_generated = 0, num_cached_tokens = 0;
    int64_t num_token_bytes = 0;  // text_offset of the next token (completions)
    bool finished = false;
  };
  std::string chunk_json(int choice, const std::string& text, const std::vector<TokenLogprob>& logprobs,
                         const std::string& finish_reason, bool role) const;
  std::string tool_calls_chunk(int choice, const std::vector<ToolCall>& calls) const;
  std::string stream_finish(int choice);
  void record(const ChoiceEvent& e, std::vector<TokenLogprob>* new_logprobs);
  std::string usage_json() const;
  std::string logprobs_json(const std::vector<TokenLogprob>& logprobs, int64_t first_offset) const;

  ResponseMeta meta_;
  std::vector<Choice> choices_;
  int num_finished_ = 0;
  bool started_ = false;
  std::string error_;
};

// The engine's finish reason as OpenAI spells it: "length" for max_tokens and
// the context, "stop" for the rest (grammar_dead_end included).
std::string openai_finish_reason(const std::string& engine_reason);
// The engine's reason when openai_finish_reason hides something a client should
// know ("grammar_dead_end"), else "": sent as "glassbox_finish_reason".
std::string hidden_finish_reason(const std::string& engine_reason);

}  // namespace gb::server
