#include "server/openai_request.h"

#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "kv/kv_policy_json.h"
#include "server/output_format.h"

namespace gb::server {
namespace {

// Ordered: a schema's and a tool's key order reach the grammar and the chat
// template as the client wrote them.
using ojson = nlohmann::ordered_json;
using Outcome = std::optional<ApiError>;  // nullopt: the field was fine (or absent)

// Deeper JSON than any request needs (a tool's JSON schema is the deepest
// legitimate part, a handful of levels) is refused before anything walks it:
// copying, dumping and template rendering recurse once per level.
constexpr int kMaxJsonDepth = 64;

// The string at obj[key], or nullptr when obj is not an object, the key is
// absent or its value is not a string. Every read of an optional string goes
// through this (ojson::value() throws when the value has another type).
const std::string* string_at(const ojson& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

// A numeric sampler field: where it lives in SamplerSettings and its range.
struct NumberField {
  const char* name;
  std::function<float&(SamplerSettings&)> real;   // set for real-valued fields
  std::function<int&(SamplerSettings&)> integer;  // set for integer fields
  double lo, hi;
  bool lo_open;  // the range is (lo, hi] instead of [lo, hi]
};

// Variation as data: OpenAI's sampling fields first, then Glassbox's extras.
const std::vector<NumberField>& number_fields() {
  static const std::vector<NumberField> fields = {
      {"temperature", [](SamplerSettings& s) -> float& { return s.temperature; }, nullptr, 0, 2, false},
      {"top_p", [](SamplerSettings& s) -> float& { return s.top_p; }, nullptr, 0, 1, true},
      {"presence_penalty", [](SamplerSettings& s) -> float& { return s.presence_penalty; }, nullptr, -2, 2, false},
      {"frequency_penalty", [](SamplerSettings& s) -> float& { return s.frequency_penalty; }, nullptr, -2, 2, false},
      {"top_k", nullptr, [](SamplerSettings& s) -> int& { return s.top_k; }, -1, 1 << 30, false},
      {"min_p", [](SamplerSettings& s) -> float& { return s.min_p; }, nullptr, 0, 1, false},
      {"typical_p", [](SamplerSettings& s) -> float& { return s.typical_p; }, nullptr, 0, 1, true},
      {"repetition_penalty", [](SamplerSettings& s) -> float& { return s.repeat_penalty; }, nullptr, 0, 10, true},
      {"repeat_penalty", [](SamplerSettings& s) -> float& { return s.repeat_penalty; }, nullptr, 0, 10, true},
      {"penalty_last_n", nullptr, [](SamplerSettings& s) -> int& { return s.penalty_last_n; }, -1, 1 << 30, false},
      {"dry_multiplier", [](SamplerSettings& s) -> float& { return s.dry.multiplier; }, nullptr, 0, 100, false},
      {"dry_base", [](SamplerSettings& s) -> float& { return s.dry.base; }, nullptr, 1, 100, false},
      {"dry_allowed_length", nullptr, [](SamplerSettings& s) -> int& { return s.dry.allowed_length; }, 1, 1 << 20, false},
      {"dry_penalty_last_n", nullptr, [](SamplerSettings& s) -> int& { return s.dry.penalty_last_n; }, -1, 1 << 30, false},
      {"xtc_threshold", [](SamplerSettings& s) -> float& { return s.xtc.threshold; }, nullptr, 0, 1, false},
      {"xtc_probability", [](SamplerSettings& s) -> float& { return s.xtc.probability; }, nullptr, 0, 1, false},
  };
  return fields;
}

// Fields whose meaning we cannot honour: refusing is clearer than ignoring them.
const std::vector<const char*>& refused_fields(ApiEndpoint endpoint) {
  static const std::vector<const char*> chat = {"functions", "function_call", "audio", "modalities", "prediction",
                                                "web_search_options"};
  static const std::vector<const char*> completions = {"suffix"};
  return endpoint == ApiEndpoint::ChatCompletions ? chat : completions;
}

std::string range_text(const NumberField& f) {
  auto num = [](double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  return std::string(f.lo_open ? "(" : "[") + num(f.lo) + ", " + num(f.hi) + "]";
}

Outcome apply_number_field(const ojson& body, const NumberField& f, SamplerSettings& s) {
  auto it = body.find(f.name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  const bool want_int = static_cast<bool>(f.integer);
  if (!it->is_number() || (want_int && !it->is_number_integer()))
    return bad_param(f.name, std::string(f.name) + " must be " + (want_int ? "an integer" : "a number"));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v > f.hi || v < f.lo || (f.lo_open && v == f.lo))
    return bad_param(f.name, std::string(f.name) + " = " + it->dump() + " is outside " + range_text(f));
  if (want_int) f.integer(s) = static_cast<int>(v);
  else f.real(s) = static_cast<float>(v);
  return std::nullopt;
}

Outcome parse_stop(const ojson& body, const ParseLimits& limits, SamplerSettings& s) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) s.stop_strings.push_back(it->get<std::string>());
    return std::nullopt;
  }
  if (!it->is_array()) return bad_param("stop", "stop must be a string or an array of strings");
  if (static_cast<int>(it->size()) > limits.max_stop)
    return bad_param("stop", "stop has " + std::to_string(it->size()) + " strings; at most " +
                                 std::to_string(limits.max_stop) + " are allowed");
  for (const ojson& v : *it) {
    if (!v.is_string()) return bad_param("stop", "stop must be a string or an array of strings");
    if (!v.get<std::string>().empty()) s.stop_strings.push_back(v.get<std::string>());
  }
  return std::nullopt;
}

Outcome parse_token_id(const ojson& v, const std::string& param, const ParseLimits& limits, TokenId& out) {
  long long id = -1;
  if (v.is_number_integer()) {
    id = v.get<long long>();
  } else if (v.is_string()) {
    try {
      size_t used = 0;
      id = std::stoll(v.get<std::string>(), &used);
      if (used != v.get<std::string>().size()) id = -1;
    } catch (const std::exception&) {
      id = -1;
    }
  } else {
    return bad_param(param, param + ": token ids must be integers");
  }
  if (id < 0 || id >= limits.vocab_size)
    return bad_param(param, param + ": token id " + v.dump() + " is outside the vocabulary (0.." +
                                std::to_string(limits.vocab_size - 1) + ")");
  out = static_cast<TokenId>(id);
  return std::nullopt;
}

// {"50256": -100, "13": 2.5}: bias added to the logit; -100 bans the token.
Outcome parse_logit_bias(const ojson& body, const ParseLimits& limits, SamplerSettings& s) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return bad_param("logit_bias", "logit_bias must be an object mapping token ids to numbers");
  if (it->size() > 1024) return bad_param("logit_bias", "logit_bias has more than 1024 entries");
  for (auto [key, value] : it->items()) {
    TokenId id = 0;
    if (Outcome e = parse_token_id(ojson(key), "logit_bias", limits, id)) return e;
    if (!value.is_number() || value.get<double>() < -100 || value.get<double>() > 100)
      return bad_param("logit_bias", "logit_bias[" + key + "] must be a number in [-100, 100]");
    const float bias = value.get<double>() <= -100 ? -std::numeric_limits<float>::infinity()
                                                   : static_cast<float>(value.get<double>());
    s.logit_bias.emplace_back(id, bias);
  }
  return std::nullopt;
}

Outcome parse_int(const ojson& body, const char* name, int lo, int hi, std::optional<int>& out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return bad_param(name, std::string(name) + " must be an integer");
  // Above INT64_MAX the value is only readable as unsigned: read as signed it would wrap.
  const bool too_big = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi);
  const long long v = too_big ? hi : it->get<long long>();
  if (too_big || v < lo || v > hi)
    return bad_param(name, std::string(name) + " = " + it->dump() + " is outside [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "]");
  out = static_cast<int>(v);
  return std::nullopt;
}

Outcome parse_bool(const ojson& body, const char* name, bool& out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad_param(name, std::string(name) + " must be true or false");
  out = it->get<bool>();
  return std::nullopt;
}

// "kv_policy": a policy name or object (kv/kv_policy_json.h), resolved.
Outcome parse_kv_policy(const ojson& body, KvPolicy& out) {
  auto it = body.find("kv_policy");
  if (it == body.end() || it->is_null()) return std::nullopt;
  std::string field;
  auto policy = kv_policy_from_json(it->dump(), &field);
  if (!policy) return bad_param(field, policy.error().message);
  out = *policy;
  return std::nullopt;
}

Outcome parse_common(const ojson& body, const ParseLimits& limits, ApiRequest& r) {
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad_param("model", "model must be a string");
    r.model = it->get<std::string>();
  }
  std::optional<int> n, max_tokens, max_completion_tokens;
  if (Outcome e = parse_int(body, "n", 1, limits.max_n, n)) return e;
  r.n = n.value_or(1);
  // 0 only with echo (scoring the prompt): checked by parse_completions.
  if (Outcome e = parse_int(body, "max_tokens", 0, 1 << 30, max_tokens)) return e;
  if (Outcome e = parse_int(body, "max_completion_tokens", 1, 1 << 30, max_completion_tokens)) return e;
  r.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) return bad_param("seed", "seed must be an integer");
    r.seed = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  }
  if (Outcome e = parse_bool(body, "stream", r.stream)) return e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return bad_param("stream_options", "stream_options must be an object");
    if (!r.stream) return bad_param("stream_options", "stream_options is only allowed when stream is true");
    if (Outcome e = parse_bool(*it, "include_usage", r.include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  if (Outcome e = parse_bool(body, "ignore_eos", r.ignore_eos)) return e;
  if (Outcome e = parse_kv_policy(body, r.kv_policy)) return e;
  for (const NumberField& f : number_fields())
    if (Outcome e = apply_number_field(body, f, r.sampling)) return e;
  if (r.sampling.top_k < 0) r.sampling.top_k = 0;  // vLLM's "-1 = off"
  if (Outcome e = parse_stop(body, limits, r.sampling)) return e;
  if (Outcome e = parse_logit_bias(body, limits, r.sampling)) return e;
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array() || it->size() > 64) return bad_param("stop_token_ids", "stop_token_ids must be an array of at most 64 ids");
    for (const ojson& v : *it) {
      TokenId id = 0;
      if (Outcome e = parse_token_id(v, "stop_token_ids", limits, id)) return e;
      r.sampling.stop_token_ids.push_back(id);
    }
  }
  for (const char* name : refused_fields(r.endpoint))
    if (auto it = body.find(name); it != body.end() && !it->is_null())
      return bad_param(name, std::string(name) + " is not supported by this server");
  return parse_output_format(body, r);
}

// "prompt": "text" | ["text", ...] | [1, 2, 3] | [[1, 2], [3]]
Outcome parse_prompts(const ojson& body, const ParseLimits& limits, ApiRequest& r) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_param("prompt", "prompt is required");
  const auto ids_of = [&](const ojson& arr, PromptInput& p) -> Outcome {
    p.is_ids = true;
    for (const ojson& v : arr) {
      TokenId id = 0;
      if (!v.is_number_integer()) return bad_param("prompt", "prompt: a token-id array must hold only integers");
      if (Outcome e = parse_token_id(v, "prompt", limits, id)) return e;
      p.ids.push_back(id);
    }
    return std::nullopt;
  };
  if (it->is_string()) {
    r.prompts.push_back({it->get<std::string>(), {}, false});
    return std::nullopt;
  }
  if (!it->is_array() || it->empty())
    return bad_param("prompt", "prompt must be a string, an array of strings, or token ids");
  if ((*it)[0].is_number_integer()) {
    PromptInput p;
    if (Outcome e = ids_of(*it, p)) return e;
    r.prompts.push_back(std::move(p));
    return std::nullopt;
  }
  if (static_cast<int>(it->size()) > limits.max_prompts)
    return bad_param("prompt", "prompt has " + std::to_string(it->size()) + " entries; at most " +
                                   std::to_string(limits.max_prompts) + " are allowed");
  for (const ojson& v : *it) {
    PromptInput p;
    if (v.is_string()) p.text = v.get<std::string>();
    else if (v.is_array() && !v.empty()) {
      if (Outcome e = ids_of(v, p)) return e;
    } else return bad_param("prompt", "prompt must be a string, an array of strings, or token ids");
    r.prompts.push_back(std::move(p));
  }
  return std::nullopt;
}

Outcome parse_completions(const ojson& body, const ParseLimits& limits, ApiRequest& r) {
  if (Outcome e = parse_prompts(body, limits, r)) return e;
  std::optional<int> logprobs, best_of;
  if (Outcome e = parse_int(body, "logprobs", 0, limits.max_top_logprobs, logprobs)) return e;
  r.logprobs = logprobs.has_value();
  r.top_logprobs = logprobs.value_or(0);
  if (Outcome e = parse_int(body, "best_of", 1, limits.max_n, best_of)) return e;
  if (best_of && *best_of != r.n) return bad_param("best_of", "best_of other than n is not supported by this server");
  if (Outcome e = parse_bool(body, "echo", r.echo)) return e;
  const bool zero = r.max_tokens && *r.max_tokens == 0;
  if (zero && !r.echo) return bad_param("max_tokens", "max_tokens must be at least 1 (0 only with echo)");
  if (r.echo && !zero)
    return bad_param("echo", "echo is supported with max_tokens 0 only (scoring the prompt), not with generation");
  if (r.echo && r.stream) return bad_param("stream", "echo is not supported with stream");
  if (r.echo && r.n != 1) return bad_param("n", "echo is supported with n = 1 only");
  return std::nullopt;
}

// "content": "text" | [{"type": "text", "text": "..."}, ...]
Outcome parse_content(const ojson& m, const std::string& where, std::string& out) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::nullopt;  // e.g. an assistant turn with no text
  if (it->is_string()) {
    out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) return bad_param(where + ".content", where + ".content must be a string or an array of text parts");
  for (const ojson& part : *it) {
    const std::string* type = string_at(part, "type");
    const std::string* text = string_at(part, "text");
    if (type == nullptr || *type != "text" || text == nullptr)
      return bad_param(where + ".content", where + ".content: only parts of type \"text\" with a string text are supported");
    out += *text;
  }
  return std::nullopt;
}

// chat_template_kwargs (an object: enable_thinking ...) and tools (a list of
// function definitions) become variables of the model's chat template, as in
// vLLM and llama-server; tool_choice and parallel_tool_calls say how the answer
// is read back (output_format.h).
Outcome parse_template_vars(const ojson& body, ApiRequest& r) {
  ojson vars = ojson::object();
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return bad_param("chat_template_kwargs", "chat_template_kwargs must be an object");
    vars = *it;
  }
  if (Outcome e = parse_tools(body, r, vars)) return e;
  if (!vars.empty()) r.template_vars_json = vars.dump();
  return std::nullopt;
}

Outcome parse_chat(const ojson& body, const ParseLimits& limits, ApiRequest& r) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    return bad_param("messages", "messages must be a non-empty array");
  if (static_cast<int>(it->size()) > limits.max_messages)
    return bad_param("messages", "messages has " + std::to_string(it->size()) + " entries; at most " +
                                     std::to_string(limits.max_messages) + " are allowed");
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_param(where, where + " must be an object with a string role");
    const std::string* role = string_at(m, "role");
    if (role == nullptr) return bad_param(where + ".role", where + ".role must be a string");
    ApiMessage msg{*role, "", ""};
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return bad_param(where + ".role", where + ".role '" + msg.role + "' is not one of system, developer, user, assistant, tool");
    if (Outcome e = parse_content(m, where, msg.content)) return e;
    if (Outcome e = parse_message_tool_fields(m, where, msg)) return e;
    r.messages.push_back(std::move(msg));
  }
  if (Outcome e = parse_bool(body, "logprobs", r.logprobs)) return e;
  std::optional<int> top;
  if (Outcome e = parse_int(body, "top_logprobs", 0, limits.max_top_logprobs, top)) return e;
  if (top && !r.logprobs) return bad_param("top_logprobs", "top_logprobs requires logprobs to be true");
  r.top_logprobs = top.value_or(0);
  return parse_template_vars(body, r);
}

}  // namespace

SamplerSettings openai_default_sampling() {
  SamplerSettings s;
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.typical_p = 1.0f;
  s.repeat_penalty = 1.0f;
  s.penalty_last_n = -1;
  s.top_n_record = 0;
  return s;
}

std::variant<ApiRequest, ApiError> parse_api_request(ApiEndpoint endpoint, std::string_view body,
                                                     const ParseLimits& limits) {
  // Values deeper than kMaxJsonDepth are dropped while parsing (the callback's
  // false) and the request refused, naming the top-level field they were in.
  std::string top_key, deep_key;
  bool too_deep = false;
  const ojson j = ojson::parse(
      body,
      [&](int depth, ojson::parse_event_t event, ojson& parsed) {
        if (event == ojson::parse_event_t::key && depth == 1) top_key = parsed.is_string() ? parsed.get<std::string>() : "";
        if (depth <= kMaxJsonDepth) return true;
        if (!too_deep) deep_key = top_key;
        too_deep = true;
        return false;
      },
      false);
  if (too_deep)
    return deep_key.empty() ? ApiError{400, "the request body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                                       "invalid_request_error", "", "invalid_json", 0}
                            : bad_param(deep_key, deep_key + " is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  if (j.is_discarded())
    return ApiError{400, "the request body is not valid JSON", "invalid_request_error", "", "invalid_json", 0};
  if (!j.is_object()) return ApiError{400, "the request body must be a JSON object", "invalid_request_error", "", "invalid_json", 0};
  ApiRequest r;
  r.endpoint = endpoint;
  r.sampling = openai_default_sampling();
  if (Outcome e = parse_common(j, limits, r)) return *e;
  const Outcome e = endpoint == ApiEndpoint::Completions ? parse_completions(j, limits, r) : parse_chat(j, limits, r);
  if (e) return *e;
  if (Status st = validate(r.sampling); !st) return ApiError{400, st.error().message, "invalid_request_error", "", "invalid_parameter", 0};
  return r;
}

}  // namespace gb::server
