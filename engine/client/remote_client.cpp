#include "client/remote_client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gb::server {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// "http://host:8080/v1" -> {"http://host:8080", ""}; "https://h/proxy/v1/" -> {"https://h", "/proxy"}.
Result<std::pair<std::string, std::string>> split_url(std::string url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0))
    return make_error("remote URL '" + url + "' must start with http:// or https://");
  while (!url.empty() && url.back() == '/') url.pop_back();
  const size_t path = url.find('/', scheme + 3);
  std::string base = path == std::string::npos ? url : url.substr(0, path);
  std::string prefix = path == std::string::npos ? std::string() : url.substr(path);
  if (prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0) prefix.resize(prefix.size() - 3);
  return std::make_pair(base, prefix);
}

// The sampling fields of a request body: OpenAI's, plus Glassbox's extra
// samplers only when on (vLLM and llama-server accept top_k, min_p and
// repetition_penalty too).
void add_sampling(json& body, const SamplerSettings& s, int max_tokens) {
  body["max_tokens"] = max_tokens;
  body["temperature"] = s.temperature;
  body["top_p"] = s.top_p;
  body["seed"] = s.seed;
  body["presence_penalty"] = s.presence_penalty;
  body["frequency_penalty"] = s.frequency_penalty;
  if (!s.stop_strings.empty()) body["stop"] = s.stop_strings;
  if (s.top_k > 0) body["top_k"] = s.top_k;
  if (s.min_p > 0.0f) body["min_p"] = s.min_p;
  if (s.repeat_penalty != 1.0f) body["repetition_penalty"] = s.repeat_penalty;
  // Names Glassbox and llama-server share; vLLM ignores those it lacks.
  if (s.typical_p < 1.0f) body["typical_p"] = s.typical_p;
  if (s.dry.multiplier > 0.0f) {
    body["dry_multiplier"] = s.dry.multiplier;
    body["dry_base"] = s.dry.base;
    body["dry_allowed_length"] = s.dry.allowed_length;
    body["dry_penalty_last_n"] = s.dry.penalty_last_n;
  }
  if (s.xtc.probability > 0.0f) {
    body["xtc_probability"] = s.xtc.probability;
    body["xtc_threshold"] = s.xtc.threshold;
  }
}

std::vector<std::pair<std::string, float>> sorted_top(std::vector<std::pair<std::string, float>> top) {
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return top;
}

float logprob_of(const json& value) { return value.is_number() ? value.get<float>() : kNaN; }

// The reported tokens of a completions `logprobs` object
// ({"tokens", "token_logprobs", "top_logprobs": [{token: logprob}]}).
std::vector<RemoteToken> completion_logprob_tokens(const json& lp) {
  std::vector<RemoteToken> out;
  if (!lp.is_object() || !lp.contains("tokens") || !lp["tokens"].is_array()) return out;
  const json& tokens = lp["tokens"];
  const json empty = json::array();
  const json& values = lp.contains("token_logprobs") && lp["token_logprobs"].is_array() ? lp["token_logprobs"] : empty;
  const json& tops = lp.contains("top_logprobs") && lp["top_logprobs"].is_array() ? lp["top_logprobs"] : empty;
  for (size_t i = 0; i < tokens.size(); ++i) {
    RemoteToken t;
    t.token = tokens[i].is_string() ? tokens[i].get<std::string>() : std::string();
    t.logprob = i < values.size() ? logprob_of(values[i]) : kNaN;
    if (i < tops.size() && tops[i].is_object())
      for (const auto& [token, logprob] : tops[i].items()) t.top.emplace_back(token, logprob_of(logprob));
    t.top = sorted_top(std::move(t.top));
    out.push_back(std::move(t));
  }
  return out;
}

// The reported tokens of a chat `logprobs` object ({"content": [{"token",
// "logprob", "top_logprobs": [{"token", "logprob"}]}]}).
std::vector<RemoteToken> chat_logprob_tokens(const json& lp) {
  std::vector<RemoteToken> out;
  if (!lp.is_object() || !lp.contains("content") || !lp["content"].is_array()) return out;
  for (const json& entry : lp["content"]) {
    if (!entry.is_object()) continue;
    RemoteToken t;
    t.token = entry.value("token", "");
    t.logprob = entry.contains("logprob") ? logprob_of(entry["logprob"]) : kNaN;
    if (entry.contains("top_logprobs") && entry["top_logprobs"].is_array())
      for (const json& alt : entry["top_logprobs"])
        if (alt.is_object()) t.top.emplace_back(alt.value("token", ""), alt.contains("logprob") ? logprob_of(alt["logprob"]) : kNaN);
    t.top = sorted_top(std::move(t.top));
    out.push_back(std::move(t));
  }
  return out;
}

// Either shape: llama-server answers /v1/completions with chat's
// {"content": [...]} logprobs, so the shape is read from the object itself.
std::vector<RemoteToken> logprob_tokens(const json& lp) {
  if (lp.is_object() && lp.contains("content")) return chat_logprob_tokens(lp);
  return completion_logprob_tokens(lp);
}

// The tokens of one streamed chunk's choice. With logprobs each reported token
// is one RemoteToken; their strings give the text when they spell it exactly,
// else the chunk's text goes with the last one. Without, the chunk's text is
// one token.
std::vector<RemoteToken> tokens_of_chunk(const json& choice, bool chat, double t_ms) {
  std::string text;
  if (chat && choice.contains("delta") && choice["delta"].is_object() && choice["delta"].contains("content") &&
      choice["delta"]["content"].is_string())
    text = choice["delta"]["content"].get<std::string>();
  if (!chat && choice.contains("text") && choice["text"].is_string()) text = choice["text"].get<std::string>();
  const json lp = choice.contains("logprobs") ? choice["logprobs"] : json();
  std::vector<RemoteToken> out = logprob_tokens(lp);
  if (out.empty()) {
    if (!text.empty()) out.push_back({text, "", kNaN, {}, t_ms});
    return out;
  }
  std::string joined;
  for (RemoteToken& t : out) {
    t.t_ms = t_ms;
    joined += t.token;
  }
  if (joined == text) {
    for (RemoteToken& t : out) t.text = t.token;
  } else {
    out.back().text = text;
  }
  return out;
}

std::string error_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return body.size() > 300 ? body.substr(0, 300) + "..." : body;
}

}  // namespace

std::map<std::string, double> parse_prometheus_text(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    // "name{labels} value [timestamp]": the value follows the labels' closing brace.
    const size_t brace = line.find('}');
    const size_t name_end = brace != std::string::npos ? brace + 1 : line.find(' ');
    if (name_end == std::string::npos || name_end >= line.size()) continue;
    std::istringstream rest(line.substr(name_end));
    std::string value;
    rest >> value;
    try {
      out[line.substr(0, name_end)] = std::stod(value);
    } catch (const std::exception&) {
    }
  }
  return out;
}

struct RemoteClient::Impl {
  std::unique_ptr<httplib::Client> http;
  std::string prefix;  // path before /v1
  std::string base;    // scheme://host:port + prefix, for messages ("base/v1/completions ...")
  RemoteOptions options;

  Result<json> post_json(const std::string& path, const json& body) {
    auto r = http->Post(prefix + path, body.dump(), "application/json");
    if (!r) return make_error(base + path + ": " + httplib::to_string(r.error()));
    if (r->status != 200)
      return make_error(base + path + " answered HTTP " + std::to_string(r->status) + ": " + error_message(r->body));
    json j = json::parse(r->body, nullptr, false);
    if (!j.is_object()) return make_error(base + path + ": the answer is not a JSON object");
    return j;
  }
};

RemoteClient::RemoteClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteClient::~RemoteClient() = default;

const RemoteOptions& RemoteClient::options() const { return impl_->options; }

void RemoteClient::abort() { impl_->http->stop(); }

Result<std::unique_ptr<RemoteClient>> RemoteClient::connect(const RemoteOptions& options) {
  auto parts = split_url(options.url);
  if (!parts) return parts.error();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->prefix = parts->second;
  impl->base = parts->first + parts->second;
  impl->http = std::make_unique<httplib::Client>(parts->first);
  if (!impl->http->is_valid()) return make_error("remote URL '" + options.url + "' is not usable");
  impl->http->set_read_timeout(options.timeout_s, 0);
  impl->http->set_connection_timeout(10, 0);
  if (!options.api_key.empty()) impl->http->set_bearer_token_auth(options.api_key);
  if (!options.probe && !options.model.empty()) {
    std::unique_ptr<RemoteClient> client(new RemoteClient(std::move(impl)));
    client->model_ = options.model;
    return client;
  }
  auto r = impl->http->Get(impl->prefix + "/v1/models");
  if (!r) return make_error(options.url + ": cannot connect (" + httplib::to_string(r.error()) + ")");
  if (r->status != 200)
    return make_error(impl->base + "/v1/models answered HTTP " + std::to_string(r->status) + ": " + error_message(r->body));
  const std::string base = impl->base;
  std::unique_ptr<RemoteClient> client(new RemoteClient(std::move(impl)));
  client->model_ = options.model;
  if (client->model_.empty()) {
    const json models = json::parse(r->body, nullptr, false);
    if (!models.is_object() || !models.contains("data") || !models["data"].is_array() || models["data"].empty() ||
        !models["data"][0].contains("id") || !models["data"][0]["id"].is_string())
      return make_error(base + "/v1/models lists no model");
    client->model_ = models["data"][0]["id"].get<std::string>();
  }
  return client;
}

Result<RemoteResult> RemoteClient::complete(const std::string& prompt, const SamplerSettings& sampling, int max_tokens,
                                            const TokenCallback& on_token) {
  json body = {{"model", model_}, {"prompt", prompt}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  add_sampling(body, sampling, max_tokens);
  if (impl_->options.top_logprobs > 0) body["logprobs"] = impl_->options.top_logprobs;
  return stream("/v1/completions", body.dump(), false, on_token);
}

Result<RemoteResult> RemoteClient::chat(const std::vector<ChatMessage>& messages, const SamplerSettings& sampling,
                                        int max_tokens, const std::string& template_kwargs_json,
                                        const TokenCallback& on_token) {
  json list = json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", model_}, {"messages", list}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  add_sampling(body, sampling, max_tokens);
  if (impl_->options.top_logprobs > 0) {
    body["logprobs"] = true;
    body["top_logprobs"] = impl_->options.top_logprobs;
  }
  if (!template_kwargs_json.empty()) {
    const json kwargs = json::parse(template_kwargs_json, nullptr, false);
    if (!kwargs.is_object()) return make_error("template keywords must be a JSON object: " + template_kwargs_json);
    body["chat_template_kwargs"] = kwargs;
  }
  return stream("/v1/chat/completions", body.dump(), true, on_token);
}

Result<RemoteResult> RemoteClient::stream(const std::string& path, const std::string& body, bool chat,
                                          const TokenCallback& on_token) {
  RemoteResult result;
  std::string buffer, error;
  bool cancelled = false;
  double first_ms = -1.0, last_ms = 0.0;
  int num_tokens = 0;
  const Clock::time_point t0 = Clock::now();
  // One server-sent-events line; false stops reading.
  const auto on_line = [&](const std::string& line) {
    if (line.rfind("data:", 0) != 0) return true;
    const std::string data = line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
    if (data == "[DONE]") return true;
    const json chunk = json::parse(data, nullptr, false);
    if (!chunk.is_object()) return true;
    if (chunk.contains("error")) {
      error = error_message(data);
      return false;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      const json& u = chunk["usage"];
      result.num_prompt_tokens = u.value("prompt_tokens", 0);
      result.num_generated = u.value("completion_tokens", 0);
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
        result.num_cached_tokens = u["prompt_tokens_details"].value("cached_tokens", 0);
    }
    if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) return true;
    const json& choice = chunk["choices"][0];
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      result.finish_reason = choice["finish_reason"].get<std::string>();
    const double t_ms = ms_since(t0);
    for (const RemoteToken& t : tokens_of_chunk(choice, chat, t_ms)) {
      if (first_ms < 0) first_ms = t_ms;
      last_ms = t_ms;
      ++num_tokens;
      result.text += t.text;
      if (!on_token(t)) return !(cancelled = true);
    }
    return true;
  };
  httplib::Request req;
  req.method = "POST";
  req.path = impl_->prefix + path;
  req.set_header("Content-Type", "application/json");
  req.body = body;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    buffer.append(data, size);
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!on_line(line)) return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error http_error = httplib::Error::Success;
  const bool sent = impl_->http->send(req, res, http_error);
  if (!error.empty()) return make_error(impl_->options.url + ": " + error);
  if (!sent && !cancelled) return make_error(impl_->base + path + ": " + httplib::to_string(http_error));
  if (res.status != 200 && !cancelled)
    return make_error(impl_->base + path + " answered HTTP " + std::to_string(res.status) + ": " + error_message(buffer));
  if (cancelled) result.finish_reason = "cancelled";
  result.ttft_ms = first_ms < 0 ? 0.0 : first_ms;
  result.tpot_ms = num_tokens > 1 ? (last_ms - first_ms) / (num_tokens - 1) : 0.0;
  result.e2e_ms = ms_since(t0);
  if (result.num_generated == 0) result.num_generated = num_tokens;  // no usage chunk
  return result;
}

Result<std::vector<RemoteChoice>> RemoteClient::complete_n(const std::string& prompt, const SamplerSettings& sampling,
                                                           int max_tokens, int n) {
  json body = {{"model", model_}, {"prompt", prompt}, {"n", n}, {"stream", false}};
  add_sampling(body, sampling, max_tokens);
  if (impl_->options.top_logprobs > 0) body["logprobs"] = impl_->options.top_logprobs;
  auto answer = impl_->post_json("/v1/completions", body);
  if (!answer) return answer.error();
  const json& choices = (*answer)["choices"];
  if (!choices.is_array() || static_cast<int>(choices.size()) != n)
    return make_error(impl_->options.url + " answered " + std::to_string(choices.is_array() ? choices.size() : 0) +
                      " choices for n = " + std::to_string(n) + " (the server does not support n)");
  std::vector<RemoteChoice> out(static_cast<size_t>(n));
  for (const json& c : choices) {
    const int index = c.value("index", 0);
    if (index < 0 || index >= n) return make_error(impl_->options.url + ": a choice index is out of range");
    RemoteChoice& choice = out[static_cast<size_t>(index)];
    choice.text = c.value("text", "");
    choice.finish_reason = c.contains("finish_reason") && c["finish_reason"].is_string() ? c["finish_reason"].get<std::string>() : "";
    choice.tokens = logprob_tokens(c.contains("logprobs") ? c["logprobs"] : json());
    for (RemoteToken& t : choice.tokens) t.text = t.token;
  }
  return out;
}

Result<std::vector<RemoteScoredToken>> RemoteClient::score(const std::string& text, int top_n) {
  const json body = {{"model", model_}, {"prompt", text}, {"echo", true}, {"logprobs", top_n},
                     {"max_tokens", 0}, {"temperature", 0}};
  auto answer = impl_->post_json("/v1/completions", body);
  if (!answer) return make_error(answer.error().message + " (scoring needs echo + logprobs with max_tokens 0)");
  const json& choices = (*answer)["choices"];
  if (!choices.is_array() || choices.empty())
    return make_error(impl_->options.url + ": the echo answer has no choices");
  const std::vector<RemoteToken> tokens =
      logprob_tokens(choices[0].contains("logprobs") ? choices[0]["logprobs"] : json());
  if (tokens.size() < 2)
    return make_error(impl_->options.url + " returned no prompt logprobs for echo: the server does not support "
                      "scoring (echo + logprobs with max_tokens 0)");
  std::vector<RemoteScoredToken> out;
  for (const RemoteToken& t : tokens) {
    RemoteScoredToken s{t.token, std::nullopt, t.top};
    if (!std::isnan(t.logprob)) s.logprob = t.logprob;
    out.push_back(std::move(s));
  }
  if (std::none_of(out.begin() + 1, out.end(), [](const RemoteScoredToken& s) { return s.logprob.has_value(); }))
    return make_error(impl_->options.url + " echoed the prompt without logprobs: the server does not support scoring");
  return out;
}

Result<std::map<std::string, double>> RemoteClient::metrics() {
  auto r = impl_->http->Get(impl_->prefix + "/metrics");
  if (!r) return make_error(impl_->base + "/metrics: " + httplib::to_string(r.error()));
  if (r->status != 200) return make_error(impl_->base + "/metrics answered HTTP " + std::to_string(r->status));
  return parse_prometheus_text(r->body);
}

}  // namespace gb::server
