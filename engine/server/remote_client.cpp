#include "server/remote_client.h"

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

// The request body: OpenAI's fields, plus Glassbox's extra samplers only when on
// (vLLM and llama-server accept top_k, min_p and repetition_penalty too).
json completion_body(const std::string& model, const std::string& prompt, const SamplerSettings& s, int max_tokens,
                     int top_logprobs) {
  json body = {{"model", model}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}, {"temperature", s.temperature}, {"top_p", s.top_p},
               {"seed", s.seed}, {"presence_penalty", s.presence_penalty}, {"frequency_penalty", s.frequency_penalty}};
  if (top_logprobs > 0) body["logprobs"] = top_logprobs;
  if (!s.stop_strings.empty()) body["stop"] = s.stop_strings;
  if (s.top_k > 0) body["top_k"] = s.top_k;
  if (s.min_p > 0.0f) body["min_p"] = s.min_p;
  if (s.repeat_penalty != 1.0f) body["repetition_penalty"] = s.repeat_penalty;
  return body;
}

// The tokens of one completions chunk. With logprobs each reported token is one
// RemoteToken; their strings give the text when they spell it exactly, else the
// chunk's text goes with the last one.
std::vector<RemoteToken> tokens_of_chunk(const json& choice, double t_ms) {
  const std::string text = choice.value("text", "");
  const json* lp = choice.contains("logprobs") && choice["logprobs"].is_object() ? &choice["logprobs"] : nullptr;
  std::vector<RemoteToken> out;
  if (lp == nullptr || !lp->contains("tokens") || (*lp)["tokens"].empty()) {
    if (!text.empty()) out.push_back({text, "", std::numeric_limits<float>::quiet_NaN(), {}, t_ms});
    return out;
  }
  std::string joined;
  for (size_t i = 0; i < (*lp)["tokens"].size(); ++i) {
    RemoteToken t;
    t.token = (*lp)["tokens"][i].get<std::string>();
    const json& value = (*lp)["token_logprobs"][i];
    t.logprob = value.is_number() ? value.get<float>() : std::numeric_limits<float>::quiet_NaN();
    if (lp->contains("top_logprobs") && (*lp)["top_logprobs"][i].is_object())
      for (const auto& [token, logprob] : (*lp)["top_logprobs"][i].items()) t.top.emplace_back(token, logprob.get<float>());
    std::sort(t.top.begin(), t.top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    t.t_ms = t_ms;
    joined += t.token;
    out.push_back(std::move(t));
  }
  if (joined == text) {
    for (RemoteToken& t : out) t.text = t.token;
  } else {
    out.back().text = text;
  }
  return out;
}

}  // namespace

struct RemoteClient::Impl {
  std::unique_ptr<httplib::Client> http;
  std::string prefix;  // path before /v1
  RemoteOptions options;
};

RemoteClient::RemoteClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteClient::~RemoteClient() = default;

Result<std::unique_ptr<RemoteClient>> RemoteClient::connect(const RemoteOptions& options) {
  auto parts = split_url(options.url);
  if (!parts) return parts.error();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->prefix = parts->second;
  impl->http = std::make_unique<httplib::Client>(parts->first);
  if (!impl->http->is_valid()) return make_error("remote URL '" + options.url + "' is not usable");
  impl->http->set_read_timeout(options.timeout_s, 0);
  impl->http->set_connection_timeout(10, 0);
  if (!options.api_key.empty()) impl->http->set_bearer_token_auth(options.api_key);
  auto r = impl->http->Get(impl->prefix + "/v1/models");
  if (!r) return make_error(options.url + ": cannot connect (" + httplib::to_string(r.error()) + ")");
  if (r->status != 200) return make_error(options.url + "/v1/models answered HTTP " + std::to_string(r->status) + ": " + r->body);
  std::unique_ptr<RemoteClient> client(new RemoteClient(std::move(impl)));
  client->model_ = options.model;
  if (client->model_.empty()) {
    const json models = json::parse(r->body, nullptr, false);
    if (!models.is_object() || !models.contains("data") || models["data"].empty() || !models["data"][0].contains("id"))
      return make_error(options.url + "/v1/models lists no model");
    client->model_ = models["data"][0]["id"].get<std::string>();
  }
  return client;
}

Result<RemoteResult> RemoteClient::complete(const std::string& prompt, const SamplerSettings& sampling, int max_tokens,
                                            const std::function<bool(const RemoteToken&)>& on_token) {
  RemoteResult result;
  std::string buffer, error;
  bool cancelled = false;
  double first_ms = -1.0, last_ms = 0.0;
  int num_tokens = 0;
  const Clock::time_point t0 = Clock::now();
  // One server-sent-events line; false stops reading.
  const auto on_line = [&](const std::string& line) {
    if (line.rfind("data: ", 0) != 0 || line.compare(6, std::string::npos, "[DONE]") == 0) return true;
    const json chunk = json::parse(line.substr(6), nullptr, false);
    if (!chunk.is_object()) return true;
    if (chunk.contains("error")) {
      error = chunk["error"].value("message", chunk["error"].dump());
      return false;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      const json& u = chunk["usage"];
      result.num_prompt_tokens = u.value("prompt_tokens", 0);
      result.num_generated = u.value("completion_tokens", 0);
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
        result.num_cached_tokens = u["prompt_tokens_details"].value("cached_tokens", 0);
    }
    if (!chunk.contains("choices") || chunk["choices"].empty()) return true;
    const json& choice = chunk["choices"][0];
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      result.finish_reason = choice["finish_reason"].get<std::string>();
    const double t_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    for (const RemoteToken& t : tokens_of_chunk(choice, t_ms)) {
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
  req.path = impl_->prefix + "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = completion_body(model_, prompt, sampling, max_tokens, impl_->options.top_logprobs).dump();
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
  if (!sent && !cancelled) return make_error(impl_->options.url + ": " + httplib::to_string(http_error));
  if (res.status != 200 && !cancelled)
    return make_error(impl_->options.url + " answered HTTP " + std::to_string(res.status) + ": " + buffer);
  if (cancelled) result.finish_reason = "cancelled";
  result.ttft_ms = first_ms < 0 ? 0.0 : first_ms;
  result.tpot_ms = num_tokens > 1 ? (last_ms - first_ms) / (num_tokens - 1) : 0.0;
  if (result.num_generated == 0) result.num_generated = num_tokens;  // no usage chunk
  return result;
}

Result<std::map<std::string, double>> RemoteClient::metrics() {
  auto r = impl_->http->Get(impl_->prefix + "/metrics");
  if (!r) return make_error(impl_->options.url + "/metrics: " + httplib::to_string(r.error()));
  if (r->status != 200) return make_error(impl_->options.url + "/metrics answered HTTP " + std::to_string(r->status));
  std::map<std::string, double> out;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
    }
  }
  return out;
}

}  // namespace gb::server
