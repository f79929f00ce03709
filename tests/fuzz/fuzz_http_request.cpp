// Raw bytes from a client, as the server reads them: the HTTP layer's parser
// with a connection's limits (http::parse_request: method, target, header
// fields, Content-Length and chunked framing), then the OpenAI server's header
// decision (check_request_head: Host, Origin, API key) and, for the two POST
// routes, the JSON body (parse_api_request). Any input ends in a request or an
// answer the server would give; what is accepted must hold what the limits
// promise. An exception escaping is a crash here, as it would be a 500.
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/openai_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = gb::server::http;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  http::Limits limits;
  limits.max_header_bytes = 4096;
  limits.max_headers = 32;
  limits.max_body_bytes = 8192;
  const http::ParseResult parsed = http::parse_request(bytes, limits);
  switch (parsed.status) {
    case -1:
      return 0;
    case 400:
    case 413:
    case 431:
      if (parsed.message.empty()) gbfuzz::fuzz_fail("a refusal without a message");
      return 0;
    case 0:
      break;
    default:
      gbfuzz::fuzz_fail("parse_request answered " + std::to_string(parsed.status));
  }
  const http::Request& r = parsed.request;
  if (r.body.size() > limits.max_body_bytes) gbfuzz::fuzz_fail("a body past the limit was accepted");
  if (r.headers.size() > limits.max_headers) gbfuzz::fuzz_fail("more header fields than the limit were accepted");
  if (r.method.empty()) gbfuzz::fuzz_fail("a request without a method");
  if (r.path.size() > r.target.size()) gbfuzz::fuzz_fail("a path longer than its target");

  gb::server::ServerConfig config;
  config.api_keys = {"key-1"};
  config.allowed_origins = {"http://ok.example"};
  if (auto refused = gb::server::check_request_head(config, 8080, r)) {
    if (refused->status != 401 && refused->status != 403) gbfuzz::fuzz_fail("head refused with " + std::to_string(refused->status));
    return 0;
  }
  const bool chat = r.path == "/v1/chat/completions";
  if (r.method == "POST" && (chat || r.path == "/v1/completions")) {
    gb::server::ParseLimits body_limits;
    body_limits.vocab_size = 512;
    const auto api = gb::server::parse_api_request(
        chat ? gb::server::ApiEndpoint::ChatCompletions : gb::server::ApiEndpoint::Completions, r.body, body_limits);
    if (const auto* e = std::get_if<gb::server::ApiError>(&api); e && e->status != 400)
      gbfuzz::fuzz_fail("a body refused with " + std::to_string(e->status));
  }
  return 0;
}
