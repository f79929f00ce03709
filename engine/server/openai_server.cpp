#include "server/openai_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "backend/backend.h"
#include "core/sha256.h"
#include "runtime/chat_request.h"
#include "runtime/make_backend.h"
#include "runtime/text_scorer.h"
#include "server/http_server.h"
#include "server/inspect_request.h"
#include "server/openai_response.h"
#include "template/chat_template.h"

namespace gb::server {

namespace {

using nlohmann::json;
constexpr auto kPollInterval = std::chrono::milliseconds(50);

http::Response error_reply(const ApiError& e) {
  http::Response res;
  res.status = e.status;
  if (e.retry_after_s > 0) res.set("Retry-After", std::to_string(e.retry_after_s));
  res.set("Content-Type", "application/json");
  res.body = api_error_json(e);
  return res;
}

http::Response json_reply(const std::string& body, const char* content_type = "application/json") {
  http::Response res;
  res.set("Content-Type", content_type);
  res.body = body;
  return res;
}

std::string bearer_token(const http::Request& req) {
  const std::string auth = req.header("Authorization");
  const std::string prefix = "Bearer ";
  return auth.compare(0, prefix.size(), prefix) == 0 ? auth.substr(prefix.size()) : std::string();
}

// Compares without stopping at the first difference, so timing does not tell
// how much of a guessed key was right.
bool same_key(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

// One generation's answer, written by its worker thread as the engine's events arrive.
struct Exchange {
  ServeHub* hub = nullptr;
  std::shared_ptr<RequestChannel> channel;
  std::vector<RequestId> ids;
  ResponseBuilder builder;
  bool stream = false;
};

// Pulls the request's events and writes them until the answer ends; a client
// that goes away (or a stopping server) has what still runs cancelled at once,
// so its KV blocks are freed.
void write_exchange(Exchange& ex, http::BodyStream& out) {
  for (;;) {
    std::vector<ChoiceEvent> events;
    if (!ex.channel->wait(events, kPollInterval)) {
      if (!out.connected()) break;
      continue;
    }
    std::string text = ex.stream ? ex.builder.stream(events) : std::string();
    if (!ex.stream) ex.builder.add(events);
    const bool end = ex.builder.finished() || ex.builder.failed();
    if (end && ex.stream) text += ex.builder.stream_end();
    if (end && !ex.stream)
      text = ex.builder.failed() ? api_error_json(ApiError{500, ex.builder.error(), "server_error", "", "engine_error", 0})
                                 : ex.builder.body();
    if (!text.empty() && !out.write(text)) break;
    if (end) {
      if (ex.builder.failed()) ex.hub->cancel(ex.ids);  // the other choices, if any still run
      return;
    }
  }
  ex.hub->cancel(ex.ids);
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;  // 127.0.0.0/8, literal only
  in6_addr v6{};
  return inet_pton(AF_INET6, h.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

namespace {
// The host name of a Host header ("name:port", "[v6]:port" or bare), lower case.
std::string host_of(const std::string& header) {
  std::string h = header;
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    h = close == std::string::npos ? h : h.substr(0, close + 1);
  } else if (const size_t colon = h.rfind(':'); colon != std::string::npos && h.find(':') == colon) {
    h = h.substr(0, colon);
  }
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h;
}

bool is_wildcard_address(const std::string& host) { return host == "0.0.0.0" || host == "::" || host == "[::]"; }
}  // namespace

std::string default_model_name(const std::string& model_path) {
  return std::filesystem::path(model_path).stem().string();
}

struct OpenAiServer::Impl {
  ServeHub& hub;
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  ChatFormatter chat_formatter;  // the model's template, or a built-in fallback
  ServerConfig config;
  std::unique_ptr<http::HttpServer> http;  // made by start()
  int port = 0;
  int64_t created = 0;
  std::atomic<uint64_t> next_id{1};
  // echo + logprobs (scoring a prompt) runs teacher forcing on the handler
  // thread with a CPU backend of its own, one request at a time, so the
  // engine's KV pool is untouched.
  std::mutex scorer_mutex;
  std::unique_ptr<Backend> scorer;
  // Prompts of echo requests waiting for (or in) the scorer: they count against
  // the same queue limit as generation (ServeHub::max_queue), so an echo flood
  // gets 429 like any other.
  std::atomic<int32_t> echo_waiting{0};
  std::atomic<bool> inspect_busy{false};  // an inspection is waiting for the engine thread

  Impl(ServeHub& w, std::shared_ptr<const Model> m, std::shared_ptr<const Tokenizer> t, ServerConfig c)
      : hub(w), model(std::move(m)), tokenizer(std::move(t)),
        chat_formatter(chat_formatter_for(*model, *tokenizer)), config(std::move(c)) {
    if (config.model_name.empty()) config.model_name = default_model_name(model->path);
    created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  // The header of a request, before its body is read (check_request_head); a
  // refusal is answered at once.
  std::optional<http::Response> check(const http::Request& head) const;
  // The routes; every answer gets the CORS fields of an allowed origin.
  http::Response handle(const http::Request& req);
  http::Response route(const http::Request& req);
  http::Response handle_generate(ApiEndpoint endpoint, const http::Request& req);
  http::Response handle_inspect(const http::Request& req);
  http::Response handle_echo(const ApiRequest& r);
  std::variant<json, ApiError> echo_choice(const std::vector<TokenId>& ids, const std::string& text, int index,
                                           int top_n);
  std::variant<std::vector<ChoiceSubmission>, ApiError> plan_choices(const ApiRequest& r, const std::string& tenant) const;
  std::variant<std::vector<std::vector<TokenId>>, ApiError> prompt_ids(const ApiRequest& r) const;
  json model_json() const {
    return {{"id", config.model_name}, {"object", "model"}, {"created", created}, {"owned_by", "glassbox"},
            {"max_model_len", hub.info().max_context}};
  }
};

// Runs before the body is read: the HTTP layer closes the connection after a
// refusal (the unread body must not be taken for the next request).
std::optional<http::Response> OpenAiServer::Impl::check(const http::Request& req) const {
  auto refused = check_request_head(config, port, req);
  if (!refused) return std::nullopt;
  http::Response res = error_reply(*refused);
  if (const std::string origin = req.header("Origin"); !origin.empty() && refused->status == 401) {
    res.set("Access-Control-Allow-Origin", origin);  // an allowed origin: the browser may read the 401
    res.set("Vary", "Origin");
  }
  return res;
}

namespace {

bool origin_allowed(const ServerConfig& config, int port, const std::string& origin) {
  for (const std::string& o : config.allowed_origins)
    if (o == "*" || o == origin) return true;
  // The server's own origin (a page it served, were it to serve one).
  const std::string self_port = ":" + std::to_string(port);
  for (const char* host : {"localhost", "127.0.0.1", "[::1]"})
    if (origin == std::string("http://") + host + self_port) return true;
  return false;
}

}  // namespace

std::optional<ApiError> check_request_head(const ServerConfig& config, int port, const http::Request& req) {
  if (req.has_header("Host") && !is_wildcard_address(config.host)) {
    const std::string host = host_of(req.header("Host"));
    bool ok = is_loopback_host(host) || host == host_of(config.host) ||
              (config.host.find(':') != std::string::npos && host == "[" + config.host + "]");
    for (const std::string& h : config.allowed_hosts) ok |= host == host_of(h);
    if (!ok)
      return ApiError{403, "the Host '" + host + "' is not this server (a page re-resolving its own name to this "
                           "address is refused; allow a name with --allow-host)",
                      "invalid_request_error", "", "host_not_allowed", 0};
  }
  const std::string origin = req.header("Origin");
  if (!origin.empty() && !origin_allowed(config, port, origin))
    return ApiError{403, "requests from the web origin '" + origin + "' are not allowed (--allow-origin ORIGIN allows one)",
                    "invalid_request_error", "", "origin_not_allowed", 0};
  // A browser's CORS preflight carries no credentials: it is answered without a key.
  const bool api_path = req.path.rfind("/v1/", 0) == 0 || req.path.rfind("/glassbox/", 0) == 0;
  bool ok = config.api_keys.empty() || !api_path || req.method == "OPTIONS";
  const std::string token = bearer_token(req);
  for (const std::string& key : config.api_keys) ok |= same_key(token, key);
  if (ok) return std::nullopt;
  return ApiError{401, token.empty() ? "no API key given: send 'Authorization: Bearer KEY'" : "the API key is not valid",
                  "invalid_request_error", "", "invalid_api_key", 0};
}

http::Response OpenAiServer::Impl::handle(const http::Request& req) {
  http::Response res = route(req);
  if (const std::string origin = req.header("Origin"); !origin.empty()) {
    res.set("Access-Control-Allow-Origin", origin);  // allowed: check() refused the others
    res.set("Vary", "Origin");
  }
  return res;
}

http::Response OpenAiServer::Impl::route(const http::Request& req) {
  const std::string& path = req.path;
  if (req.method == "GET" && path == "/health") {
    if (hub.healthy()) return json_reply("{\"status\":\"ok\"}");
    return error_reply({503, "the engine is not available", "server_error", "", "unavailable", config.retry_after_s});
  }
  if (req.method == "GET" && path == "/metrics") return json_reply(hub.metrics().render(), "text/plain; version=0.0.4");
  if (req.method == "GET" && path == "/v1/models") {
    // replace: a model name with invalid UTF-8 is shown with U+FFFD, not an exception.
    const json list{{"object", "list"}, {"data", json::array({model_json()})}};
    return json_reply(list.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  static const std::string kModelPrefix = "/v1/models/";
  if (req.method == "GET" && path.size() > kModelPrefix.size() && path.rfind(kModelPrefix, 0) == 0) {
    const std::string id = path.substr(kModelPrefix.size());
    if (id == config.model_name) return json_reply(model_json().dump(-1, ' ', false, json::error_handler_t::replace));
    return error_reply({404, "the model '" + id + "' does not exist", "invalid_request_error", "model",
                        "model_not_found", 0});
  }
  if (req.method == "POST" && path == "/v1/completions") return handle_generate(ApiEndpoint::Completions, req);
  if (req.method == "POST" && path == "/v1/chat/completions") return handle_generate(ApiEndpoint::ChatCompletions, req);
  if (req.method == "POST" && path == "/glassbox/v1/inspect") return handle_inspect(req);
  // CORS preflight from an allowed origin (check() refused the others).
  if (req.method == "OPTIONS" && (path.rfind("/v1/", 0) == 0 || path.rfind("/glassbox/", 0) == 0)) {
    http::Response res;
    res.status = 204;
    res.set("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set("Access-Control-Allow-Headers", req.has_header("Access-Control-Request-Headers")
                                                ? req.header("Access-Control-Request-Headers")
                                                : std::string("Authorization, Content-Type"));
    res.set("Access-Control-Max-Age", "600");
    return res;
  }
  return error_reply({404, "unknown request URL: " + req.method + " " + path, "invalid_request_error", "", "unknown_url", 0});
}

// One inspection at a time waits for the engine thread; more get 429 (each
// one is a prefill and a lens over the whole vocabulary per layer).
http::Response OpenAiServer::Impl::handle_inspect(const http::Request& req) {
  const EngineInfo& info = hub.info();
  auto parsed = parse_inspect_request(req.body, *tokenizer, info.vocab_size, info.max_context);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_reply(*e);
  InspectRequest& r = std::get<InspectRequest>(parsed);
  if (inspect_busy.exchange(true))
    return error_reply({429, "an inspection is already running; retry when it is done", "rate_limit_error", "",
                        "inspect_busy", 1});
  Result<std::string> out = hub.inspect(std::move(r.tokens), r.position, r.options);
  inspect_busy = false;
  if (!out) return error_reply({400, out.error().message, "invalid_request_error", "", "inspect_failed", 0});
  return json_reply(*out);
}

std::variant<std::vector<std::vector<TokenId>>, ApiError> OpenAiServer::Impl::prompt_ids(const ApiRequest& r) const {
  const EngineInfo& info = hub.info();
  const int max_prompt = config.max_prompt_tokens > 0 ? std::min(config.max_prompt_tokens, info.max_context - 1)
                                                      : info.max_context - 1;
  const char* param = r.endpoint == ApiEndpoint::ChatCompletions ? "messages" : "prompt";
  std::vector<std::vector<TokenId>> prompts;
  if (r.endpoint == ApiEndpoint::ChatCompletions) {
    // The model's own chat template (built-in formats as the fallback), with
    // control tokens recognised only where the template wrote them.
    std::vector<gb::ChatMessage> messages;
    for (size_t i = 0; i < r.messages.size(); ++i) {
      const ApiMessage& m = r.messages[i];
      gb::ChatMessage message{m.role, m.content, {}, {}};
      if (!m.tool_fields_json.empty()) {
        auto fields = json_to_value(m.tool_fields_json);
        if (!fields) return bad_param("messages[" + std::to_string(i) + "]", "messages[" + std::to_string(i) + "]: " + fields.error().message);
        message.fields = std::move(*fields);
      }
      messages.push_back(std::move(message));
    }
    ChatRenderOptions options;  // chat_template_kwargs and tools: variables of the template
    if (!r.template_vars_json.empty()) {
      auto vars = json_to_value(r.template_vars_json);
      if (!vars) return bad_param("chat_template_kwargs", "chat_template_kwargs: " + vars.error().message);
      options.extra = std::move(*vars);
    }
    prompts.push_back(make_chat_request(chat_formatter, *tokenizer, messages, SamplerSettings{}, options).request.prompt_ids);
  }
  for (const PromptInput& p : r.prompts) prompts.push_back(p.is_ids ? p.ids : tokenizer->encode(p.text, true));
  for (const auto& ids : prompts) {
    if (ids.empty()) return bad_param(param, std::string(param) + " is empty");
    if (static_cast<int>(ids.size()) > max_prompt)
      return ApiError{400, "the prompt has " + std::to_string(ids.size()) + " tokens; this server accepts at most " +
                               std::to_string(max_prompt) + " (the model's context is " + std::to_string(info.max_context) + ")",
                      "invalid_request_error", param, "context_length_exceeded", 0};
  }
  return prompts;
}

std::variant<std::vector<ChoiceSubmission>, ApiError> OpenAiServer::Impl::plan_choices(const ApiRequest& r,
                                                                                      const std::string& tenant) const {
  auto prompts = prompt_ids(r);
  if (auto* e = std::get_if<ApiError>(&prompts)) return *e;
  const int context = hub.info().max_context;
  std::random_device random;
  std::vector<ChoiceSubmission> items;
  for (const auto& ids : std::get<0>(prompts)) {
    // A policy that keeps its budget as it goes (sink, h2o) may run past the context.
    const bool past_context = kv_policy_row(r.kv_policy.kind).evicts_while_running;
    const int room = (past_context ? kMaxEvictingPositions : context) - static_cast<int>(ids.size());
    int max_tokens = r.max_tokens.value_or(r.endpoint == ApiEndpoint::Completions ? std::min(16, room) : room);
    if (max_tokens > room)
      return ApiError{400, "the model's context is " + std::to_string(context) + " tokens, but " + std::to_string(ids.size()) +
                               " prompt tokens + max_tokens " + std::to_string(max_tokens) + " exceed it",
                      "invalid_request_error", "max_tokens", "context_length_exceeded", 0};
    for (int j = 0; j < r.n; ++j) {
      ChoiceSubmission c;
      c.choice = static_cast<int>(items.size());
      c.logprobs = r.logprobs;
      c.top_logprobs = r.top_logprobs;
      c.request.prompt_ids = ids;
      c.request.sampling = r.sampling;
      c.request.sampling.max_tokens = max_tokens;
      c.request.sampling.seed = r.seed ? *r.seed + static_cast<uint64_t>(c.choice)
                                       : (static_cast<uint64_t>(random()) << 32) ^ random();
      c.request.sampling.top_n_record = r.logprobs ? std::max(1, r.top_logprobs) : config.record_top_n;
      c.request.ignore_eos = r.ignore_eos;
      c.request.kv_policy = r.kv_policy;
      c.request.isolation.tenant = tenant;
      items.push_back(std::move(c));
    }
  }
  return items;
}

http::Response OpenAiServer::Impl::handle_generate(ApiEndpoint endpoint, const http::Request& req) {
  ParseLimits limits;
  limits.vocab_size = hub.info().vocab_size;
  limits.max_n = config.max_n;
  limits.max_prompts = config.max_prompts;
  auto parsed = parse_api_request(endpoint, req.body, limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_reply(*e);
  const ApiRequest& r = std::get<ApiRequest>(parsed);
  if (!r.model.empty() && r.model != config.model_name && r.model != model->path)
    return error_reply({404, "the model '" + r.model + "' does not exist (this server serves '" + config.model_name + "')",
                        "invalid_request_error", "model", "model_not_found", 0});
  if (r.echo) return handle_echo(r);
  // Tenants never share prefix-cache blocks: the key's hash, never the key, goes into the trace.
  const std::string token = bearer_token(req);
  const std::string tenant = token.empty() ? std::string() : "key:" + sha256_hex(token).substr(0, 16);
  auto planned = plan_choices(r, tenant);
  if (auto* e = std::get_if<ApiError>(&planned)) return error_reply(*e);
  auto& items = std::get<std::vector<ChoiceSubmission>>(planned);
  const int num_choices = static_cast<int>(items.size());

  auto channel = std::make_shared<RequestChannel>();
  SubmitOutcome outcome = hub.submit(std::move(items), channel);
  if (outcome.status == SubmitStatus::QueueFull)
    return error_reply({429, outcome.message, "rate_limit_error", "", "queue_full", config.retry_after_s});
  if (outcome.status == SubmitStatus::Unavailable)
    return error_reply({503, outcome.message, "server_error", "", "unavailable", config.retry_after_s});
  if (outcome.status == SubmitStatus::Rejected) {
    // A format only the vocabulary refuses (no token sequence satisfies it) is the field's fault.
    const bool format = !r.format_param.empty() && outcome.message.find("format \"") != std::string::npos;
    return error_reply({400, outcome.message, "invalid_request_error", format ? r.format_param : "", "rejected", 0});
  }

  const bool chat = endpoint == ApiEndpoint::ChatCompletions;
  char id[40];
  std::snprintf(id, sizeof id, "%s-%llx%04llx", chat ? "chatcmpl" : "cmpl", static_cast<unsigned long long>(created),
                static_cast<unsigned long long>(next_id++));
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  ResponseMeta meta{endpoint, id, config.model_name, now, num_choices, r.n, r.logprobs, r.include_usage, r.tools};
  auto ex = std::make_shared<Exchange>(Exchange{&hub, channel, outcome.ids, ResponseBuilder(meta), r.stream});
  http::Response res;
  res.set("Content-Type", r.stream ? "text/event-stream" : "application/json");
  if (r.stream) {
    res.set("Cache-Control", "no-cache");
    res.set("X-Accel-Buffering", "no");
  }
  res.stream = [ex](http::BodyStream& out) { write_exchange(*ex, out); };
  return res;
}

// One echoed prompt: its text, and with logprobs each token's log-probability
// under the model given the tokens before it (the first has none: null, as in
// OpenAI's and vLLM's answers) with its top_n alternatives.
std::variant<json, ApiError> OpenAiServer::Impl::echo_choice(const std::vector<TokenId>& ids, const std::string& text,
                                                             int index, int top_n) {
  json choice = {{"index", index}, {"text", text}, {"finish_reason", "length"}, {"logprobs", nullptr}};
  if (top_n < 0) return choice;
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  std::optional<TextScore> score;
  if (ids.size() >= 2) {
    std::lock_guard<std::mutex> lock(scorer_mutex);
    // Scoring runs on the host whatever device the engine has: echoes are rare,
    // and a second copy of the weights on the GPU would take the engine's KV room.
    // The CPU device never fails to make a backend.
    if (!scorer) scorer = make_backend(model, {Device::Cpu, 0}).value();
    ScoreOptions options;
    options.top_n = std::max(1, top_n);
    // The engine's KV types, so an echo scores as its own generation would.
    options.k_type = hub.info().kv_types.k;
    options.v_type = hub.info().kv_types.v;
    auto scored = score_tokens(*model, *scorer, nullptr, nullptr, ids, options);
    if (!scored) return ApiError{500, "scoring the prompt failed: " + scored.error().message, "server_error", "", "engine_error", 0};
    score = std::move(*scored);
  }
  int64_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = tokenizer->token_bytes(ids[i]);
    tokens.push_back(piece);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(piece.size());
    if (i == 0 || !score) {
      values.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    const TokenScore& t = score->tokens[i - 1];
    values.push_back(t.logprob);
    json top = json::object();
    for (int k = 0; k < top_n && k < static_cast<int>(t.top.size()); ++k)
      top[tokenizer->token_bytes(t.top[static_cast<size_t>(k)].first)] = t.top[static_cast<size_t>(k)].second;
    tops.push_back(top);
  }
  choice["logprobs"] = {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
  return choice;
}

// echo with max_tokens 0: the prompts scored, nothing generated (the engine is
// not involved).
http::Response OpenAiServer::Impl::handle_echo(const ApiRequest& r) {
  auto prompts = prompt_ids(r);
  if (auto* e = std::get_if<ApiError>(&prompts)) return error_reply(*e);
  const auto& all = std::get<std::vector<std::vector<TokenId>>>(prompts);
  const int32_t num = static_cast<int32_t>(all.size());
  if (echo_waiting.fetch_add(num) + num > hub.max_queue()) {
    echo_waiting.fetch_sub(num);
    return error_reply({429, "the queue is full: " + std::to_string(hub.max_queue()) + " prompts may wait to be scored",
                        "rate_limit_error", "", "queue_full", config.retry_after_s});
  }
  struct Leave {
    std::atomic<int32_t>& waiting;
    int32_t num;
    ~Leave() { waiting.fetch_sub(num); }
  } leave{echo_waiting, num};
  json choices = json::array();
  int64_t num_prompt_tokens = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const PromptInput& p = r.prompts[i];
    const std::string text = p.is_ids ? tokenizer->decode(p.ids) : p.text;
    auto choice = echo_choice(all[i], text, static_cast<int>(i), r.logprobs ? r.top_logprobs : -1);
    if (auto* e = std::get_if<ApiError>(&choice)) return error_reply(*e);
    choices.push_back(std::move(std::get<json>(choice)));
    num_prompt_tokens += static_cast<int64_t>(all[i].size());
  }
  char id[40];
  std::snprintf(id, sizeof id, "cmpl-%llx%04llx", static_cast<unsigned long long>(created),
                static_cast<unsigned long long>(next_id++));
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const json body = {{"id", id}, {"object", "text_completion"}, {"created", now}, {"model", config.model_name},
                     {"system_fingerprint", std::string("glassbox-") + GLASSBOX_VERSION}, {"choices", choices},
                     {"usage", {{"prompt_tokens", num_prompt_tokens}, {"completion_tokens", 0}, {"total_tokens", num_prompt_tokens}}}};
  return json_reply(body.dump(-1, ' ', false, json::error_handler_t::replace));
}

OpenAiServer::OpenAiServer(ServeHub& hub, std::shared_ptr<const Model> model,
                           std::shared_ptr<const Tokenizer> tokenizer, ServerConfig config)
    : impl_(std::make_unique<Impl>(hub, std::move(model), std::move(tokenizer), std::move(config))) {}

OpenAiServer::~OpenAiServer() { stop(); }

Status OpenAiServer::start() {
  std::signal(SIGPIPE, SIG_IGN);
  Impl& s = *impl_;
  if (!is_loopback_host(s.config.host) && s.config.api_keys.empty() && !s.config.insecure_no_key)
    return make_error("refusing to serve on " + s.config.host +
                      " without an API key: anyone who can reach this address could use the model. Give --api-key "
                      "KEY, or --insecure-no-key to serve it open anyway");
  http::Limits limits;
  limits.max_header_bytes = s.config.max_header_bytes;
  limits.max_headers = s.config.max_headers;
  limits.max_body_bytes = s.config.max_body_bytes;
  limits.header_timeout = std::chrono::milliseconds(s.config.header_timeout_ms);
  limits.body_timeout = std::chrono::milliseconds(s.config.body_timeout_ms);
  limits.idle_timeout = std::chrono::milliseconds(s.config.idle_timeout_ms);
  limits.write_timeout = std::chrono::milliseconds(s.config.write_timeout_ms);
  limits.max_connections = s.config.max_connections;
  limits.worker_threads = std::max(2, s.config.max_threads);
  limits.max_pending = std::max(1, s.config.max_pending);
  limits.retry_after_s = s.config.retry_after_s;
  http::Callbacks callbacks;
  callbacks.check = [&s](const http::Request& head) { return s.check(head); };
  callbacks.handle = [&s](const http::Request& req) { return s.handle(req); };
  // The layer's own answers (oversized header or body, malformed framing,
  // busy, a bug of ours) in OpenAI's shape; an exception's text stays inside.
  callbacks.error = [](int status, const std::string& message) {
    const char* code = status == 431   ? "request_header_too_large"
                       : status == 413 ? "request_too_large"
                       : status == 503 ? "busy"
                       : status == 500 ? "internal_error"
                                       : "unreadable_request";
    const char* type = status >= 500 ? "server_error" : "invalid_request_error";
    return error_reply({status, message, type, "", code, 0});
  };
  callbacks.on_response = [&s](int status) { s.hub.metrics().on_http_response(status); };
  s.http = std::make_unique<http::HttpServer>(limits, std::move(callbacks));
  if (Status st = s.http->start(s.config.host, s.config.port); !st) {
    s.http.reset();
    return make_error(st.error().message + " (address in use, or not an address of this machine)");
  }
  s.port = s.http->port();
  return {};
}

void OpenAiServer::stop() {
  if (!impl_ || !impl_->http) return;
  impl_->http->stop();
  impl_->http.reset();
}

http::Stats OpenAiServer::http_stats() const { return impl_->http ? impl_->http->stats() : http::Stats{}; }

int OpenAiServer::port() const { return impl_->port; }

std::string OpenAiServer::address() const {
  const std::string& host = impl_->config.host;
  return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(impl_->port);
}

const std::string& OpenAiServer::model_name() const { return impl_->config.model_name; }

}  // namespace gb::server
