// RemoteClient against Glassbox's own server on loopback: the model is found
// through /v1/models, greedy text over the remote equals the engine run
// directly, every token carries its logprob and 20 alternatives (the chosen one
// first under greedy), client-side timings and usage are filled, a consumer
// that stops reading cancels the request on the server (seen in /metrics), and
// bad URLs, closed ports and a missing key are errors with a message.
#include <cmath>

#include "server/remote_client.h"
#include "server_test_support.h"

using gb::server::RemoteClient;
using gb::server::RemoteOptions;
using gbtest::ServerHarness;

namespace {
std::string url_of(const ServerHarness& h) { return "http://127.0.0.1:" + std::to_string(h.server->port()) + "/v1"; }
gb::SamplerSettings greedy() {
  gb::SamplerSettings s = gb::server::openai_default_sampling();
  s.temperature = 0.0f;
  return s;
}
}  // namespace

GB_TEST(greedy_over_the_remote_equals_the_engine) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto client = RemoteClient::connect({url_of(h), "", "", 20, 60});
  QVERIFY2(client.ok(), client.ok() ? "" : client.error().message.c_str());
  QCOMPARE((*client)->model(), std::string("stories260K"));
  std::vector<gb::server::RemoteToken> tokens;
  auto result = (*client)->complete("Once upon a time", greedy(), 30, [&](const gb::server::RemoteToken& t) {
    tokens.push_back(t);
    return true;
  });
  QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
  QCOMPARE(result->text, gbtest::engine_greedy_text(h.stories, "Once upon a time", 30));
  QCOMPARE(static_cast<int>(tokens.size()), result->num_generated);
  QCOMPARE(result->num_prompt_tokens, static_cast<int>(h.stories.tokenizer->encode("Once upon a time", true).size()));
  std::string joined;
  double last_ms = 0;
  for (const auto& t : tokens) {
    QCOMPARE(t.top.size(), size_t{20});
    QCOMPARE(t.top[0].first, t.token);  // greedy: the most likely one
    QCOMPARE(t.top[0].second, t.logprob);
    QVERIFY(!std::isnan(t.logprob) && t.logprob <= 0.0f);
    QVERIFY(t.t_ms >= last_ms);
    last_ms = t.t_ms;
    joined += t.text;
  }
  QCOMPARE(joined, result->text);
  QVERIFY(result->ttft_ms > 0.0);
  QVERIFY(result->finish_reason == "length" || result->finish_reason == "stop");
  auto metrics = (*client)->metrics();
  QVERIFY(metrics.ok());
  QVERIFY(metrics->count("glassbox_num_requests_running") == 1);
}

GB_TEST(stopping_to_read_cancels_on_the_server) {
  ServerHarness h({}, gb::server::WorkerConfig{256, std::chrono::milliseconds(20)});
  QVERIFY(h.ok());
  auto client = RemoteClient::connect({url_of(h), "", "", 0, 60});
  QVERIFY(client.ok());
  gb::SamplerSettings s = greedy();
  int seen = 0;
  auto result = (*client)->complete("Once upon a time", s, 400, [&](const gb::server::RemoteToken&) { return ++seen < 3; });
  QVERIFY(result.ok());
  QCOMPARE(result->finish_reason, std::string("cancelled"));
  QCOMPARE(seen, 3);
  std::map<std::string, double> m;
  for (int i = 0; i < 200; ++i) {  // bounded poll
    m = h.metrics();
    if (m["glassbox_request_finished_total{reason=\"cancelled\"}"] >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  QCOMPARE(m["glassbox_request_finished_total{reason=\"cancelled\"}"], 1.0);
  QCOMPARE(m["glassbox_kv_blocks_used"], 0.0);
}

GB_TEST(connection_errors_have_messages) {
  gb::server::ServerConfig config;
  config.api_keys = {"k"};
  ServerHarness h(config);
  QVERIFY(h.ok());
  auto no_key = RemoteClient::connect({url_of(h), "", "", 20, 10});
  QVERIFY(!no_key.ok());
  QVERIFY2(no_key.error().message.find("401") != std::string::npos, no_key.error().message.c_str());
  auto with_key = RemoteClient::connect({url_of(h), "k", "", 20, 10});
  QVERIFY(with_key.ok());
  auto bad_scheme = RemoteClient::connect({"ftp://127.0.0.1:1", "", "", 20, 10});
  QVERIFY(!bad_scheme.ok());
  QVERIFY(bad_scheme.error().message.find("http://") != std::string::npos);
  auto closed = RemoteClient::connect({"http://127.0.0.1:1", "", "", 20, 10});  // nobody listens on port 1
  QVERIFY(!closed.ok());
  QVERIFY(closed.error().message.find("cannot connect") != std::string::npos);
  // A bad parameter comes back as the server's message.
  gb::SamplerSettings s = greedy();
  s.top_p = 0.0f;
  auto bad = (*with_key)->complete("x", s, 4, [](const gb::server::RemoteToken&) { return true; });
  QVERIFY(!bad.ok());
  QVERIFY2(bad.error().message.find("top_p") != std::string::npos, bad.error().message.c_str());
}
