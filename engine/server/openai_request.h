// The body of POST /v1/completions and /v1/chat/completions, parsed and checked
// into an ApiRequest before anything reaches the engine. Every bad value gives a
// 400 ApiError that names the parameter, as OpenAI does.
//
// Defaults follow OpenAI, not the workbench: temperature 1, top_p 1 and every
// Glassbox-only stage off (top_k 0, min_p 0, ...). Glassbox's other samplers are
// accepted as extra top-level fields (as vLLM and llama-server do): top_k, min_p,
// typical_p, repetition_penalty (alias repeat_penalty), penalty_last_n,
// dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n,
// xtc_threshold, xtc_probability, ignore_eos, stop_token_ids, and kv_policy (KV
// eviction, docs/kv-eviction.md: "full", or an object {"policy": "sink" | "h2o" |
// "snapkv", "budget": B, "sinks", "recent", "window", "pool"}). Unknown fields are
// ignored (as vLLM does); fields we cannot honour (suffix, functions, audio ...)
// are refused rather than ignored. Structured output (response_format, grammar,
// json_schema, guided_*; tools and tool_choice) is read by output_format.h into
// sampling.format and `tools`. Completions' `echo` is honoured for scoring: with `max_tokens` 0
// (and `logprobs` for the prompt tokens' log-probabilities, as vLLM answers).
// Chat's `tools` and `chat_template_kwargs` reach the model's chat template.
// Every read is type-checked, so any body gives a request or a 400, never an
// exception (tests/fuzz/fuzz_openai_request.cpp); a body nested deeper than 64
// levels is refused, naming the top-level field the nesting is in.
// Threads: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/ids.h"
#include "kv/kv_policy.h"
#include "sampling/sampler_settings.h"
#include "server/api_error.h"

namespace gb::server {

enum class ApiEndpoint { Completions, ChatCompletions };

struct ApiMessage {  // a message as the request carries it (the engine's is gb::ChatMessage)
  std::string role;     // "system" | "user" | "assistant" | "tool" ("developer" is read as "system")
  std::string content;  // text parts joined
  // The message's tool fields for the chat template, as a JSON object text (""
  // none): an assistant's tool_calls (arguments that are JSON object text
  // become objects, as templates expect), a tool answer's tool_call_id and name.
  std::string tool_fields_json;
};

// tool_choice: OpenAI's default is None without tools and Auto with them.
enum class ToolChoice { None, Auto, Required, Named };

struct ApiTools {
  std::vector<std::string> names;  // the request's function names, in order ("" none)
  ToolChoice choice = ToolChoice::None;
  std::string forced_name;         // Named: the function the answer must call
  bool parallel = false;           // parallel_tool_calls: true (a required answer may hold several calls)
  // The answer is read back as tool calls (tools given, tool_choice not none).
  bool parse_calls() const { return !names.empty() && choice != ToolChoice::None; }
  // The grammar makes the answer a call from its first byte.
  bool forced() const { return choice == ToolChoice::Required || choice == ToolChoice::Named; }
};

// One completions prompt: text, or token ids given by the client.
struct PromptInput {
  std::string text;
  std::vector<TokenId> ids;
  bool is_ids = false;
};

struct ApiRequest {
  ApiEndpoint endpoint = ApiEndpoint::Completions;
  std::string model;                  // "" when the client did not name one
  std::vector<PromptInput> prompts;   // completions: one or more (a batch)
  std::vector<ApiMessage> messages;  // chat
  int n = 1;                          // choices per prompt
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool logprobs = false;              // return the chosen token's logprob
  int top_logprobs = 0;               // and this many alternatives (0..20)
  std::optional<int> max_tokens;      // max_tokens / max_completion_tokens (absent: the server's default)
  std::optional<uint64_t> seed;
  SamplerSettings sampling;           // stop strings, logit bias and every sampler field
  bool ignore_eos = false;
  KvPolicy kv_policy;                 // resolved (kv/kv_policy.h); full by default
  bool echo = false;                  // completions: score the prompt (max_tokens 0 only)
  // Chat: extra template variables as a JSON object text ("" none): the
  // request's chat_template_kwargs with its `tools` (a list) added.
  std::string template_vars_json;
  ApiTools tools;                     // chat: tools, tool_choice, parallel_tool_calls
  // The field sampling.format came from ("response_format", "grammar",
  // "json_schema", "guided_*", "tool_choice"; "" when there is no format): a
  // format the engine refuses at submit is a 400 naming it.
  std::string format_param;
};

struct ParseLimits {
  int32_t vocab_size = 0;   // logit_bias and stop_token_ids ids must be below this
  int max_n = 16;           // choices per prompt
  int max_prompts = 16;     // prompts in one completions batch
  int max_messages = 256;   // chat messages
  int max_stop = 16;        // stop strings
  int max_top_logprobs = 20;
};

// The parsed request, or the ApiError to answer with.
std::variant<ApiRequest, ApiError> parse_api_request(ApiEndpoint endpoint, std::string_view body,
                                                     const ParseLimits& limits);

// SamplerSettings with OpenAI's defaults (temperature 1, top_p 1, Glassbox-only
// stages off, penalties over the whole history, no token records).
SamplerSettings openai_default_sampling();

}  // namespace gb::server
