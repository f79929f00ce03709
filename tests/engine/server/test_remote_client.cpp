// RemoteClient against Glassbox's own server on loopback: the model is found
// through /v1/models, greedy text over the remote equals the engine run
// directly, every token carries its logprob and 20 alternatives (the chosen one
// first under greedy), client-side timings and usage are filled, a consumer
// that stops reading cancels the request on the server (seen in /metrics), and
// bad URLs, closed ports and a missing key are errors with a message. Also:
// scoring (echo + logprobs) equal to local teacher forcing, chat streaming,
// n choices, metric names of each server family, and RemoteSession (the
// workbench's remote engine); a server that refuses echo, and the Score and
// Compare views' remote JSON (remote_score_json, remote_comparison_json). And a
// fake server answering nonsense: each request gets an error, never a crash.
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/make_backend.h"
#include "runtime/text_scorer.h"
#include "client/remote_client.h"
#include "client/remote_comparison_json.h"
#include "client/remote_score_json.h"
#include "client/remote_metrics.h"
#include "client/remote_session.h"
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

// Scoring over the API (echo + logprobs, max_tokens 0) equals teacher forcing
// run locally on the same model: same tokens, same log-probabilities.
GB_TEST(score_over_the_remote_equals_local_scoring) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto client = RemoteClient::connect({url_of(h), "", "", 5, 60});
  QVERIFY(client.ok());
  const std::string text = "Once upon a time, there was a little girl named Lily. She loved to play.";
  auto remote = (*client)->score(text, 5);
  QVERIFY2(remote.ok(), remote.ok() ? "" : remote.error().message.c_str());
  const std::vector<gb::TokenId> ids = h.stories.tokenizer->encode(text, true);
  auto backend = gb::make_backend(h.stories.model, {gb::Device::Cpu, 0});
  QVERIFY(backend.ok());
  gb::ScoreOptions options;
  options.top_n = 5;
  options.k_type = options.v_type = gb::EngineConfig{}.kv_types.k;  // the served engine's default KV type
  auto local = gb::score_tokens(*h.stories.model, **backend, nullptr, nullptr, ids, options);
  QVERIFY(local.ok());
  QCOMPARE(remote->size(), ids.size());
  QVERIFY(!(*remote)[0].logprob.has_value());  // the first token is context only
  for (size_t i = 1; i < ids.size(); ++i) {
    const gb::server::RemoteScoredToken& r = (*remote)[i];
    QCOMPARE(r.token, h.stories.tokenizer->token_bytes(ids[i]));
    QVERIFY(r.logprob.has_value());
    QVERIFY(std::abs(*r.logprob - local->tokens[i - 1].logprob) < 1e-4);
    QCOMPARE(r.top.size(), size_t{5});
    QVERIFY(std::abs(r.top[0].second - local->tokens[i - 1].top[0].second) < 1e-4);
  }
}

// Chat over the remote: streamed tokens with 20 alternatives each, the text
// equal to the server's own non-streamed greedy answer.
GB_TEST(chat_over_the_remote_streams_tokens_with_alternatives) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto client = RemoteClient::connect({url_of(h), "", "", 20, 60});
  QVERIFY(client.ok());
  std::vector<gb::server::RemoteToken> tokens;
  auto result = (*client)->chat({{"user", "Once upon a time", {}}}, greedy(), 12, "", [&](const gb::server::RemoteToken& t) {
    tokens.push_back(t);
    return true;
  });
  QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
  auto [status, whole] = h.post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                                                          {"max_tokens", 12}, {"temperature", 0}});
  QCOMPARE(status, 200);
  QCOMPARE(result->text, whole["choices"][0]["message"]["content"].get<std::string>());
  QCOMPARE(static_cast<int>(tokens.size()), 12);
  for (const auto& t : tokens) {
    QCOMPARE(t.top.size(), size_t{20});
    QCOMPARE(t.top[0].first, t.token);
  }
  // Template keywords must be an object.
  auto bad = (*client)->chat({{"user", "x", {}}}, greedy(), 2, "[1]", [](const gb::server::RemoteToken&) { return true; });
  QVERIFY(!bad.ok());
}

// n choices at once (Compare lanes): choice j is the streamed completion with seed + j.
GB_TEST(n_choices_equal_single_requests_with_seed_plus_j) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto client = RemoteClient::connect({url_of(h), "", "", 1, 60});
  QVERIFY(client.ok());
  gb::SamplerSettings s = gb::server::openai_default_sampling();
  s.seed = 11;
  auto all = (*client)->complete_n("Once upon a time", s, 10, 3);
  QVERIFY2(all.ok(), all.ok() ? "" : all.error().message.c_str());
  QCOMPARE(all->size(), size_t{3});
  for (int j = 0; j < 3; ++j) {
    gb::SamplerSettings one = s;
    one.seed = 11 + static_cast<uint64_t>(j);
    auto single = (*client)->complete("Once upon a time", one, 10, [](const gb::server::RemoteToken&) { return true; });
    QVERIFY(single.ok());
    QCOMPARE((*all)[static_cast<size_t>(j)].text, single->text);
    QCOMPARE((*all)[static_cast<size_t>(j)].tokens.size(), size_t{10});
  }
}

// The metric names of each server family map to one set of quantities;
// labelled series are summed, absent quantities stay empty.
GB_TEST(remote_metrics_read_every_family) {
  using gb::server::parse_prometheus_text;
  using gb::server::read_remote_metrics;
  // Names as llama-server (examples/server/server.cpp, --metrics) and vLLM
  // (vllm/v1/metrics/loggers.py) export them.
  const auto llama = read_remote_metrics(parse_prometheus_text(
      "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
      "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 120\n"
      "llamacpp:tokens_predicted_total 64\nllamacpp:kv_cache_usage_ratio 0.25\n"
      "llamacpp:requests_processing 3\nllamacpp:requests_deferred 1\n"));
  QCOMPARE(llama.flavour, std::string("llama.cpp"));
  QCOMPARE(*llama.num_running, 3.0);
  QCOMPARE(*llama.num_waiting, 1.0);
  QCOMPARE(*llama.kv_usage, 0.25);
  QCOMPARE(*llama.prompt_tokens, 120.0);
  QCOMPARE(*llama.generation_tokens, 64.0);
  QVERIFY(!llama.prefix_hit_rate().has_value());
  const auto vllm = read_remote_metrics(parse_prometheus_text(
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0\n"
      "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 3.0\n"
      "vllm:num_requests_waiting{model_name=\"m\"} 4.0\n"
      "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n"
      "vllm:prefix_cache_queries_total{model_name=\"m\"} 200.0\n"
      "vllm:prefix_cache_hits_total{model_name=\"m\"} 50.0\n"
      "vllm:num_requests_running_extra 99\n"));
  QCOMPARE(vllm.flavour, std::string("vllm"));
  QCOMPARE(*vllm.num_running, 5.0);  // two engines summed; the longer name is not taken
  QCOMPARE(*vllm.num_waiting, 4.0);
  QCOMPARE(*vllm.kv_usage, 0.5);
  QCOMPARE(*vllm.prefix_hit_rate(), 0.25);
  QVERIFY(!vllm.kv_blocks_total.has_value());
  QCOMPARE(read_remote_metrics(parse_prometheus_text("something_else 1\n")).flavour, std::string());
}

// The workbench's remote engine: events arrive in order without the caller
// waiting (started, tokens, finished), greedy text equals the engine's, the
// server's /metrics is polled, and a cancel ends a long request early.
GB_TEST(remote_session_streams_events_and_polls_metrics) {
  ServerHarness h({}, gb::server::WorkerConfig{256, std::chrono::milliseconds(5)});
  QVERIFY(h.ok());
  auto session = gb::server::RemoteSession::connect({url_of(h), "", "", 20, 60}, 50);
  QVERIFY2(session.ok(), session.ok() ? "" : session.error().message.c_str());
  QCOMPARE((*session)->metrics_flavour(), std::string("glassbox"));
  const uint64_t a = (*session)->submit_completion("Once upon a time", greedy(), 20);
  const uint64_t b = (*session)->submit_completion("Once upon a time", greedy(), 400);
  std::string text_a;
  int num_b = 0, num_metrics = 0;
  std::map<uint64_t, std::string> reasons;
  bool started_first = false, cancelled = false;
  for (int i = 0; i < 2000 && reasons.size() < 2; ++i) {  // bounded: 2000 x 10 ms
    for (const gb::server::RemoteEvent& e : (*session)->drain()) {
      if (const auto* s = std::get_if<gb::server::RemoteStarted>(&e.body)) started_first |= s->request == a && text_a.empty();
      if (const auto* t = std::get_if<gb::server::RemoteTokenEvent>(&e.body)) {
        if (t->request == a) text_a += t->token.text;
        if (t->request == b && ++num_b == 2 && !cancelled) {
          (*session)->cancel(b);
          cancelled = true;
        }
      }
      if (const auto* f = std::get_if<gb::server::RemoteFinished>(&e.body)) reasons[f->request] = f->result.finish_reason;
      if (const auto* m = std::get_if<gb::server::RemoteMetricsSample>(&e.body)) {
        QVERIFY(m->metrics.kv_blocks_total.has_value() && *m->metrics.kv_blocks_total > 0);
        ++num_metrics;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  QVERIFY(started_first);
  QCOMPARE(text_a, gbtest::engine_greedy_text(h.stories, "Once upon a time", 20));
  QCOMPARE(reasons[a], std::string("length"));
  QCOMPARE(reasons[b], std::string("cancelled"));
  QVERIFY(num_b < 400);
  QVERIFY(num_metrics > 0);
  QCOMPARE((*session)->num_active(), 0);
}

// A server that refuses echo (as llama-server answers: 400 "Unsupported param:
// echo") makes score() fail with a message that names echo; the workbench's
// Score view shows that message.
GB_TEST(score_reports_a_server_that_refuses_echo) {
  httplib::Server fake;
  fake.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"object":"list","data":[{"id":"fake","object":"model"}]})", "application/json");
  });
  fake.Post("/v1/completions", [](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(R"({"error":{"code":400,"message":"Unsupported param: echo","type":"invalid_request_error"}})",
                    "application/json");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  QVERIFY(port > 0);
  std::thread serving([&] { fake.listen_after_bind(); });
  auto client = RemoteClient::connect({"http://127.0.0.1:" + std::to_string(port) + "/v1", "", "", 20, 30});
  QVERIFY2(client.ok(), client.ok() ? "" : client.error().message.c_str());
  auto scored = (*client)->score("Once upon a time", 5);
  fake.stop();
  serving.join();
  QVERIFY(!scored.ok());
  QVERIFY2(scored.error().message.find("Unsupported param: echo") != std::string::npos, scored.error().message.c_str());
  QVERIFY2(scored.error().message.find("scoring needs echo") != std::string::npos, scored.error().message.c_str());
}

// The Score view's JSON of a remote score: the first token is context only,
// rank is the chosen token's place among the alternatives (null when absent),
// ids and entropy null, perplexity from the logprobs.
GB_TEST(remote_score_json_marks_what_is_not_available) {
  std::vector<gb::server::RemoteScoredToken> scored = {
      {"Once", std::nullopt, {}},
      {" upon", -0.5f, {{" upon", -0.5f}, {" a", -1.5f}}},
      {" time", -2.0f, {{" day", -0.3f}, {" night", -1.0f}}}};
  const auto j = nlohmann::json::parse(gb::server::remote_score_to_json(scored, "http://h/v1", "m"));
  QCOMPARE(j["tokens"].size(), size_t{2});
  QCOMPARE(j["tokens"][0]["position"].get<int>(), 1);
  QCOMPARE(j["tokens"][0]["rank"].get<int>(), 0);
  QVERIFY(j["tokens"][1]["rank"].is_null());
  QVERIFY(j["tokens"][0]["id"].is_null() && j["tokens"][0]["entropy"].is_null());
  QCOMPARE(j["tokens"][1]["top"][0]["text"].get<std::string>(), std::string(" day"));
  QVERIFY(std::abs(j["mean_logprob"].get<double>() - (-1.25)) < 1e-9);
  QVERIFY(std::abs(j["perplexity"].get<double>() - std::exp(1.25)) < 1e-9);
  QCOMPARE(j["remote"].get<std::string>(), std::string("http://h/v1"));
}

// The Compare view's JSON of remote lanes: statistics from the token strings,
// divergence from lane A's same sample, entropy null, CRN listed as missing.
GB_TEST(remote_comparison_json_compares_token_strings) {
  const auto tok = [](const std::string& s, float lp) {
    gb::server::RemoteToken t;
    t.text = t.token = s;
    t.logprob = lp;
    return t;
  };
  gb::server::RemoteLane a{"A", gb::SamplerSettings{}, {{1, "x y z", "length", {tok("x", -1), tok(" y", -1), tok(" z", -1)}, 10}}};
  gb::server::RemoteLane b{"B", gb::SamplerSettings{}, {{2, "x y y", "length", {tok("x", -1), tok(" y", -3), tok(" y", -2)}, 20}}};
  const auto j = nlohmann::json::parse(gb::server::remote_comparison_to_json({a, b}, {"u", "m", "p", 5, 3, 1.0}));
  QVERIFY(j["lanes"][0]["samples"][0]["first_divergence"].is_null());
  QCOMPARE(j["lanes"][1]["samples"][0]["first_divergence"].get<int>(), 2);
  QVERIFY(std::abs(j["lanes"][1]["samples"][0]["mean_logprob"].get<double>() - (-2.0)) < 1e-9);
  QVERIFY(std::abs(j["lanes"][1]["samples"][0]["distinct_1"].get<double>() - 2.0 / 3.0) < 1e-9);
  QVERIFY(j["lanes"][1]["summary"]["mean_entropy"].is_null());
  QCOMPARE(j["lanes"][1]["summary"]["num_diverged"].get<int>(), 1);
  QVERIFY(std::abs(j["lanes"][1]["summary"]["tokens_per_s"].get<double>() - 150.0) < 1e-9);
  QCOMPARE(j["not_available"].size(), size_t{5});
}

namespace {

// A server that answers GET /v1/models, /metrics and POST /v1/completions,
// /v1/chat/completions with whatever text the test sets: malformed answers
// on purpose (issue 42).
class FakeRemote {
 public:
  FakeRemote() {
    server_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { answer("models", res); });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { answer("metrics", res); });
    server_.Post("/v1/completions", [this](const httplib::Request&, httplib::Response& res) { answer("completions", res); });
    server_.Post("/v1/chat/completions", [this](const httplib::Request&, httplib::Response& res) { answer("chat", res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    set("models", R"({"object": "list", "data": [{"id": "fake"}]})");
  }
  ~FakeRemote() {
    server_.stop();
    thread_.join();
  }
  FakeRemote(const FakeRemote&) = delete;
  FakeRemote& operator=(const FakeRemote&) = delete;

  bool ok() const { return port_ > 0; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  void set(const std::string& what, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    answers_[what] = text;
  }

 private:
  void answer(const std::string& what, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    res.set_content(answers_[what], what == "models" ? "application/json" : "text/event-stream");
  }
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mutex_;
  std::map<std::string, std::string> answers_;
};

std::string sse_of(const std::vector<std::string>& chunks) {
  std::string out;
  for (const std::string& c : chunks) out += "data: " + c + "\n\n";
  return out + "data: [DONE]\n\n";
}

bool any_token(const gb::server::RemoteToken&) { return true; }

}  // namespace

// A server answering nonsense (fields of the wrong type, missing fields, chunks
// that are not JSON) gives each request an error naming what was wrong; the
// client never throws, and the workbench's RemoteSession reports the error in
// that request's RemoteFinished and carries on.
GB_TEST(malformed_answers_are_errors_not_crashes) {
  FakeRemote fake;
  QVERIFY(fake.ok());
  const auto connect_error = [&](const std::string& models) {
    fake.set("models", models);
    auto c = RemoteClient::connect({fake.url(), "", "", 20, 10});
    return c.ok() ? std::string("connected") : c.error().message;
  };
  QVERIFY(connect_error(R"({"data": [{"id": 5}]})").find("data[0].id is not a string") != std::string::npos);
  QVERIFY(connect_error(R"({"data": "fake"})").find("data is not an array") != std::string::npos);
  QVERIFY(connect_error("<html>busy</html>").find("not valid JSON") != std::string::npos);
  QVERIFY(connect_error(R"({"data": []})").find("names no model") != std::string::npos);
  QCOMPARE(connect_error(R"({"data": [{"id": "fake"}]})"), std::string("connected"));
  // Bad ports are refused before httplib reads them (its std::stoi throws past INT_MAX).
  for (const char* url : {"http://127.0.0.1:99999999999999", "http://127.0.0.1:70000", "http://127.0.0.1:", "http://127.0.0.1:0", "http://h:8x"}) {
    auto bad = RemoteClient::connect({url, "", "", 20, 10});
    QVERIFY2(!bad.ok() && bad.error().message.find("port") != std::string::npos, url);
  }
  auto client = RemoteClient::connect({fake.url(), "", "", 20, 10});
  QVERIFY(client.ok());

  const struct {
    bool chat;
    std::string stream;
    const char* names;
  } streams[] = {
      {false, sse_of({R"({"choices": [{"text": "a", "logprobs": {"content": [{"token": 5}]}}]})"}),
       "choices[0].logprobs.content[0].token is not a string"},
      {false, sse_of({R"({"choices": [{"text": "a"}]})", "hello"}), "not valid JSON"},
      {false, sse_of({R"({"choices": [{"text": "a"}]})", R"({"choices": [], "usage": {"prompt_tokens": "5"}})"}),
       "usage.prompt_tokens is not a whole number"},
      {false, sse_of({R"({"choices": [{"text": "a", "logprobs": {"tokens": ["a"], "token_logprobs": ["x"]}}]})"}),
       "choices[0].logprobs.token_logprobs[0] is not a number"},
      {false, sse_of({R"([1, 2])"}), "not a JSON object"},
      {true, sse_of({R"({"choices": [{"delta": {"content": 5}}]})"}), "choices[0].delta.content is not a string"},
      {true, sse_of({R"({"choices": [{"delta": "x"}]})"}), "choices[0].delta is not an object"},
      {true, sse_of({R"({"choices": "x"})"}), "choices is not an array"},
      {true, sse_of({R"({"choices": [{"finish_reason": 3}]})"}), "choices[0].finish_reason is not a string"},
      {true, sse_of({R"({"error": {"message": "the queue is full"}})"}), "the queue is full"},
  };
  for (const auto& s : streams) {
    fake.set(s.chat ? "chat" : "completions", s.stream);
    auto r = s.chat ? (*client)->chat({{"user", "x", {}}}, greedy(), 4, "", any_token)
                    : (*client)->complete("x", greedy(), 4, any_token);
    QVERIFY2(!r.ok() && r.error().message.find(s.names) != std::string::npos,
             (s.stream + " -> " + (r.ok() ? std::string("ok") : r.error().message)).c_str());
  }
  // A prompt with invalid UTF-8 is sent (as U+FFFD), not thrown on by the JSON writer.
  fake.set("completions", sse_of({R"({"choices": [{"text": "a", "finish_reason": "length"}]})"}));
  auto sent = (*client)->complete("bad \xff\xfe bytes", greedy(), 4, any_token);
  QVERIFY2(sent.ok(), sent.ok() ? "" : sent.error().message.c_str());
  QCOMPARE(sent->text, std::string("a"));

  fake.set("completions", R"({"choices": [{"index": "0", "text": "a"}]})");
  auto n = (*client)->complete_n("x", greedy(), 4, 1);
  QVERIFY(!n.ok() && n.error().message.find("choices[0].index is not a whole number") != std::string::npos);
  fake.set("completions", R"({"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [null, "x"]}}]})");
  auto scored = (*client)->score("a b", 5);
  QVERIFY(!scored.ok() && scored.error().message.find("token_logprobs[1] is not a number") != std::string::npos);
  fake.set("metrics", "\x01\x02 not prometheus {{{ }\nx 1e999\ny nan\n");
  auto metrics = (*client)->metrics();  // unreadable lines are skipped
  QVERIFY(metrics.ok());

  // The workbench's remote engine: the bad answer is that request's error.
  fake.set("chat", sse_of({R"({"choices": [{"delta": {"content": "a"}}]})",
                           R"({"choices": [{"delta": {"content": "b"}, "logprobs": {"content": [{"token": ["b"]}]}}]})"}));
  auto session = gb::server::RemoteSession::connect({fake.url(), "", "", 20, 10}, 50);
  QVERIFY(session.ok());
  const uint64_t id = (*session)->submit_chat({{"user", "x", {}}}, greedy(), 4);
  std::optional<gb::server::RemoteFinished> finished;
  int num_tokens = 0;
  for (int i = 0; i < 500 && !finished; ++i) {  // bounded: 500 x 10 ms
    for (const gb::server::RemoteEvent& e : (*session)->drain()) {
      if (std::holds_alternative<gb::server::RemoteTokenEvent>(e.body)) ++num_tokens;
      if (const auto* f = std::get_if<gb::server::RemoteFinished>(&e.body)) finished = *f;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  QVERIFY(finished.has_value());
  QCOMPARE(finished->request, id);
  QCOMPARE(finished->result.finish_reason, std::string("error"));
  QVERIFY2(finished->error.find("choices[0].logprobs.content[0].token is not a string") != std::string::npos,
           finished->error.c_str());
  QCOMPARE(num_tokens, 1);  // the good chunk before the bad one
  QCOMPARE((*session)->num_active(), 0);
}
