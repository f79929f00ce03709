#include "client/remote_response.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace gb::server {

namespace {

using nlohmann::json;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The start of a text for a message (invalid UTF-8 is the caller's to show).
std::string excerpt(std::string_view text) {
  return text.size() > 120 ? std::string(text.substr(0, 120)) + "..." : std::string(text);
}

Result<json> parse_object(std::string_view text, const std::string& what) {
  // No depth limit is needed here: parsing and destroying are iterative in
  // nlohmann::json, and nothing below copies or dumps a value (which recurse).
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return make_error(what + " is not valid JSON: " + excerpt(text));
  if (!j.is_object()) return make_error(what + " is not a JSON object: " + excerpt(text));
  return j;
}

// obj[key] when obj is an object holding the key with a non-null value, else
// nullptr: absent and null read alike (OpenAI sends null for "not reported").
const json* field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string at(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
std::string at(const std::string& path, size_t index) { return path + "[" + std::to_string(index) + "]"; }

Error wrong_type(const std::string& path, const char* what) { return make_error(path + " is not " + what); }

// A string value (nullptr: absent, out unchanged).
Status read_string(const json* v, const std::string& path, std::string& out) {
  if (v == nullptr) return {};
  if (!v->is_string()) return wrong_type(path, "a string");
  out = v->get<std::string>();
  return {};
}

// A log-probability: any number (nullptr: NaN, not reported).
Status read_logprob(const json* v, const std::string& path, float& out) {
  out = kNaN;
  if (v == nullptr) return {};
  if (!v->is_number()) return wrong_type(path, "a number");
  out = static_cast<float>(v->get<double>());
  return {};
}

// A count or index: a whole number in [0, INT_MAX] (a whole float too; some
// servers write counts as 12.0). nullptr leaves out unchanged.
Status read_count(const json* v, const std::string& path, int& out) {
  if (v == nullptr) return {};
  constexpr int kMax = std::numeric_limits<int>::max();
  bool ok = false;
  if (v->is_number_unsigned()) {
    ok = v->get<uint64_t>() <= static_cast<uint64_t>(kMax);
    if (ok) out = static_cast<int>(v->get<uint64_t>());
  } else if (v->is_number_integer()) {
    ok = v->get<int64_t>() >= 0 && v->get<int64_t>() <= kMax;
    if (ok) out = static_cast<int>(v->get<int64_t>());
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    ok = d >= 0.0 && d <= kMax && std::floor(d) == d;
    if (ok) out = static_cast<int>(d);
  }
  return ok ? Status() : wrong_type(path, "a whole number from 0 to 2147483647");
}

// An array value (nullptr: absent or null).
Result<const json*> read_array(const json* v, const std::string& path) {
  if (v != nullptr && !v->is_array()) return wrong_type(path, "an array");
  return v;
}

void sort_top(std::vector<std::pair<std::string, float>>& top) {
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
}

// The reported tokens of a completions `logprobs` object ({"tokens",
// "token_logprobs", "top_logprobs": [{token: logprob} | null]}). Token
// strings may be null (not reported), logprobs null (the first prompt token
// of an echo), a top entry null (likewise).
Result<std::vector<RemoteToken>> completion_logprob_tokens(const json& lp, const std::string& path) {
  std::vector<RemoteToken> out;
  const json *tokens = nullptr, *values = nullptr, *tops = nullptr;
  GB_ASSIGN_OR_RETURN(tokens, read_array(field(lp, "tokens"), at(path, "tokens")));
  GB_ASSIGN_OR_RETURN(values, read_array(field(lp, "token_logprobs"), at(path, "token_logprobs")));
  GB_ASSIGN_OR_RETURN(tops, read_array(field(lp, "top_logprobs"), at(path, "top_logprobs")));
  if (tokens == nullptr) return out;
  for (size_t i = 0; i < tokens->size(); ++i) {
    RemoteToken t;
    const json& token = (*tokens)[i];
    GB_TRY(read_string(token.is_null() ? nullptr : &token, at(at(path, "tokens"), i), t.token));
    const json* value = values != nullptr && i < values->size() ? &(*values)[i] : nullptr;
    GB_TRY(read_logprob(value == nullptr || value->is_null() ? nullptr : value, at(at(path, "token_logprobs"), i),
                        t.logprob));
    if (tops != nullptr && i < tops->size() && !(*tops)[i].is_null()) {
      const json& alternatives = (*tops)[i];
      const std::string where = at(at(path, "top_logprobs"), i);
      if (!alternatives.is_object()) return wrong_type(where, "an object of token logprobs");
      for (const auto& [text, logprob] : alternatives.items()) {
        float v = kNaN;
        GB_TRY(read_logprob(logprob.is_null() ? nullptr : &logprob, where + "[\"" + text + "\"]", v));
        t.top.emplace_back(text, v);
      }
      sort_top(t.top);
    }
    out.push_back(std::move(t));
  }
  return out;
}

// The reported tokens of a chat `logprobs` object ({"content": [{"token",
// "logprob", "top_logprobs": [{"token", "logprob"}]}]}).
Result<std::vector<RemoteToken>> chat_logprob_tokens(const json& lp, const std::string& path) {
  std::vector<RemoteToken> out;
  const json* content = nullptr;
  GB_ASSIGN_OR_RETURN(content, read_array(field(lp, "content"), at(path, "content")));
  if (content == nullptr) return out;
  for (size_t i = 0; i < content->size(); ++i) {
    const json& entry = (*content)[i];
    const std::string where = at(at(path, "content"), i);
    if (!entry.is_object()) return wrong_type(where, "an object");
    RemoteToken t;
    GB_TRY(read_string(field(entry, "token"), at(where, "token"), t.token));
    GB_TRY(read_logprob(field(entry, "logprob"), at(where, "logprob"), t.logprob));
    const json* alternatives = nullptr;
    GB_ASSIGN_OR_RETURN(alternatives, read_array(field(entry, "top_logprobs"), at(where, "top_logprobs")));
    for (size_t k = 0; alternatives != nullptr && k < alternatives->size(); ++k) {
      const json& alt = (*alternatives)[k];
      const std::string alt_at = at(at(where, "top_logprobs"), k);
      if (!alt.is_object()) return wrong_type(alt_at, "an object");
      std::pair<std::string, float> top{"", kNaN};
      GB_TRY(read_string(field(alt, "token"), at(alt_at, "token"), top.first));
      GB_TRY(read_logprob(field(alt, "logprob"), at(alt_at, "logprob"), top.second));
      t.top.push_back(std::move(top));
    }
    sort_top(t.top);
    out.push_back(std::move(t));
  }
  return out;
}

// Either shape, read from the object itself: llama-server answers
// /v1/completions with chat's {"content": [...]} logprobs.
Result<std::vector<RemoteToken>> logprob_tokens(const json* lp, const std::string& path) {
  if (lp == nullptr) return std::vector<RemoteToken>{};
  if (!lp->is_object()) return wrong_type(path, "an object");
  if (lp->contains("content")) return chat_logprob_tokens(*lp, path);
  return completion_logprob_tokens(*lp, path);
}

Result<RemoteUsage> read_usage(const json& u) {
  if (!u.is_object()) return wrong_type("usage", "an object");
  RemoteUsage usage;
  GB_TRY(read_count(field(u, "prompt_tokens"), "usage.prompt_tokens", usage.num_prompt_tokens));
  GB_TRY(read_count(field(u, "completion_tokens"), "usage.completion_tokens", usage.num_generated));
  if (const json* details = field(u, "prompt_tokens_details")) {
    if (!details->is_object()) return wrong_type("usage.prompt_tokens_details", "an object");
    GB_TRY(read_count(field(*details, "cached_tokens"), "usage.prompt_tokens_details.cached_tokens",
                      usage.num_cached_tokens));
  }
  return usage;
}

// The "choices" array of an answer (nullptr when absent or null).
Result<const json*> choices_of(const json& answer) { return read_array(field(answer, "choices"), "choices"); }

// The message of an error value: {"message": ...} or a string.
// An empty message is no message: the caller falls back to the body itself
// (fuzz_remote_response found {"error":""} giving an error with no text).
std::optional<std::string> error_text(const json& e) {
  if (e.is_string() && !e.get<std::string>().empty()) return e.get<std::string>();
  if (const json* m = field(e, "message"); m != nullptr && m->is_string() && !m->get<std::string>().empty())
    return m->get<std::string>();
  return std::nullopt;
}

}  // namespace

Result<std::vector<std::string>> parse_models_list(std::string_view body) {
  json answer;
  GB_ASSIGN_OR_RETURN(answer, parse_object(body, "the model list"));
  const json* data = nullptr;
  GB_ASSIGN_OR_RETURN(data, read_array(field(answer, "data"), "data"));
  std::vector<std::string> ids;
  for (size_t i = 0; data != nullptr && i < data->size(); ++i) {
    const json& model = (*data)[i];
    const json* id = field(model, "id");
    if (id == nullptr || !id->is_string()) return wrong_type(at(at("data", i), "id"), "a string");
    ids.push_back(id->get<std::string>());
  }
  if (ids.empty()) return make_error("the model list names no model");
  return ids;
}

std::optional<std::string_view> sse_data(std::string_view line) {
  if (line.substr(0, 5) != "data:") return std::nullopt;
  line.remove_prefix(line.size() > 5 && line[5] == ' ' ? 6 : 5);
  if (line.empty() || line == "[DONE]") return std::nullopt;
  return line;
}

Result<RemoteStreamChunk> parse_stream_chunk(std::string_view data, bool chat) {
  json chunk;
  GB_ASSIGN_OR_RETURN(chunk, parse_object(data, "a streamed chunk"));
  if (const json* e = field(chunk, "error")) return make_error(error_text(*e).value_or(excerpt(data)));
  RemoteStreamChunk out;
  if (const json* u = field(chunk, "usage")) GB_ASSIGN_OR_RETURN(out.usage, read_usage(*u));
  const json* choices = nullptr;
  GB_ASSIGN_OR_RETURN(choices, choices_of(chunk));
  if (choices == nullptr || choices->empty()) return out;  // e.g. the usage chunk
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return wrong_type("choices[0]", "an object");
  GB_TRY(read_string(field(choice, "finish_reason"), "choices[0].finish_reason", out.finish_reason));
  std::string text;
  if (chat) {
    const json* delta = field(choice, "delta");
    if (delta != nullptr && !delta->is_object()) return wrong_type("choices[0].delta", "an object");
    if (delta != nullptr) GB_TRY(read_string(field(*delta, "content"), "choices[0].delta.content", text));
  } else {
    GB_TRY(read_string(field(choice, "text"), "choices[0].text", text));
  }
  GB_ASSIGN_OR_RETURN(out.tokens, logprob_tokens(field(choice, "logprobs"), "choices[0].logprobs"));
  if (out.tokens.empty()) {
    if (!text.empty()) out.tokens.push_back({text, "", kNaN, {}, 0.0});
    return out;
  }
  std::string joined;
  for (const RemoteToken& t : out.tokens) joined += t.token;
  if (joined == text) {
    for (RemoteToken& t : out.tokens) t.text = t.token;
  } else {
    out.tokens.back().text = text;
  }
  return out;
}

Result<std::vector<RemoteChoice>> parse_completion(std::string_view body, int n) {
  json answer;
  GB_ASSIGN_OR_RETURN(answer, parse_object(body, "the answer"));
  const json* choices = nullptr;
  GB_ASSIGN_OR_RETURN(choices, choices_of(answer));
  const size_t num_choices = choices == nullptr ? 0 : choices->size();
  if (n < 1 || num_choices != static_cast<size_t>(n))
    return make_error(std::to_string(num_choices) + " choices for n = " + std::to_string(n) +
                      " (the server does not support n)");
  std::vector<RemoteChoice> out(static_cast<size_t>(n));
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (size_t i = 0; i < num_choices; ++i) {
    const json& c = (*choices)[i];
    const std::string where = at("choices", i);
    if (!c.is_object()) return wrong_type(where, "an object");
    int index = static_cast<int>(i);
    GB_TRY(read_count(field(c, "index"), at(where, "index"), index));
    if (index >= n) return make_error(at(where, "index") + " = " + std::to_string(index) + " is out of range for n = " +
                                      std::to_string(n));
    if (seen[static_cast<size_t>(index)]) return make_error("two choices have index " + std::to_string(index));
    seen[static_cast<size_t>(index)] = true;
    RemoteChoice& choice = out[static_cast<size_t>(index)];
    GB_TRY(read_string(field(c, "text"), at(where, "text"), choice.text));
    GB_TRY(read_string(field(c, "finish_reason"), at(where, "finish_reason"), choice.finish_reason));
    GB_ASSIGN_OR_RETURN(choice.tokens, logprob_tokens(field(c, "logprobs"), at(where, "logprobs")));
    for (RemoteToken& t : choice.tokens) t.text = t.token;
  }
  return out;
}

Result<std::vector<RemoteScoredToken>> parse_scored_prompt(std::string_view body) {
  json answer;
  GB_ASSIGN_OR_RETURN(answer, parse_object(body, "the echo answer"));
  const json* choices = nullptr;
  GB_ASSIGN_OR_RETURN(choices, choices_of(answer));
  if (choices == nullptr || choices->empty()) return make_error("the echo answer has no choices");
  if (!(*choices)[0].is_object()) return wrong_type("choices[0]", "an object");
  std::vector<RemoteToken> tokens;
  GB_ASSIGN_OR_RETURN(tokens, logprob_tokens(field((*choices)[0], "logprobs"), "choices[0].logprobs"));
  if (tokens.size() < 2)
    return make_error("no prompt logprobs came back for echo: the server does not support scoring "
                      "(echo + logprobs with max_tokens 0)");
  std::vector<RemoteScoredToken> out;
  for (RemoteToken& t : tokens) {
    RemoteScoredToken s{std::move(t.token), std::nullopt, std::move(t.top)};
    if (!std::isnan(t.logprob)) s.logprob = t.logprob;
    out.push_back(std::move(s));
  }
  if (std::none_of(out.begin() + 1, out.end(), [](const RemoteScoredToken& s) { return s.logprob.has_value(); }))
    return make_error("the prompt was echoed without logprobs: the server does not support scoring");
  return out;
}

std::string parse_error_message(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  if (const json* e = field(j, "error"))
    if (auto text = error_text(*e)) return *text;
  return body.size() > 300 ? std::string(body.substr(0, 300)) + "..." : std::string(body);
}

}  // namespace gb::server
