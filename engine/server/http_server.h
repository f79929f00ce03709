// HttpServer: the HTTP/1.1 layer under the OpenAI server, on Boost.Beast and
// Boost.Asio (Debian's libboost-dev, header-only). Chosen over Debian 12's
// cpp-httplib 0.11.4 because every limit a server left on a network needs is
// a parser or stream setting there (docs/server.md, "The HTTP layer"):
//
//   - the request line and header fields together are bounded
//     (Limits::max_header_bytes; past it: 431), and so is their count (431);
//   - a body is bounded while it is read, whatever its framing: a
//     Content-Length over the limit is refused before any body byte is read,
//     a chunked body the moment its decoded size passes it (413); malformed
//     chunk sizes are a 400;
//   - time: a request's header must arrive within header_timeout of its first
//     byte being awaited (a client sending a byte a second is cut off), its
//     body within body_timeout, and a keep-alive connection waits idle_timeout
//     for the next request; every write must finish within write_timeout;
//   - connections: at most max_connections are open (more get a 503 and are
//     closed); idle and slow connections cost one socket and a small buffer,
//     no thread: one I/O thread reads and writes every connection;
//   - handlers run on worker_threads worker threads; at most max_pending
//     complete requests wait for one (more get a 503 with Retry-After).
//
// A request is first seen with its header only (HeaderCheck): a refusal there
// is answered without reading the body, and the connection is closed after it.
// A handler returns a Response, whole or streamed: a streamed body is written
// as HTTP chunks from the worker thread through BodyStream, which also says
// whether the client is still connected.
//
// Threads: construct, start() and stop() from one owning thread; the callbacks
// run on the worker threads (HeaderCheck on the I/O thread: keep it quick).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gb::server::http {

struct Request {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // the target without its query
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  std::string body;    // empty in a HeaderCheck
  bool keep_alive = true;

  // The first field of that name (case-insensitive), or "".
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

// A streamed body's writer (a worker thread's view of its connection).
class BodyStream {
 public:
  virtual ~BodyStream() = default;
  // Sends one chunk; false when the client has gone, the write timed out or
  // the server is stopping (stop writing then).
  virtual bool write(std::string_view data) = 0;
  // Whether the client is still there (it has not closed or reset the
  // connection); cheap, for polling between writes.
  virtual bool connected() = 0;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type included
  std::string body;
  // When set, the header is sent with Transfer-Encoding: chunked and this
  // writes the body (on the worker thread); `body` is ignored.
  std::function<void(BodyStream&)> stream;
  bool close = false;  // close the connection after this response

  void set(std::string name, std::string value);  // replaces a field of that name
};

struct Limits {
  size_t max_header_bytes = 16 * 1024;  // request line + header fields
  size_t max_headers = 64;
  size_t max_body_bytes = 1 << 20;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::milliseconds idle_timeout{15'000};
  std::chrono::milliseconds write_timeout{30'000};
  int max_connections = 512;
  int worker_threads = 16;
  int max_pending = 64;
  int retry_after_s = 1;  // on the 503s of the two limits above
};

// The header seen before the body is read: a Response answers (and refuses) it.
using HeaderCheck = std::function<std::optional<Response>(const Request& head)>;
using Handler = std::function<Response(const Request& request)>;
// The body of an answer the layer itself gives (431, 413, 400, 503, 500).
using ErrorResponder = std::function<Response(int status, const std::string& message)>;

struct Callbacks {
  HeaderCheck check;                      // optional
  Handler handle;                         // required
  ErrorResponder error;                   // optional: plain text otherwise
  std::function<void(int status)> on_response;  // every response sent (optional)
};

// What the server holds now (for tests and /metrics).
struct Stats {
  int open_connections = 0;
  int busy_workers = 0;
  int pending = 0;
  uint64_t refused_connections = 0;  // over max_connections
  uint64_t timed_out = 0;            // header, body, idle or write deadline passed
};

// One request parsed from `bytes` with a connection's parser settings and
// limits (for tests and the fuzz harness): status 0 with the request when it
// is whole; 431, 413 or 400 with the message the server would answer; -1 when
// the bytes end before the request does (or the peer's end would drop it).
struct ParseResult {
  int status = -1;
  Request request;
  std::string message;
};
ParseResult parse_request(std::string_view bytes, const Limits& limits);

class Connection;

class HttpServer {
 public:
  HttpServer(Limits limits, Callbacks callbacks);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (0: any free port) and starts the I/O and worker threads.
  Status start(const std::string& host, int port);
  // Closes the listener and every connection (streams see write() fail and
  // connected() false), waits for the handlers to return, joins all threads.
  void stop();
  int port() const;
  Stats stats() const;

 private:
  friend class Connection;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace gb::server::http
