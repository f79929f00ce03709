// OpenAiServer: an OpenAI-compatible HTTP server in front of a ServeHub
// (cpp-httplib, Debian's libcpp-httplib-dev). Routes:
//   GET  /v1/models, /v1/models/{id}     the one served model
//   POST /v1/completions                 text or token-id prompts, n, stream, logprobs
//   POST /v1/chat/completions            messages through the model's chat format
//   GET  /health                         200 while the engine is healthy, else 503
//   GET  /metrics                        Prometheus text format (ServerMetrics)
// Every error is OpenAI's JSON error shape (ApiError): 400 names the bad
// parameter, 401 missing/wrong key, 404 unknown model or path, 413 oversized
// body, 431 too many header fields,
// 429 queue full and 503 unavailable (both with Retry-After).
//
// Each HTTP connection is served by one handler thread; handler threads parse,
// tokenize (the tokenizer is immutable), submit through the hub and then wait
// on their RequestChannel, checking every 50 ms whether the client is still
// connected: a client that disconnects has its requests cancelled and their KV
// blocks freed at once. A request's prefix-cache isolation key carries a hash of
// its bearer token, so tenants never share cached blocks.
//
// The server ignores SIGPIPE process-wide when it starts (a write to a client
// that went away must fail, not kill the process).
// Threads: start()/stop() from the owning thread; the routes run on the
// server's own threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model.h"
#include "server/serve_hub.h"
#include "tokenizer/tokenizer.h"

namespace gb::server {

struct ServerConfig {
  std::string host = "127.0.0.1";     // loopback unless told otherwise
  int port = 8080;                    // 0: any free port (see port())
  std::vector<std::string> api_keys;  // empty: no key needed
  std::string model_name;             // the id clients use; "" -> the model file's stem
  size_t max_body_bytes = 1 << 20;    // larger bodies get 413
  size_t max_headers = 64;            // more header fields get 431 (each line is bounded by cpp-httplib: 8 KiB)
  int max_threads = 128;              // concurrent connections served; more wait to be accepted
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
  const std::string& model_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The served model id for a model path: the file name without its extension.
std::string default_model_name(const std::string& model_path);

}  // namespace gb::server
