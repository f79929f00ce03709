// The attack suite (issue #42): the OpenAI server on loopback, attacked over
// raw sockets the way a hostile client or web page would, while another client
// keeps asking /health:
//   - a 400 MiB chunked body, a Content-Length past the limit, malformed and
//     huge chunk sizes;
//   - 10,000 header fields, one 1 MiB header line;
//   - a client sending its request a byte at a time, 200 connections opened
//     and left idle, more connections than the cap;
//   - a DNS-rebinding Host, a cross-origin POST, malformed JSON of every kind.
// Each ends as stated (413, 431, 400, 403, 503, a closed connection); /health
// is answered throughout (each within the client's 10 s limit; the slowest
// answer is printed, not asserted: no timing assertions); the process's peak
// resident memory grows by less than 32 MiB; and afterwards nothing is left:
// no KV block owned, no request running, and once the server has stopped, no
// thread or file descriptor more than before it started.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "server_test_support.h"

using nlohmann::json;
using gbtest::ServerHarness;

namespace test_server_attacks {

namespace {

using Clock = std::chrono::steady_clock;

int count_dir(const char* path) {
  int n = 0;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}
int open_fds() { return count_dir("/proc/self/fd"); }
int threads() { return count_dir("/proc/self/task"); }

// A blocking loopback connection with 10 s send/receive limits; -1 on failure.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends what it can (false once the peer stops taking bytes).
bool send_all(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the peer closes or a whole response (by Content-Length) is in.
std::string read_response(int fd) {
  std::string in;
  char buf[8192];
  for (;;) {
    const size_t head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const size_t cl = in.find("Content-Length: ");
      if (cl != std::string::npos && cl < head_end) {
        const size_t len = std::stoul(in.substr(cl + 16));
        if (in.size() >= head_end + 4 + len) return in;
      }
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return in;
    in.append(buf, static_cast<size_t>(n));
  }
}

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

json body_of(const std::string& response) {
  const size_t head_end = response.find("\r\n\r\n");
  return head_end == std::string::npos ? json() : json::parse(response.substr(head_end + 4), nullptr, false);
}

// One request on its own connection; the whole response.
std::string round_trip(int port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return {};
  send_all(fd, request);
  std::string r = read_response(fd);
  ::close(fd);
  return r;
}

std::string post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// Asks /health until stopped; counts answers and failures, keeps the slowest.
struct HealthProbe {
  int port;
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::atomic<long long> slowest_ms{0};
  std::thread thread;

  explicit HealthProbe(int p) : port(p) {
    thread = std::thread([this] {
      while (!stop) {
        const auto t0 = Clock::now();
        const std::string r = round_trip(port, "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        (status_of(r) == 200 ? ok : failed).fetch_add(1);
        if (ms > slowest_ms) slowest_ms = ms;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  void finish() {
    stop = true;
    thread.join();
    std::printf("health probe: %d answered, %d failed, slowest %lld ms\n", ok.load(), failed.load(), slowest_ms.load());
  }
};

// Waits (bounded) until the server holds no connection.
bool connections_drain(const ServerHarness& h, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (h.server->http_stats().open_connections == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

gb::server::ServerConfig attack_config() {
  gb::server::ServerConfig config;
  config.max_body_bytes = 1 << 20;
  config.header_timeout_ms = 1500;
  config.idle_timeout_ms = 1500;
  config.body_timeout_ms = 3000;
  config.max_connections = 300;
  return config;
}

void check_error_response(const std::string& response, int status) {
  QVERIFY2(status_of(response) == status, (std::to_string(status) + " wanted, got: " + response.substr(0, 200)).c_str());
  const json body = body_of(response);
  QVERIFY2(body.is_object() && body.contains("error") && body["error"]["message"].is_string(), response.c_str());
}

}  // namespace

GB_TEST(oversized_bodies_and_headers_are_refused_with_memory_bounded) {
  const int fds_before = open_fds(), threads_before = threads();
  {
    ServerHarness h(attack_config());
    QVERIFY(h.ok());
    const int port = h.server->port();
    HealthProbe probe(port);
    QCOMPARE(status_of(round_trip(port, post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}}.dump()))), 200);
    const long long before = gbtest::vm_hwm_kib();

    // 400 MiB chunked, sent until the server stops taking it.
    {
      const int fd = connect_to(port);
      QVERIFY(fd >= 0);
      QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n"));
      const std::string piece(64 * 1024, ' ');
      char size_line[32];
      std::snprintf(size_line, sizeof size_line, "%zx\r\n", piece.size());
      const std::string chunk = size_line + piece + "\r\n";
      size_t sent = 0;
      while (sent < (400u << 20) && send_all(fd, chunk)) sent += piece.size();
      std::printf("chunked attack: %zu MiB sent before the server stopped reading\n", sent >> 20);
      QVERIFY(sent < (400u << 20));
      const std::string r = read_response(fd);
      if (!r.empty()) check_error_response(r, 413);  // else the reset beat the answer
      ::close(fd);
    }
    // A Content-Length past the limit: refused before a body byte is read.
    check_error_response(round_trip(port, "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 419430400\r\n\r\n"),
                         413);
    // Chunk sizes: negative, past 64 bits, not hex.
    for (const char* size : {"-5", "fffffffffffffffffffff", "zz"}) {
      const std::string r = round_trip(port, std::string("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                                                       "Transfer-Encoding: chunked\r\n\r\n") + size + "\r\nabc\r\n0\r\n\r\n");
      QVERIFY2(status_of(r) == 400 || status_of(r) == 413, r.c_str());
    }
    // 10,000 header fields; one 1 MiB header line.
    std::string many = "GET /v1/models HTTP/1.1\r\nHost: localhost\r\n";
    for (int i = 0; i < 10000; ++i) many += "X-F" + std::to_string(i) + ": x\r\n";
    check_error_response(round_trip(port, many + "\r\n"), 431);
    check_error_response(round_trip(port, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(1 << 20, 'x') +
                                            "\r\n\r\n"),
                         431);
    const long long after = gbtest::vm_hwm_kib();
    std::printf("peak resident memory: %lld KiB before the attacks, %lld KiB after\n", before, after);
    QVERIFY2(after - before < 32 * 1024, (std::to_string(after - before) + " KiB more").c_str());
    probe.finish();
    QVERIFY(probe.ok > 0);
    QCOMPARE(probe.failed.load(), 0);
    QVERIFY(connections_drain(h, 10));
    const auto m = h.metrics();
    QCOMPARE(m.at("glassbox_num_requests_running"), 0.0);
    QCOMPARE(m.at("glassbox_kv_cache_usage_perc"), 0.0);
  }
  QCOMPARE(open_fds(), fds_before);
  QCOMPARE(threads(), threads_before);
}

GB_TEST(slow_and_idle_connections_are_cut_off) {
  const int fds_before = open_fds(), threads_before = threads();
  {
    ServerHarness h(attack_config());
    QVERIFY(h.ok());
    const int port = h.server->port();
    // A client sending its request a byte every 250 ms: 40 bytes need 10 s, the
    // header deadline is 1.5 s.
    std::atomic<bool> slow_cut{false};
    std::atomic<int> slow_bytes{0};
    std::thread slow([&] {
      const int fd = connect_to(port);
      const std::string request = "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";
      for (char c : request) {
        if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
        ++slow_bytes;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        char peek;
        if (::recv(fd, &peek, 1, MSG_DONTWAIT | MSG_PEEK) == 0) break;  // closed by the server
      }
      char b;
      slow_cut = ::recv(fd, &b, 1, 0) <= 0;  // closed without an answer
      ::close(fd);
    });
    // 200 connections opened and left idle.
    std::vector<int> idle;
    for (int i = 0; i < 200; ++i) {
      const int fd = connect_to(port);
      QVERIFY(fd >= 0);
      idle.push_back(fd);
    }
    HealthProbe probe(port);
    slow.join();
    QVERIFY(slow_cut);
    QVERIFY2(slow_bytes < 40, std::to_string(slow_bytes).c_str());
    // The idle ones were closed by the server (their deadline passed).
    int closed_by_server = 0;
    for (int fd : idle) {
      char b;
      closed_by_server += ::recv(fd, &b, 1, 0) == 0;
      ::close(fd);
    }
    QCOMPARE(closed_by_server, 200);
    probe.finish();
    QVERIFY(probe.ok > 0);
    QCOMPARE(probe.failed.load(), 0);
    QVERIFY(connections_drain(h, 10));
    QVERIFY(h.server->http_stats().timed_out >= 201);
  }
  QCOMPARE(open_fds(), fds_before);
  QCOMPARE(threads(), threads_before);
}

GB_TEST(connections_past_the_cap_get_503) {
  gb::server::ServerConfig config;
  config.max_connections = 20;
  ServerHarness h(config);
  QVERIFY(h.ok());
  const int port = h.server->port();
  std::vector<int> idle;
  for (int i = 0; i < config.max_connections; ++i) idle.push_back(connect_to(port));
  for (int i = 0; i < 200 && h.server->http_stats().open_connections < config.max_connections; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  QCOMPARE(h.server->http_stats().open_connections, config.max_connections);
  for (int i = 0; i < 5; ++i) {
    const std::string r = round_trip(port, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    QVERIFY2(status_of(r) == 503, r.c_str());
  }
  QCOMPARE(h.server->http_stats().refused_connections, uint64_t{5});
  for (int fd : idle) ::close(fd);
  QVERIFY(connections_drain(h, 10));
  QCOMPARE(status_of(round_trip(port, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")), 200);
}

GB_TEST(cross_site_requests_and_malformed_requests_get_4xx) {
  ServerHarness h(attack_config());
  QVERIFY(h.ok());
  const int port = h.server->port();
  HealthProbe probe(port);
  const std::string ok_body = json{{"prompt", "Once"}, {"max_tokens", 2}}.dump();
  // DNS rebinding: a page whose name now resolves to 127.0.0.1 sends its own Host.
  check_error_response(round_trip(port, "POST /v1/completions HTTP/1.1\r\nHost: evil.example:8080\r\nContent-Length: " +
                                          std::to_string(ok_body.size()) + "\r\n\r\n" + ok_body),
                       403);
  check_error_response(round_trip(port, post("/v1/completions", ok_body, "Origin: http://evil.example\r\n")), 403);
  // Malformed JSON of every kind: each a 400 in OpenAI's shape.
  const std::string bodies[] = {
      "",
      "{",
      "[]",
      "null",
      "\"prompt\"",
      "{\"prompt\":}",
      "{\"prompt\": \"x\",}",
      "{\"prompt\": \"\xff\xfe\"}",
      std::string(100000, '['),
      "{\"prompt\": 1e999}",
      "{\"prompt\": \"x\", \"max_tokens\": \"NaN\"}",
      "{\"prompt\": \"x\", \"max_tokens\": -1}",
      "{\"prompt\": \"x\", \"max_tokens\": 1.5}",
      "{\"prompt\": {\"a\": 1}}",
      "{\"prompt\": \"x\", \"n\": 1e20}",
      "{\"prompt\": \"x\", \"stop\": [1]}",
      "{\"prompt\": \"x\", \"logit_bias\": []}",
      "{\"prompt\": \"x\", \"stream\": \"yes\"}",
      "{\"prompt\": \"x\"} trailing",
  };
  for (const std::string& b : bodies) {
    const std::string r = round_trip(port, post("/v1/completions", b));
    check_error_response(r, 400);
    if (QTest::currentTestFailed()) std::fprintf(stderr, "body: %.80s\n", b.c_str());
  }
  for (const std::string& b : {std::string("{\"messages\": 5}"), std::string("{\"messages\": [{\"role\": 1}]}"),
                               std::string("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": 3}]}]}")}) {
    check_error_response(round_trip(port, post("/v1/chat/completions", b)), 400);
  }
  // A request line that is not HTTP.
  QCOMPARE(status_of(round_trip(port, "GARBAGE\r\n\r\n")), 400);
  probe.finish();
  QCOMPARE(probe.failed.load(), 0);
  const auto m = h.metrics();
  QCOMPARE(m.at("glassbox_num_requests_running"), 0.0);
  QCOMPARE(m.at("glassbox_kv_cache_usage_perc"), 0.0);
}

}  // namespace test_server_attacks
