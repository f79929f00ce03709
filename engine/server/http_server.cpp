// HttpServer on Boost.Beast (see http_server.h).
#include "server/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

namespace gb::server::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

// Field names compare case-insensitively (RFC 9110), as Beast compares them.
bool same_name(std::string_view a, std::string_view b) {
  return beast::iequals(beast::string_view(a.data(), a.size()), beast::string_view(b.data(), b.size()));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path of a target, percent-decoded ("%2F" stays a byte like any other;
// a malformed escape is kept as written).
std::string decoded_path(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::string out;
  out.reserve(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size()) {
      const int hi = hex_value(target[i + 1]), lo = hex_value(target[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(target[i]);
  }
  return out;
}

using Parser = bhttp::request_parser<bhttp::string_body>;

void configure(Parser& parser, const Limits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
  parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
}

// What the server answers when reading a request failed with `ec`: 431, 413 or
// 400 with its message; 0 when nothing is answered (the peer went away, a
// deadline passed, the server stops).
std::pair<int, std::string> read_error_answer(beast::error_code ec, const Limits& limits) {
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow)
    return {431, "the request header is larger than " + std::to_string(limits.max_header_bytes) + " bytes"};
  if (ec == bhttp::error::body_limit)
    return {413, "the request body is larger than " + std::to_string(limits.max_body_bytes) + " bytes"};
  // Malformed framing (a bad chunk size, a bad header line) is a 400.
  if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message)
    return {400, "the request could not be parsed: " + ec.message()};
  return {0, {}};
}

// The header of a parsed request as a Request; 431 when it has too many fields.
std::pair<int, std::string> read_head(const Parser& parser, const Limits& limits, Request& out) {
  out = Request{};
  const auto& msg = parser.get();
  out.method = std::string(msg.method_string());
  out.target = std::string(msg.target());
  out.path = decoded_path(out.target);
  out.keep_alive = parser.keep_alive();
  size_t count = 0;
  for (const auto& field : msg) {
    if (++count > limits.max_headers)
      return {431, "the request has more than " + std::to_string(limits.max_headers) + " header fields"};
    out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  return {0, {}};
}

}  // namespace

ParseResult parse_request(std::string_view bytes, const Limits& limits) {
  ParseResult result;
  Parser parser;
  configure(parser, limits);
  parser.eager(true);
  beast::error_code ec;
  size_t offset = 0;
  bool head_read = false;
  while (!parser.is_done()) {
    if (offset == bytes.size()) {
      // The peer's end: a message delimited by it ends here, any other is cut
      // short (and no bytes at all are no request).
      if (!parser.got_some()) return result;  // -1
      parser.put_eof(ec);
      if (!ec && !parser.is_done()) return result;  // incomplete: -1
      break;
    }
    const size_t used = parser.put(net::buffer(bytes.data() + offset, bytes.size() - offset), ec);
    offset += used;
    // Everything left was offered: the parser needs bytes that are not there.
    if (ec == bhttp::error::need_more || (!ec && used == 0 && !parser.is_done())) return result;  // incomplete: -1
    if (ec) break;
    if (!head_read && parser.is_header_done()) {
      head_read = true;
      if (auto [status, message] = read_head(parser, limits, result.request); status != 0) {
        result.status = status;
        result.message = std::move(message);
        return result;
      }
    }
  }
  if (ec) {
    auto [status, message] = read_error_answer(ec, limits);
    result.status = status == 0 ? -1 : status;
    result.message = std::move(message);
    return result;
  }
  if (!parser.is_done() || !parser.is_header_done()) return result;  // incomplete: -1
  if (!head_read) {
    if (auto [status, message] = read_head(parser, limits, result.request); status != 0) {
      result.status = status;
      result.message = std::move(message);
      return result;
    }
  }
  result.request.body = parser.get().body();
  result.status = 0;
  return result;
}

namespace detail {

// Worker threads with a bounded queue of waiting jobs.
class WorkerPool {
 public:
  WorkerPool(int threads, int max_pending) : max_pending_(static_cast<size_t>(std::max(1, max_pending))) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { run(); });
  }
  ~WorkerPool() { stop(); }

  bool try_post(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= max_pending_) return false;
    queue_.push_back(std::move(job));
    wake_.notify_one();
    return true;
  }
  // Drops the jobs not started, waits for the running ones, joins.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      queue_.clear();
      wake_.notify_all();
    }
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }
  int busy() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return busy_;
  }
  int pending() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(queue_.size());
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
      lock.unlock();
      job();
      job = nullptr;  // its captures (a connection) released outside the lock
      lock.lock();
      --busy_;
    }
  }

  const size_t max_pending_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  int busy_ = 0;
  bool stopping_ = false;
};

}  // namespace detail

std::string Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (same_name(k, name)) return v;
  return {};
}

bool Request::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return same_name(h.first, name); });
}

void Response::set(std::string name, std::string value) {
  for (auto& [k, v] : headers)
    if (same_name(k, name)) {
      v = std::move(value);
      return;
    }
  headers.emplace_back(std::move(name), std::move(value));
}

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Limits limits;
  Callbacks callbacks;
  net::io_context io{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::thread io_thread;
  std::unique_ptr<detail::WorkerPool> workers;
  std::atomic<bool> stopping{false};
  int bound_port = 0;
  // Touched on the I/O thread only.
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
  std::atomic<int> open_connections{0};
  std::atomic<uint64_t> refused_connections{0};
  std::atomic<uint64_t> timed_out{0};

  Impl(Limits l, Callbacks c) : limits(l), callbacks(std::move(c)) {}

  Response error_response(int status, const std::string& message) const {
    Response r;
    if (callbacks.error) {
      r = callbacks.error(status, message);
    } else {
      r.body = message + "\n";
      r.set("Content-Type", "text/plain; charset=utf-8");
    }
    r.status = status;
    if (status == 503 && limits.retry_after_s > 0) r.set("Retry-After", std::to_string(limits.retry_after_s));
    return r;
  }
  void accept();
};

// One client connection: its reads and writes run on the I/O thread; a
// handler runs on a worker and hands its writes to the I/O thread.
class Connection : public std::enable_shared_from_this<Connection>, public BodyStream {
 public:
  Connection(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket)
      : server_(std::move(server)), stream_(std::move(socket)),
        buffer_(server_->limits.max_header_bytes + 64 * 1024), fd_(stream_.socket().native_handle()) {}

  void start() { read_request(/*first=*/true); }

  // I/O thread: ends the connection (idempotent).
  void close() {
    if (closed_.exchange(true)) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    if (server_->connections.erase(this) > 0) server_->open_connections.fetch_sub(1);
  }

  // BodyStream, from the worker thread.
  bool write(std::string_view data) override {
    if (data.empty()) return !closed_;
    auto chunk = std::make_shared<std::string>(data);
    return run_on_io([chunk](Connection& c, std::function<void(beast::error_code)> done) {
      c.stream_.expires_after(c.server_->limits.write_timeout);
      net::async_write(c.stream_, bhttp::make_chunk(net::buffer(*chunk)),
                       [chunk, done](beast::error_code ec, size_t) { done(ec); });
    });
  }
  bool connected() override {
    if (closed_ || server_->stopping) return false;
    // The descriptor as accepted (the socket object belongs to the I/O thread);
    // closed_ is set before the I/O thread closes it.
    const int fd = fd_;
    pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
    const int r = ::poll(&p, 1, 0);
    if (r < 0) return errno == EINTR;
    if (r == 0) return true;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
    char c = 0;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

 private:
  using Op = std::function<void(Connection&, std::function<void(beast::error_code)>)>;

  // Worker thread: runs `op` on the I/O thread and waits for its completion.
  // The I/O thread runs until every worker has returned (stop()), and closing
  // a socket completes its pending operations, so the wait always ends.
  bool run_on_io(Op op) {
    if (closed_ || server_->stopping) return false;
    auto done = std::make_shared<std::promise<beast::error_code>>();
    std::future<beast::error_code> result = done->get_future();
    net::post(server_->io, [self = shared_from_this(), op = std::move(op), done] {
      if (self->closed_) return done->set_value(net::error::operation_aborted);
      op(*self, [self, done](beast::error_code ec) {
        if (ec == beast::error::timeout) self->server_->timed_out.fetch_add(1);
        if (ec) self->close();
        done->set_value(ec);
      });
    });
    return !result.get();
  }

  void read_request(bool first) {
    if (closed_) return;
    parser_.emplace();
    configure(*parser_, server_->limits);
    stream_.expires_after(first ? server_->limits.header_timeout : server_->limits.idle_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // A read failed: answer what deserves an answer, then close.
  void read_failed(beast::error_code ec) {
    if (ec == beast::error::timeout) server_->timed_out.fetch_add(1);
    if (auto [status, message] = read_error_answer(ec, server_->limits); status != 0)
      return reply(server_->error_response(status, message), false);
    close();
  }

  void on_header(beast::error_code ec) {
    if (ec) return read_failed(ec);
    if (auto [status, message] = read_head(*parser_, server_->limits, request_); status != 0)
      return reply(server_->error_response(status, message), false);
    if (server_->callbacks.check) {
      std::optional<Response> refused;
      try {
        refused = server_->callbacks.check(request_);
      } catch (const std::exception&) {
        refused = server_->error_response(500, "internal server error");
      }
      if (refused) return reply(std::move(*refused), false);  // the body stays unread: close after
    }
    if (parser_->is_done()) return dispatch();
    stream_.expires_after(server_->limits.body_timeout);
    if (same_name(request_.header("Expect"), "100-continue")) {
      // The client waits for this before it sends the body.
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                       [self = shared_from_this()](beast::error_code e, size_t) {
                         if (e) return self->read_failed(e);
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code e, size_t) {
      if (e) return self->read_failed(e);
      self->request_.body = std::move(self->parser_->get().body());
      self->dispatch();
    });
  }

  void dispatch() {
    stream_.expires_never();
    auto self = shared_from_this();
    const bool posted = server_->workers->try_post([self, request = std::move(request_)]() mutable {
      self->run_handler(std::move(request));
    });
    if (!posted) {
      reply(server_->error_response(503, "the server is busy: too many requests are waiting; retry shortly"),
            /*keep_alive=*/false);
    }
  }

  // Worker thread.
  void run_handler(Request request) {
    Response response;
    try {
      response = server_->callbacks.handle(request);
    } catch (const std::exception&) {
      response = server_->error_response(500, "internal server error");  // the text stays in the server
    }
    const bool keep = request.keep_alive && !response.close && !server_->stopping;
    if (!response.stream) {
      auto self = shared_from_this();
      net::post(server_->io, [self, response = std::move(response), keep]() mutable {
        self->reply(std::move(response), keep);
      });
      return;
    }
    std::function<void(BodyStream&)> body = std::move(response.stream);
    const int status = response.status;
    auto header = std::make_shared<bhttp::response<bhttp::empty_body>>(static_cast<bhttp::status>(status), 11);
    for (const auto& [k, v] : response.headers) header->set(k, v);
    header->chunked(true);
    header->keep_alive(keep);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*header);
    const bool sent = run_on_io([header, serializer](Connection& c, std::function<void(beast::error_code)> done) {
      c.stream_.expires_after(c.server_->limits.write_timeout);
      bhttp::async_write_header(c.stream_, *serializer,
                                [header, serializer, done](beast::error_code ec, size_t) { done(ec); });
    });
    if (server_->callbacks.on_response) server_->callbacks.on_response(status);
    if (sent) body(*this);
    const bool ended = sent && run_on_io([](Connection& c, std::function<void(beast::error_code)> done) {
                         c.stream_.expires_after(c.server_->limits.write_timeout);
                         net::async_write(c.stream_, bhttp::make_chunk_last(),
                                          [done](beast::error_code ec, size_t) { done(ec); });
                       });
    auto self = shared_from_this();
    net::post(server_->io, [self, again = ended && keep] {
      if (again) self->read_request(false);
      else self->close();
    });
  }

  // I/O thread: writes a whole response, then reads the next request or closes.
  void reply(Response response, bool keep_alive) {
    if (closed_) return;
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(response.status), 11);
    for (const auto& [k, v] : response.headers) res->set(k, v);
    res->body() = std::move(response.body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    if (server_->callbacks.on_response) server_->callbacks.on_response(response.status);
    stream_.expires_after(server_->limits.write_timeout);
    bhttp::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      if (ec == beast::error::timeout) self->server_->timed_out.fetch_add(1);
      if (ec || !keep_alive) return self->close();
      self->read_request(false);
    });
  }

  std::shared_ptr<HttpServer::Impl> server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  Request request_;
  const int fd_;
  std::atomic<bool> closed_{false};
};

void HttpServer::Impl::accept() {
  acceptor->async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (ec || self->stopping) return;  // closed: the server stops
    if (self->open_connections.load() >= self->limits.max_connections) {
      // A short answer without a reader (the socket's send buffer takes it whole), then close.
      self->refused_connections.fetch_add(1);
      static constexpr char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 29\r\n"
          "Retry-After: 1\r\nConnection: close\r\n\r\ntoo many connections; retry\r\n";
      beast::error_code ignored;
      socket.non_blocking(true, ignored);
      socket.send(net::buffer(kBusy, sizeof kBusy - 1), 0, ignored);
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    } else {
      auto connection = std::make_shared<Connection>(self, std::move(socket));
      self->connections.emplace(connection.get(), connection);
      self->open_connections.fetch_add(1);
      connection->start();
    }
    self->accept();
  });
}

HttpServer::HttpServer(Limits limits, Callbacks callbacks)
    : impl_(std::make_shared<Impl>(limits, std::move(callbacks))) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start(const std::string& host, int port) {
  Impl& s = *impl_;
  beast::error_code ec;
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  const net::ip::address address = net::ip::make_address(bare == "localhost" ? "127.0.0.1" : bare, ec);
  if (ec) return make_error("cannot listen on " + host + ": not an IP address");
  s.acceptor.emplace(s.io);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    s.acceptor.reset();
    return make_error("cannot listen on " + host + ":" + std::to_string(port) + " (" + ec.message() + ")");
  }
  s.bound_port = s.acceptor->local_endpoint().port();
  s.workers = std::make_unique<detail::WorkerPool>(s.limits.worker_threads, s.limits.max_pending);
  s.work.emplace(s.io.get_executor());
  s.accept();
  s.io_thread = std::thread([&s] { s.io.run(); });
  return {};
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (!s.io_thread.joinable()) return;
  s.stopping = true;
  // Close the listener and every connection on the I/O thread: pending reads
  // and writes complete (aborted), streams see it, handlers return.
  net::post(s.io, [&s] {
    beast::error_code ignored;
    if (s.acceptor) s.acceptor->close(ignored);
    std::vector<std::shared_ptr<Connection>> open;
    for (auto& [ptr, weak] : s.connections)
      if (auto c = weak.lock()) open.push_back(std::move(c));
    for (auto& c : open) c->close();
  });
  s.workers->stop();  // waits for running handlers (their writes need the I/O thread, still running)
  // Connections a handler left open at the last moment are closed too.
  net::post(s.io, [&s] {
    std::vector<std::shared_ptr<Connection>> open;
    for (auto& [ptr, weak] : s.connections)
      if (auto c = weak.lock()) open.push_back(std::move(c));
    for (auto& c : open) c->close();
    s.connections.clear();
    s.work.reset();
  });
  s.io_thread.join();
  s.io.restart();
  s.io.poll();  // completion handlers still queued release their connections
  s.acceptor.reset();
  s.workers.reset();
}

int HttpServer::port() const { return impl_->bound_port; }

Stats HttpServer::stats() const {
  Stats st;
  st.open_connections = impl_->open_connections.load();
  st.busy_workers = impl_->workers ? impl_->workers->busy() : 0;
  st.pending = impl_->workers ? impl_->workers->pending() : 0;
  st.refused_connections = impl_->refused_connections.load();
  st.timed_out = impl_->timed_out.load();
  return st;
}

}  // namespace gb::server::http
