// parse_inspect_request (inspect_request.h).
#include "server/inspect_request.h"

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace gb::server {

std::variant<InspectRequest, ApiError> parse_inspect_request(const std::string& body, const Tokenizer& tokenizer,
                                                            int32_t vocab_size, int32_t max_context) {
  using nlohmann::json;
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad_param("", "the body is not a JSON object");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key != "tokens" && key != "prompt" && key != "position" && key != "layers" && key != "top_k" &&
        key != "attention" && key != "residuals" && key != "model")
      return bad_param(key, "unknown field '" + key + "' (tokens, prompt, position, layers, top_k, attention, residuals)");
  }
  InspectRequest r;
  if (j.contains("tokens") == j.contains("prompt")) return bad_param("tokens", "give either 'tokens' or 'prompt'");
  if (j.contains("tokens")) {
    const json& t = j["tokens"];
    if (!t.is_array()) return bad_param("tokens", "'tokens' must be an array of token ids");
    for (const json& id : t) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
        return bad_param("tokens", "'tokens' holds " + id.dump() + ", not a token id of this model (0 .. " +
                                       std::to_string(vocab_size - 1) + ")");
      r.tokens.push_back(static_cast<TokenId>(id.get<int64_t>()));
    }
  } else {
    if (!j["prompt"].is_string()) return bad_param("prompt", "'prompt' must be a string");
    r.tokens = tokenizer.encode(j["prompt"].get<std::string>(), true);
  }
  if (r.tokens.empty()) return bad_param(j.contains("tokens") ? "tokens" : "prompt", "there are no tokens to inspect");
  const auto n = static_cast<int64_t>(r.tokens.size());
  if (n + 1 > max_context)
    return ApiError{400, "the sequence has " + std::to_string(n) + " tokens; this server runs at most " +
                             std::to_string(max_context - 1) + " for an inspection",
                    "invalid_request_error", "tokens", "context_length_exceeded", 0};
  int64_t position = -1;
  if (j.contains("position")) {
    if (!j["position"].is_number_integer()) return bad_param("position", "'position' must be an integer");
    position = j["position"].get<int64_t>();
  }
  if (position < 0) position += n;
  if (position < 0 || position >= n)
    return bad_param("position", "'position' " + j.value("position", json(-1)).dump() + " is outside the " +
                                     std::to_string(n) + " tokens");
  r.position = static_cast<int32_t>(position);
  if (j.contains("layers")) {
    if (!j["layers"].is_string()) return bad_param("layers", "'layers' must be a string such as \"0-3\"");
    if (Status st = parse_inside_layers(j["layers"].get<std::string>(), r.options); !st)
      return bad_param("layers", st.error().message);
  }
  if (j.contains("top_k")) {
    if (!j["top_k"].is_number_integer() || j["top_k"].get<int64_t>() < 1 || j["top_k"].get<int64_t>() > 100)
      return bad_param("top_k", "'top_k' must be an integer 1 .. 100");
    r.options.top_k = static_cast<int32_t>(j["top_k"].get<int64_t>());
  }
  for (const char* flag : {"attention", "residuals"}) {
    if (!j.contains(flag)) continue;
    if (!j[flag].is_boolean()) return bad_param(flag, std::string("'") + flag + "' must be true or false");
    (std::string(flag) == "attention" ? r.options.attention : r.options.residuals) = j[flag].get<bool>();
  }
  return r;
}

}  // namespace gb::server
