// The HTTP layer's request parsing (http::parse_request: the parser settings
// and limits every connection uses) on hand-made requests: whole requests with
// Content-Length and chunked bodies (extensions, trailers), incomplete ones,
// and each limit: header bytes and field count (431), body size by
// Content-Length or while chunks arrive (413), malformed framing (400).
#include <string>

#include "gb_test.h"
#include "server/http_server.h"

namespace test_http_parse {

namespace http = gb::server::http;

namespace {

http::Limits small_limits() {
  http::Limits limits;
  limits.max_header_bytes = 1024;
  limits.max_headers = 8;
  limits.max_body_bytes = 64;
  return limits;
}

}  // namespace

GB_TEST(whole_requests_are_read_with_their_fields_and_bodies) {
  const auto get = http::parse_request(
      "GET /v1/models/a%20b%2Fc?x=%20 HTTP/1.1\r\nHost: localhost\r\nX-Two: 2\r\n\r\n", small_limits());
  QCOMPARE(get.status, 0);
  QCOMPARE(get.request.method, std::string("GET"));
  QCOMPARE(get.request.target, std::string("/v1/models/a%20b%2Fc?x=%20"));
  QCOMPARE(get.request.path, std::string("/v1/models/a b/c"));
  QCOMPARE(get.request.header("host"), std::string("localhost"));
  QCOMPARE(get.request.header("X-TWO"), std::string("2"));
  QVERIFY(!get.request.has_header("Origin"));
  QVERIFY(get.request.keep_alive);

  const auto post = http::parse_request(
      "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"a\": true}", small_limits());
  QCOMPARE(post.status, 0);
  QCOMPARE(post.request.body, std::string("{\"a\": true}"));
  QVERIFY(!post.request.keep_alive);

  const auto chunked = http::parse_request(
      "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\n{\"a\"\r\n7\r\n: true}\r\n0\r\nX-Trailer: t\r\n\r\n",
      small_limits());
  QCOMPARE(chunked.status, 0);
  QCOMPARE(chunked.request.body, std::string("{\"a\": true}"));
}

GB_TEST(incomplete_requests_wait_for_more) {
  const auto empty = http::parse_request("", small_limits());
  QVERIFY2(empty.status == -1, (std::to_string(empty.status) + " method '" + empty.request.method + "'").c_str());
  QCOMPARE(http::parse_request("GET / HTTP/1.1\r\nHost: h\r\n", small_limits()).status, -1);
  QCOMPARE(http::parse_request("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"a\"", small_limits()).status, -1);
  QCOMPARE(http::parse_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n", small_limits()).status, -1);
}

GB_TEST(each_limit_gives_its_answer) {
  const http::Limits limits = small_limits();
  const auto big_header = http::parse_request("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'x') + "\r\n\r\n", limits);
  QCOMPARE(big_header.status, 431);
  QVERIFY(big_header.message.find("1024 bytes") != std::string::npos);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  const auto crowded = http::parse_request(many + "\r\n", limits);
  QCOMPARE(crowded.status, 431);
  QVERIFY(crowded.message.find("more than 8 header fields") != std::string::npos);
  std::string eight = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 8; ++i) eight += "X-" + std::to_string(i) + ": y\r\n";
  QCOMPARE(http::parse_request(eight + "\r\n", limits).status, 0);

  QCOMPARE(http::parse_request("POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n", limits).status, 413);
  QCOMPARE(http::parse_request("POST / HTTP/1.1\r\nContent-Length: 64\r\n\r\n" + std::string(64, 'a'), limits).status, 0);
  // Chunked: refused while reading, the moment the sum passes the limit.
  std::string chunks = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) chunks += "10\r\n" + std::string(16, 'b') + "\r\n";
  QCOMPARE(http::parse_request(chunks, limits).status, 413);
  for (const char* size : {"-5", "zz", "fffffffffffffffffffff"}) {
    const auto bad = http::parse_request(std::string("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") + size +
                                             "\r\nabc\r\n0\r\n\r\n",
                                         limits);
    QVERIFY2(bad.status == 400 || bad.status == 413, (std::string(size) + ": " + std::to_string(bad.status)).c_str());
  }
  QCOMPARE(http::parse_request("GARBAGE\r\n\r\n", limits).status, 400);
  QCOMPARE(http::parse_request("GET / HTTP/1.1\r\nBad Header\r\n\r\n", limits).status, 400);
}

}  // namespace test_http_parse
