// The body of POST /v1/completions and /v1/chat/completions, as the server
// reads it: parse_api_request for both endpoints on the same bytes. Any body is
// a parsed request or a 400 ApiError; an exception escaping is a crash here
// (libFuzzer aborts on it), as it would end the server. What is accepted must
// hold what the limits promise, and the error must write out as JSON.
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz_support.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace {

void check(gb::server::ApiEndpoint endpoint, std::string_view body, const gb::server::ParseLimits& limits) {
  using gb::server::ApiEndpoint;
  const auto parsed = gb::server::parse_api_request(endpoint, body, limits);
  if (const auto* e = std::get_if<gb::server::ApiError>(&parsed)) {
    if (e->status != 400 || e->message.empty()) gbfuzz::fuzz_fail("a refusal that is not a 400 with a message");
    if (nlohmann::json::parse(gb::server::api_error_json(*e), nullptr, false).is_discarded())
      gbfuzz::fuzz_fail("api_error_json wrote invalid JSON for: " + e->message);
    return;
  }
  const auto& r = std::get<gb::server::ApiRequest>(parsed);
  if (r.n < 1 || r.n > limits.max_n) gbfuzz::fuzz_fail("accepted n = " + std::to_string(r.n));
  if (r.top_logprobs < 0 || r.top_logprobs > limits.max_top_logprobs)
    gbfuzz::fuzz_fail("accepted top_logprobs = " + std::to_string(r.top_logprobs));
  if (static_cast<int>(r.sampling.stop_strings.size()) > limits.max_stop) gbfuzz::fuzz_fail("accepted too many stop strings");
  for (const auto& [id, bias] : r.sampling.logit_bias)
    if (id < 0 || id >= limits.vocab_size) gbfuzz::fuzz_fail("accepted a logit_bias id outside the vocabulary");
  for (const gb::TokenId id : r.sampling.stop_token_ids)
    if (id < 0 || id >= limits.vocab_size) gbfuzz::fuzz_fail("accepted a stop token id outside the vocabulary");
  if (endpoint == ApiEndpoint::Completions) {
    if (r.prompts.empty() || static_cast<int>(r.prompts.size()) > limits.max_prompts)
      gbfuzz::fuzz_fail("accepted " + std::to_string(r.prompts.size()) + " prompts");
    for (const auto& p : r.prompts)
      for (const gb::TokenId id : p.ids)
        if (id < 0 || id >= limits.vocab_size) gbfuzz::fuzz_fail("accepted a prompt token id outside the vocabulary");
  } else {
    if (r.messages.empty() || static_cast<int>(r.messages.size()) > limits.max_messages)
      gbfuzz::fuzz_fail("accepted " + std::to_string(r.messages.size()) + " messages");
    if (!r.template_vars_json.empty() && !nlohmann::json::parse(r.template_vars_json, nullptr, false).is_object())
      gbfuzz::fuzz_fail("template variables that are not a JSON object: " + r.template_vars_json);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  gb::server::ParseLimits limits;
  limits.vocab_size = 512;  // stories260K's
  check(gb::server::ApiEndpoint::Completions, body, limits);
  check(gb::server::ApiEndpoint::ChatCompletions, body, limits);
  return 0;
}
