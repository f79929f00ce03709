// OpenAiServer: an OpenAI-compatible HTTP server in front of a ServeHub, on
// the HTTP layer of http_server.h (Boost.Beast). Routes:
//   GET  /v1/models, /v1/models/{id}     the one served model
//   POST /v1/completions                 text or token-id prompts, n, stream, logprobs
//   POST /v1/chat/completions            messages through the model's chat format
//   GET  /health                         200 while the engine is healthy, else 503
//   GET  /metrics                        Prometheus text format (ServerMetrics)
// Every error is OpenAI's JSON error shape (ApiError): 400 names the bad
// parameter, 401 missing/wrong key, 403 a Host or Origin refused, 404 unknown
// model or path, 413 oversized body, 431 oversized header or too many fields,
// 429 queue full and 503 unavailable or busy (both with Retry-After).
//
// The HTTP layer reads every connection on one I/O thread with its limits and
// deadlines (ServerConfig below); a complete request runs on one of
// max_threads worker threads, which parses, tokenizes (the tokenizer is
// immutable), submits through the hub and then waits on its RequestChannel,
// checking every 50 ms whether the client is still connected: a client that
// disconnects has its requests cancelled and their KV blocks freed at once. A
// request's prefix-cache isolation key carries a hash of its bearer token, so
// tenants never share cached blocks.
//
// The server ignores SIGPIPE process-wide when it starts (a write to a client
// that went away must fail, not kill the process).
// Threads: start()/stop() from the owning thread; the routes run on the
// server's own threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/serve_hub.h"
#include "tokenizer/tokenizer.h"

namespace gb::server {

struct ServerConfig {
  std::string host = "127.0.0.1";     // loopback unless told otherwise
  int port = 8080;                    // 0: any free port (see port())
  std::vector<std::string> api_keys;  // empty: no key needed
  std::string model_name;             // the id clients use; "" -> the model file's stem
  size_t max_body_bytes = 1 << 20;    // larger bodies get 413 (chunked ones while they are read)
  size_t max_headers = 64;            // more header fields get 431
  size_t max_header_bytes = 16 << 10; // a larger request line + header gets 431
  int max_threads = 32;               // requests handled at once (worker threads; a stream holds one)
  int max_pending = 64;               // complete requests waiting for a worker; more get 503
  int max_connections = 512;          // open connections; more get 503 and are closed
  int header_timeout_ms = 10'000;     // a request's header must arrive within this
  int body_timeout_ms = 30'000;       // its body within this
  int idle_timeout_ms = 15'000;       // a kept-alive connection waits this long for the next request
  int write_timeout_ms = 30'000;      // each write to a client must finish within this
  int max_n = 16;                     // choices per prompt
  int max_prompts = 16;               // prompts per completions request
  int max_prompt_tokens = 0;          // 0: the engine's context minus one
  int record_top_n = 0;               // candidates recorded per token even without logprobs
  int retry_after_s = 1;              // Retry-After on 429 / 503
  // Who may reach it (docs/server.md, "Hosts and origins"). Host headers
  // accepted: localhost, 127.0.0.1, [::1], the bound address and these (a
  // DNS-rebinding page names its own host and is refused). Browser origins
  // (the Origin header) accepted: the server's own and these ("*": any);
  // others get 403.
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  // Listening on an address other than loopback without an API key is refused
  // unless this is set (anyone on the network could use the model).
  bool insecure_no_key = false;
};

// Whether `host` (an address or a name) is this machine's loopback.
bool is_loopback_host(const std::string& host);

// What the server decides from a request's header alone, before its body is
// read: the Host and Origin policy (403), then the API key for /v1/ (401); an
// OPTIONS preflight needs no key. nullopt: go on. `port` is the bound port.
std::optional<ApiError> check_request_head(const ServerConfig& config, int port, const http::Request& head);

class OpenAiServer {
 public:
  OpenAiServer(ServeHub& hub, std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
               ServerConfig config);
  ~OpenAiServer();
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds (an error names the address when it is taken) and serves on a thread.
  Status start();
  // Stops accepting, ends open streams, joins the server thread.
  void stop();
  int port() const;
  std::string address() const;  // "http://host:port"
  http::Stats http_stats() const;  // connections and workers now (tests, diagnostics)
  const std::string& model_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The served model id for a model path: the file name without its extension.
std::string default_model_name(const std::string& model_path);

}  // namespace gb::server
