#include "client/remote_client.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>

#include "client/remote_response.h"

namespace gb::server {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A request body as text. Strings the caller gave (a prompt read from a file,
// stop strings) may hold invalid UTF-8, which json::dump() throws on: such
// bytes are sent as U+FFFD instead.
std::string body_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

// "http://host:8080/v1" -> {"http://host:8080", ""}; "https://h/proxy/v1/" -> {"https://h", "/proxy"}.
// The port is checked here because httplib's Client reads it with std::stoi,
// which throws past INT_MAX; the length because it matches the host with
// std::regex, which recurses once per character.
Result<std::pair<std::string, std::string>> split_url(std::string url) {
  constexpr size_t kMaxUrlBytes = 2048;
  if (url.size() > kMaxUrlBytes) return make_error("remote URL is longer than 2048 characters");
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0))
    return make_error("remote URL '" + url + "' must start with http:// or https://");
  while (!url.empty() && url.back() == '/') url.pop_back();
  const size_t path = url.find('/', scheme + 3);
  std::string base = path == std::string::npos ? url : url.substr(0, path);
  std::string prefix = path == std::string::npos ? std::string() : url.substr(path);
  const size_t bracket = base.rfind(']');  // an IPv6 host: [::1]:8080
  if (const size_t colon = base.find(':', bracket == std::string::npos ? scheme + 3 : bracket);
      colon != std::string::npos) {
    const std::string port = base.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return make_error("remote URL '" + url + "' has a bad port '" + port + "' (1 to 65535)");
  }
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

  // The body of a 200 answer to POST `path`, else an error naming the path.
  Result<std::string> post(const std::string& path, const json& body) {
    auto r = http->Post(prefix + path, body_text(body), "application/json");
    if (!r) return make_error(base + path + ": " + httplib::to_string(r.error()));
    if (r->status != 200)
      return make_error(base + path + " answered HTTP " + std::to_string(r->status) + ": " + parse_error_message(r->body));
    return std::move(r->body);
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
    return make_error(impl->base + "/v1/models answered HTTP " + std::to_string(r->status) + ": " +
                      parse_error_message(r->body));
  const std::string base = impl->base;
  std::unique_ptr<RemoteClient> client(new RemoteClient(std::move(impl)));
  client->model_ = options.model;
  if (client->model_.empty()) {
    auto models = parse_models_list(r->body);
    if (!models) return make_error(base + "/v1/models: " + models.error().message);
    client->model_ = models->front();
  }
  return client;
}

Result<RemoteResult> RemoteClient::complete(const std::string& prompt, const SamplerSettings& sampling, int max_tokens,
                                            const TokenCallback& on_token) {
  json body = {{"model", model_}, {"prompt", prompt}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  add_sampling(body, sampling, max_tokens);
  if (impl_->options.top_logprobs > 0) body["logprobs"] = impl_->options.top_logprobs;
  return stream("/v1/completions", body_text(body), false, on_token);
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
    json kwargs = json::parse(template_kwargs_json, nullptr, false);
    if (!kwargs.is_object()) return make_error("template keywords must be a JSON object: " + template_kwargs_json);
    body["chat_template_kwargs"] = std::move(kwargs);
  }
  return stream("/v1/chat/completions", body_text(body), true, on_token);
}

Result<RemoteResult> RemoteClient::stream(const std::string& path, const std::string& body, bool chat,
                                          const TokenCallback& on_token) {
  RemoteResult result;
  std::string buffer, error;
  bool cancelled = false;
  double first_ms = -1.0, last_ms = 0.0;
  int num_tokens = 0;
  const Clock::time_point t0 = Clock::now();
  // One server-sent-events line; false stops reading. A chunk that does not
  // parse ends the request with its error: dropping it would lose its text.
  const auto on_line = [&](const std::string& line) {
    const std::optional<std::string_view> data = sse_data(line);
    if (!data) return true;
    auto chunk = parse_stream_chunk(*data, chat);
    if (!chunk) {
      error = chunk.error().message;
      return false;
    }
    if (chunk->usage) {
      result.num_prompt_tokens = chunk->usage->num_prompt_tokens;
      result.num_generated = chunk->usage->num_generated;
      result.num_cached_tokens = chunk->usage->num_cached_tokens;
    }
    if (!chunk->finish_reason.empty()) result.finish_reason = chunk->finish_reason;
    const double t_ms = ms_since(t0);
    for (RemoteToken& t : chunk->tokens) {
      t.t_ms = t_ms;
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
  if (!error.empty()) return make_error(impl_->base + path + ": " + error);
  if (!sent && !cancelled) return make_error(impl_->base + path + ": " + httplib::to_string(http_error));
  if (res.status != 200 && !cancelled)
    return make_error(impl_->base + path + " answered HTTP " + std::to_string(res.status) + ": " +
                      parse_error_message(buffer));
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
  auto answer = impl_->post("/v1/completions", body);
  if (!answer) return answer.error();
  auto choices = parse_completion(*answer, n);
  if (!choices) return make_error(impl_->base + "/v1/completions: " + choices.error().message);
  return choices;
}

Result<std::vector<RemoteScoredToken>> RemoteClient::score(const std::string& text, int top_n) {
  const json body = {{"model", model_}, {"prompt", text}, {"echo", true}, {"logprobs", top_n},
                     {"max_tokens", 0}, {"temperature", 0}};
  auto answer = impl_->post("/v1/completions", body);
  if (!answer) return make_error(answer.error().message + " (scoring needs echo + logprobs with max_tokens 0)");
  auto scored = parse_scored_prompt(*answer);
  if (!scored) return make_error(impl_->base + "/v1/completions: " + scored.error().message);
  return scored;
}

Result<std::map<std::string, double>> RemoteClient::metrics() {
  auto r = impl_->http->Get(impl_->prefix + "/metrics");
  if (!r) return make_error(impl_->base + "/metrics: " + httplib::to_string(r.error()));
  if (r->status != 200) return make_error(impl_->base + "/metrics answered HTTP " + std::to_string(r->status));
  return parse_prometheus_text(r->body);
}

}  // namespace gb::server
