// The OpenAI-compatible server over loopback HTTP (httplib client, raw JSON):
// both endpoints with and without streaming, greedy text equal to the engine
// run directly, logprobs shapes, seeds, stop strings, n > 1, usage and cached
// tokens, tenant isolation of the prefix cache, auth, every error status, and
// cancellation when a streaming client disconnects (blocks freed, seen in
// /metrics). Bounded: every wait is a bounded poll, no timing is asserted.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "runtime/chat_request.h"
#include "runtime/make_backend.h"
#include "runtime/text_scorer.h"
#include "server/openai_request.h"
#include "server_test_support.h"
#include "template/chat_template.h"

using nlohmann::json;
using gbtest::ServerHarness;

namespace {

const char* kPrompt = "Once upon a time";
using gbtest::engine_greedy_text;

// Streams a request; returns the parsed chunks (without [DONE]) and whether [DONE] came last.
std::pair<std::vector<json>, bool> stream(const ServerHarness& h, const std::string& path, const json& body) {
  auto c = h.client();
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  std::vector<json> chunks;
  if (!r || r->status != 200) return {chunks, false};
  const auto data = gbtest::sse_data(r->body);
  for (size_t i = 0; i + 1 < data.size(); ++i) chunks.push_back(json::parse(data[i], nullptr, false));
  return {chunks, !data.empty() && data.back() == "[DONE]"};
}

void check_error(int status, const json& body, int want_status, const std::string& want_param) {
  QCOMPARE(status, want_status);
  QVERIFY2(body.is_object() && body.contains("error"), body.dump().c_str());
  const json& e = body["error"];
  QVERIFY(e["message"].is_string() && !e["message"].get<std::string>().empty());
  QVERIFY(e.contains("type") && e.contains("param") && e.contains("code"));
  if (want_param.empty()) QVERIFY(e["param"].is_null());
  else QCOMPARE(e["param"].get<std::string>(), want_param);
}

}  // namespace

GB_TEST(models_health_and_metrics) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto c = h.client();
  auto models = c.Get("/v1/models");
  QVERIFY(models && models->status == 200);
  const json m = json::parse(models->body);
  QCOMPARE(m["object"].get<std::string>(), std::string("list"));
  QCOMPARE(m["data"][0]["id"].get<std::string>(), std::string("stories260K"));
  auto one = c.Get("/v1/models/stories260K");
  QVERIFY(one && one->status == 200);
  auto health = c.Get("/health");
  QVERIFY(health && health->status == 200);
  const auto metrics = h.metrics();
  for (const char* name : {"glassbox_num_requests_running", "glassbox_num_requests_waiting", "glassbox_kv_cache_usage_perc",
                           "glassbox_prefix_cache_hit_rate", "glassbox_num_preemptions_total", "glassbox_prompt_tokens_total",
                           "glassbox_generation_tokens_total", "glassbox_time_to_first_token_seconds_count",
                           "glassbox_time_per_output_token_seconds_count", "glassbox_request_queue_time_seconds_count"})
    QVERIFY2(metrics.count(name) == 1, name);
  QCOMPARE(metrics.at("glassbox_kv_blocks_total"), static_cast<double>(h.worker->info().num_blocks));
}

GB_TEST(completions_greedy_equals_engine_and_stream_equals_whole) {
  ServerHarness h;
  QVERIFY(h.ok());
  const std::string want = engine_greedy_text(h.stories, kPrompt, 40);
  const json body = {{"model", "stories260K"}, {"prompt", kPrompt}, {"max_tokens", 40}, {"temperature", 0}};
  auto [status, r] = h.post("/v1/completions", body);
  QCOMPARE(status, 200);
  QCOMPARE(r["object"].get<std::string>(), std::string("text_completion"));
  QCOMPARE(r["choices"][0]["text"].get<std::string>(), want);
  const int num_prompt = static_cast<int>(h.stories.tokenizer->encode(kPrompt, true).size());
  QCOMPARE(r["usage"]["prompt_tokens"].get<int>(), num_prompt);
  QVERIFY(r["usage"]["completion_tokens"].get<int>() > 0);
  QCOMPARE(r["usage"]["total_tokens"].get<int>(), num_prompt + r["usage"]["completion_tokens"].get<int>());
  QVERIFY(r["usage"]["prompt_tokens_details"]["cached_tokens"].is_number_integer());

  json sbody = body;
  sbody["stream"] = true;
  sbody["stream_options"] = {{"include_usage", true}};
  auto [chunks, done] = stream(h, "/v1/completions", sbody);
  QVERIFY2(done, "the stream must end with data: [DONE]");
  QVERIFY(chunks.size() >= 2);
  std::string text;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    QCOMPARE(chunks[i]["object"].get<std::string>(), std::string("text_completion"));
    QVERIFY(chunks[i]["usage"].is_null());
    text += chunks[i]["choices"][0]["text"].get<std::string>();
  }
  QCOMPARE(text, want);
  QCOMPARE(chunks[chunks.size() - 2]["choices"][0]["finish_reason"].get<std::string>(),
           r["choices"][0]["finish_reason"].get<std::string>());
  const json& last = chunks.back();  // the usage chunk
  QVERIFY(last["choices"].empty());
  QCOMPARE(last["usage"]["completion_tokens"], r["usage"]["completion_tokens"]);
}

GB_TEST(chat_completions_whole_and_streamed) {
  ServerHarness h;
  QVERIFY(h.ok());
  const json body = {{"messages", json::array({{{"role", "system"}, {"content", "Lily had a dog. "}},
                                               {{"role", "user"}, {"content", "One day"}}})},
                     {"max_tokens", 30}, {"temperature", 0}};
  auto [status, r] = h.post("/v1/chat/completions", body);
  QCOMPARE(status, 200);
  QCOMPARE(r["object"].get<std::string>(), std::string("chat.completion"));
  QCOMPARE(r["choices"][0]["message"]["role"].get<std::string>(), std::string("assistant"));
  // stories260K has no chat template: the plain format continues the joined text.
  QCOMPARE(r["choices"][0]["message"]["content"].get<std::string>(), engine_greedy_text(h.stories, "Lily had a dog. One day", 30));
  QVERIFY(r["choices"][0]["logprobs"].is_null());

  json sbody = body;
  sbody["stream"] = true;
  auto [chunks, done] = stream(h, "/v1/chat/completions", sbody);
  QVERIFY(done);
  QVERIFY(chunks.size() >= 3);
  QCOMPARE(chunks[0]["object"].get<std::string>(), std::string("chat.completion.chunk"));
  QCOMPARE(chunks[0]["choices"][0]["delta"]["role"].get<std::string>(), std::string("assistant"));
  std::string text;
  for (const json& c : chunks)
    if (c["choices"][0]["delta"].contains("content")) text += c["choices"][0]["delta"]["content"].get<std::string>();
  QCOMPARE(text, r["choices"][0]["message"]["content"].get<std::string>());
  QVERIFY(chunks.back()["choices"][0]["delta"].empty());
  QCOMPARE(chunks.back()["choices"][0]["finish_reason"], r["choices"][0]["finish_reason"]);
}

GB_TEST(logprobs_shapes) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto [status, r] = h.post("/v1/chat/completions", {{"messages", json::array({{{"role", "user"}, {"content", kPrompt}}})},
                                                     {"max_tokens", 12}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 3}});
  QCOMPARE(status, 200);
  const json& content = r["choices"][0]["logprobs"]["content"];
  QCOMPARE(static_cast<int>(content.size()), r["usage"]["completion_tokens"].get<int>());
  std::string joined;
  for (const json& t : content) {
    QVERIFY(t["logprob"].get<double>() <= 0.0);
    QCOMPARE(t["bytes"].size(), t["token"].get<std::string>().size());
    QCOMPARE(t["top_logprobs"].size(), size_t{3});
    // Greedy: the chosen token is the most likely one, with the same logprob.
    QCOMPARE(t["top_logprobs"][0]["token"], t["token"]);
    QCOMPARE(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>());
    QVERIFY(t["top_logprobs"][0]["logprob"].get<double>() >= t["top_logprobs"][1]["logprob"].get<double>());
    double mass = 0;
    for (const json& alt : t["top_logprobs"]) mass += std::exp(alt["logprob"].get<double>());
    QVERIFY(mass <= 1.0 + 1e-5);
    joined += t["token"].get<std::string>();
  }
  QCOMPARE(joined, r["choices"][0]["message"]["content"].get<std::string>());

  auto [s2, c] = h.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 2}});
  QCOMPARE(s2, 200);
  const json& lp = c["choices"][0]["logprobs"];
  const size_t n = lp["tokens"].size();
  QCOMPARE(static_cast<int>(n), c["usage"]["completion_tokens"].get<int>());
  QCOMPARE(lp["token_logprobs"].size(), n);
  QCOMPARE(lp["top_logprobs"].size(), n);
  QCOMPARE(lp["text_offset"].size(), n);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    QCOMPARE(lp["text_offset"][i].get<int64_t>(), offset);
    offset += static_cast<int64_t>(lp["tokens"][i].get<std::string>().size());
    QVERIFY(lp["top_logprobs"][i].is_object() && lp["top_logprobs"][i].size() <= 2 && !lp["top_logprobs"][i].empty());
    QCOMPARE(lp["top_logprobs"][i][lp["tokens"][i].get<std::string>()].get<double>(), lp["token_logprobs"][i].get<double>());
  }
  // Streaming carries the same logprobs, a token per chunk.
  auto [chunks, done] = stream(h, "/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 2}, {"stream", true}});
  QVERIFY(done);
  std::vector<double> streamed;
  for (const json& ch : chunks)
    if (!ch["choices"][0]["logprobs"].is_null())
      for (const json& v : ch["choices"][0]["logprobs"]["token_logprobs"]) streamed.push_back(v.get<double>());
  QCOMPARE(streamed.size(), n);
  for (size_t i = 0; i < n; ++i) QCOMPARE(streamed[i], lp["token_logprobs"][i].get<double>());
}

GB_TEST(seeds_reproduce_and_n_choices) {
  ServerHarness h;
  QVERIFY(h.ok());
  const json body = {{"prompt", kPrompt}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", 42}, {"n", 3}};
  auto [s1, a] = h.post("/v1/completions", body);
  auto [s2, b] = h.post("/v1/completions", body);
  QCOMPARE(s1, 200);
  QCOMPARE(s2, 200);
  QCOMPARE(a["choices"].size(), size_t{3});
  std::set<std::string> distinct;
  for (size_t i = 0; i < 3; ++i) {
    QCOMPARE(a["choices"][i]["index"].get<size_t>(), i);
    QCOMPARE(a["choices"][i]["text"], b["choices"][i]["text"]);  // same seed, same text
    distinct.insert(a["choices"][i]["text"].get<std::string>());
  }
  QVERIFY2(distinct.size() > 1, "n choices draw from different seeds");
  // The prompt counts once, not once per choice.
  QCOMPARE(a["usage"]["prompt_tokens"].get<size_t>(), h.stories.tokenizer->encode(kPrompt, true).size());
  // A batch of two prompts with n = 2: four choices, prompt i owns choices 2i, 2i+1.
  auto [s3, c] = h.post("/v1/completions", {{"prompt", json::array({kPrompt, "Tom"})}, {"max_tokens", 5}, {"n", 2}, {"seed", 1}});
  QCOMPARE(s3, 200);
  QCOMPARE(c["choices"].size(), size_t{4});
}

GB_TEST(stop_strings_end_the_text_before_them) {
  ServerHarness h;
  QVERIFY(h.ok());
  const std::string full = engine_greedy_text(h.stories, kPrompt, 60);
  // A stop string from the middle of the greedy text: a word after the 20th byte.
  const size_t at = full.find(' ', 20);
  QVERIFY(at != std::string::npos && at + 4 < full.size());
  const std::string stop = full.substr(at, 4);
  auto [status, r] = h.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 60}, {"temperature", 0},
                                                {"stop", json::array({stop, "@@never@@"})}});
  QCOMPARE(status, 200);
  QCOMPARE(r["choices"][0]["text"].get<std::string>(), full.substr(0, full.find(stop)));
  QCOMPARE(r["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
  auto [chunks, done] = stream(h, "/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 60}, {"temperature", 0},
                                                       {"stop", stop}, {"stream", true}});
  QVERIFY(done);
  std::string text;
  for (const json& c : chunks) text += c["choices"][0]["text"].get<std::string>();
  QCOMPARE(text, full.substr(0, full.find(stop)));
}

GB_TEST(max_tokens_ends_with_length) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto [status, r] = h.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 7}, {"ignore_eos", true}, {"temperature", 0}});
  QCOMPARE(status, 200);
  QCOMPARE(r["usage"]["completion_tokens"].get<int>(), 7);
  QCOMPARE(r["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
  auto [s2, c] = h.post("/v1/chat/completions", {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                                 {"max_completion_tokens", 3}, {"ignore_eos", true}});
  QCOMPARE(s2, 200);
  QCOMPARE(c["usage"]["completion_tokens"].get<int>(), 3);
}

// A request with a KV policy: a budget past the sequence answers exactly what
// full does; a small one runs (past the context for sink) and answers.
GB_TEST(kv_policy_requests_run_and_a_large_budget_equals_full) {
  ServerHarness h;
  QVERIFY(h.ok());
  const json base = {{"prompt", kPrompt}, {"max_tokens", 12}, {"ignore_eos", true}, {"temperature", 0}};
  auto [s1, full] = h.post("/v1/completions", base);
  json big = base;
  big["kv_policy"] = {{"policy", "h2o"}, {"budget", 400}};
  auto [s2, same] = h.post("/v1/completions", big);
  QCOMPARE(s1, 200);
  QCOMPARE(s2, 200);
  QCOMPARE(same["choices"][0]["text"], full["choices"][0]["text"]);
  json small = base;
  small["kv_policy"] = {{"policy", "sink"}, {"budget", 16}};
  small["max_tokens"] = 600;  // past stories260K's 512-token context
  auto [s3, pruned] = h.post("/v1/completions", small);
  QVERIFY2(s3 == 200, pruned.dump().c_str());
  QVERIFY(pruned["usage"]["completion_tokens"].get<int>() > 0);
  json bad = base;
  bad["kv_policy"] = "nonsense";
  auto [s4, err] = h.post("/v1/completions", bad);
  QCOMPARE(s4, 400);
  QCOMPARE(err["error"]["param"].get<std::string>(), std::string("kv_policy"));
}

GB_TEST(same_tenant_shares_prefix_other_tenant_does_not) {
  gb::server::ServerConfig config;
  config.api_keys = {"alice-key", "bob-key"};
  ServerHarness h(config);
  QVERIFY(h.ok());
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog.";
  const json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}};
  auto [s1, a1] = h.post("/v1/completions", body, "alice-key");
  auto [s2, a2] = h.post("/v1/completions", body, "alice-key");
  auto [s3, b1] = h.post("/v1/completions", body, "bob-key");
  QCOMPARE(s1, 200);
  QCOMPARE(s2, 200);
  QCOMPARE(s3, 200);
  QCOMPARE(a1["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  QVERIFY2(a2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() >= 16, a2.dump().c_str());
  QCOMPARE(b1["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);  // never across tenants
  QCOMPARE(a2["choices"][0]["text"], a1["choices"][0]["text"]);                  // a hit changes nothing
  QVERIFY(h.metrics().at("glassbox_prefix_cache_hits_total") >= 16);
}

GB_TEST(auth_401_without_or_with_a_wrong_key) {
  gb::server::ServerConfig config;
  config.api_keys = {"secret"};
  ServerHarness h(config);
  QVERIFY(h.ok());
  const json body = {{"prompt", kPrompt}, {"max_tokens", 2}};
  auto [s1, e1] = h.post("/v1/completions", body);
  check_error(s1, e1, 401, "");
  QCOMPARE(e1["error"]["code"].get<std::string>(), std::string("invalid_api_key"));
  auto [s2, e2] = h.post("/v1/completions", body, "secreT");
  check_error(s2, e2, 401, "");
  auto [s3, ok] = h.post("/v1/completions", body, "secret");
  QCOMPARE(s3, 200);
  auto keep = h.client("secreT");
  keep.set_keep_alive(true);  // a refused body is never read: the next request must still parse
  auto refused = keep.Post("/v1/completions", body.dump(), "application/json");
  QVERIFY(refused && refused->status == 401);
  keep.set_bearer_token_auth("secret");
  auto accepted = keep.Post("/v1/completions", body.dump(), "application/json");
  QVERIFY(accepted && accepted->status == 200);
  auto c = h.client();
  auto models = c.Get("/v1/models");
  QVERIFY(models && models->status == 401);
  auto health = c.Get("/health");  // health and metrics stay open (loopback by default)
  QVERIFY(health && health->status == 200);
}

GB_TEST(errors_400_404_413_431_in_openai_shape) {
  gb::server::ServerConfig config;
  config.max_body_bytes = 4096;
  ServerHarness h(config);
  QVERIFY(h.ok());
  const json ok = {{"prompt", kPrompt}, {"max_tokens", 2}};
  const auto with = [&](const char* key, json value) {
    json b = ok;
    b[key] = std::move(value);
    return b;
  };
  const struct { json body; const char* param; } bad[] = {
      {with("temperature", 3), "temperature"},      {with("temperature", "hot"), "temperature"},
      {with("top_p", 0), "top_p"},                  {with("n", 0), "n"},
      {with("n", 1000), "n"},                       {with("max_tokens", 0), "max_tokens"},
      {with("max_tokens", 100000), "max_tokens"},   {with("logprobs", 50), "logprobs"},
      {with("logit_bias", {{"999999", 1}}), "logit_bias"}, {with("logit_bias", {{"5", 500}}), "logit_bias"},
      {with("stop", 7), "stop"},                    {with("seed", "x"), "seed"},
      {with("echo", true), "echo"},                 {with("top_k", 1.5), "top_k"},
      {with("min_p", 2), "min_p"},                  {with("stream_options", {{"include_usage", true}}), "stream_options"},
      {with("prompt", json::array()), "prompt"},    {with("prompt", json::array({1, 2, 99999})), "prompt"},
      {json{{"max_tokens", 2}}, "prompt"},
  };
  for (const auto& b : bad) {
    auto [status, body] = h.post("/v1/completions", b.body);
    check_error(status, body, 400, b.param);
    if (QTest::currentTestFailed()) std::fprintf(stderr, "request: %s\n", b.body.dump().c_str());
  }
  auto [sc, ec] = h.post("/v1/chat/completions", {{"messages", json::array({{{"role", "robot"}, {"content", "x"}}})}});
  check_error(sc, ec, 400, "messages[0].role");
  auto [st, et] = h.post("/v1/chat/completions", {{"messages", json::array({{{"role", "user"}, {"content", "x"}}})},
                                                  {"top_logprobs", 2}});
  check_error(st, et, 400, "top_logprobs");
  // A prompt longer than the context (512 tokens).
  std::string longp;
  for (int i = 0; i < 300; ++i) longp += "the dog ";
  auto [sl, el] = h.post("/v1/completions", with("prompt", longp));
  check_error(sl, el, 400, "prompt");
  QCOMPARE(el["error"]["code"].get<std::string>(), std::string("context_length_exceeded"));

  auto c = h.client();
  auto malformed = c.Post("/v1/completions", "{\"prompt\": \"x\",", "application/json");
  QVERIFY(malformed);
  check_error(malformed->status, json::parse(malformed->body), 400, "");
  auto [sm, em] = h.post("/v1/completions", with("model", "gpt-4"));
  check_error(sm, em, 404, "model");
  QCOMPARE(em["error"]["code"].get<std::string>(), std::string("model_not_found"));
  c.set_keep_alive(true);  // the unread body of a 413 must not be taken for the next request
  for (int i = 0; i < 2; ++i) {
    auto big = c.Post("/v1/completions", json{{"prompt", std::string(10000, 'a')}}.dump(), "application/json");
    QVERIFY(big);
    check_error(big->status, json::parse(big->body), 413, "");
    auto next = c.Post("/v1/completions", ok.dump(), "application/json");
    QVERIFY(next && next->status == 200);
  }
  httplib::Headers many;
  for (int i = 0; i < 100; ++i) many.emplace("X-Filler-" + std::to_string(i), "x");
  auto crowded = c.Get("/v1/models", many);
  QVERIFY(crowded);
  check_error(crowded->status, json::parse(crowded->body), 431, "");
  auto huge = c.Get("/v1/models", httplib::Headers{{"X-Huge", std::string(20000, 'x')}});  // over cpp-httplib's 8 KiB line
  QVERIFY(!huge || huge->status >= 400);
  auto still = h.client().Get("/v1/models");  // and the server still answers
  QVERIFY(still && still->status == 200);
  auto nowhere = c.Get("/v1/nowhere");
  QVERIFY(nowhere);
  check_error(nowhere->status, json::parse(nowhere->body), 404, "");
  // Nothing bad reached the engine, and the good requests have ended. The gauge
  // follows the engine thread, which may retire the last 200's request just
  // after its response went out (CI saw 1 here): a bounded poll.
  std::map<std::string, double> m = h.metrics();
  for (int i = 0; i < 200 && m.at("glassbox_num_requests_running") != 0.0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    m = h.metrics();
  }
  QVERIFY(m.at("glassbox_http_responses_total{code=\"400\"}") >= 20);
  QCOMPARE(m.at("glassbox_num_requests_running"), 0.0);
}

GB_TEST(queue_full_429_and_unavailable_503_with_retry_after) {
  ServerHarness h({}, gb::server::WorkerConfig{2, {}});
  QVERIFY(h.ok());
  auto c = h.client();
  // Three choices cannot wait in a queue of two.
  auto full = c.Post("/v1/completions", json{{"prompt", kPrompt}, {"n", 3}, {"max_tokens", 2}}.dump(), "application/json");
  QVERIFY(full);
  check_error(full->status, json::parse(full->body), 429, "");
  QVERIFY(full->has_header("Retry-After"));
  auto fits = c.Post("/v1/completions", json{{"prompt", kPrompt}, {"n", 2}, {"max_tokens", 2}}.dump(), "application/json");
  QVERIFY(fits && fits->status == 200);
  // Echo scoring counts against the same limit: three prompts cannot wait in a queue of two.
  const json three = {{"prompt", json::array({kPrompt, "One day", "The cat"})}, {"echo", true}, {"max_tokens", 0},
                      {"logprobs", 1}};
  auto echo_full = c.Post("/v1/completions", three.dump(), "application/json");
  QVERIFY(echo_full);
  check_error(echo_full->status, json::parse(echo_full->body), 429, "");
  QVERIFY(echo_full->has_header("Retry-After"));
  json two = three;
  two["prompt"] = json::array({kPrompt, "One day"});
  auto echo_fits = c.Post("/v1/completions", two.dump(), "application/json");
  QVERIFY2(echo_fits && echo_fits->status == 200, echo_fits ? echo_fits->body.c_str() : "no answer");
  h.worker->stop();  // the engine is gone, HTTP still answers
  auto gone = c.Post("/v1/completions", json{{"prompt", kPrompt}, {"max_tokens", 2}}.dump(), "application/json");
  QVERIFY(gone);
  check_error(gone->status, json::parse(gone->body), 503, "");
  QVERIFY(gone->has_header("Retry-After"));
  auto health = c.Get("/health");
  QVERIFY(health && health->status == 503);
}

GB_TEST(concurrent_requests_batch_and_match_alone) {
  ServerHarness h;
  QVERIFY(h.ok());
  const std::vector<std::string> prompts = {"Once upon a time", "Lily wanted", "The dog ran", "Tom and Sue",
                                            "One day, a bird", "The sun was", "A big cat", "Mom said"};
  std::vector<std::string> got(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      auto [status, r] = h.post("/v1/completions", {{"prompt", prompts[i]}, {"max_tokens", 30}, {"temperature", 0}});
      got[i] = status == 200 ? r["choices"][0]["text"].get<std::string>() : "<HTTP " + std::to_string(status) + ">";
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(got[i], engine_greedy_text(h.stories, prompts[i], 30));
}

GB_TEST(client_disconnect_cancels_and_frees_blocks) {
  // Slow motion (20 ms a step) so the 400-token request is still running when
  // the client goes away; the server must notice, cancel and free its blocks.
  ServerHarness h({}, gb::server::WorkerConfig{256, std::chrono::milliseconds(20)});
  QVERIFY(h.ok());
  {
    httplib::Client c("127.0.0.1", h.server->port());
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = json{{"prompt", kPrompt}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}}.dump();
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };  // false: hang up
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    QVERIFY(!c.send(req, res, error));  // the client cancelled the read
    QVERIFY(chunks >= 3);
  }
  std::map<std::string, double> m;
  for (int i = 0; i < 200; ++i) {  // bounded poll until the cancellation shows
    m = h.metrics();
    if (m["glassbox_request_finished_total{reason=\"cancelled\"}"] >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  QCOMPARE(m["glassbox_request_finished_total{reason=\"cancelled\"}"], 1.0);
  QCOMPARE(m["glassbox_num_requests_running"], 0.0);
  QCOMPARE(m["glassbox_kv_blocks_used"], 0.0);  // freed at once, not when 400 tokens would have run
  QVERIFY(m["glassbox_generation_tokens_total"] < 400);
}

// echo + logprobs with max_tokens 0 scores the prompt (as vLLM answers):
// OpenAI's completions logprobs shape, the first token null, each other
// token's logprob equal to local teacher forcing; nothing is generated.
GB_TEST(echo_with_max_tokens_0_scores_the_prompt) {
  ServerHarness h;
  QVERIFY(h.ok());
  auto [status, body] = h.post("/v1/completions", {{"prompt", kPrompt}, {"echo", true}, {"logprobs", 3}, {"max_tokens", 0}});
  QCOMPARE(status, 200);
  const json& c = body["choices"][0];
  QCOMPARE(c["text"].get<std::string>(), std::string(kPrompt));
  const std::vector<gb::TokenId> ids = h.stories.tokenizer->encode(kPrompt, true);
  QCOMPARE(c["logprobs"]["tokens"].size(), ids.size());
  QVERIFY(c["logprobs"]["token_logprobs"][0].is_null());
  QVERIFY(c["logprobs"]["top_logprobs"][0].is_null());
  auto backend = gb::make_backend(h.stories.model, {gb::Device::Cpu, 0});
  QVERIFY(backend.ok());
  auto local = gb::score_tokens(*h.stories.model, **backend, nullptr, nullptr, ids, {});
  QVERIFY(local.ok());
  for (size_t i = 1; i < ids.size(); ++i) {
    QVERIFY(std::abs(c["logprobs"]["token_logprobs"][i].get<double>() - local->tokens[i - 1].logprob) < 1e-4);
    QVERIFY(c["logprobs"]["top_logprobs"][i].size() <= 3);
  }
  QCOMPARE(body["usage"]["prompt_tokens"].get<int>(), static_cast<int>(ids.size()));
  QCOMPARE(body["usage"]["completion_tokens"].get<int>(), 0);
  // Without logprobs: the prompt echoed, logprobs null.
  auto [status2, plain] = h.post("/v1/completions", {{"prompt", kPrompt}, {"echo", true}, {"max_tokens", 0}});
  QCOMPARE(status2, 200);
  QVERIFY(plain["choices"][0]["logprobs"].is_null());
}

// tools and chat_template_kwargs reach the model's own chat template (Qwen2's
// renders a tools section): the prompt the server counts equals the one the
// engine renders locally with the same variables, and differs without them.
GB_TEST(tools_and_template_kwargs_reach_the_chat_template) {
  gbtest::StoriesFixture qwen = gbtest::load_fixture("models/tiny-qwen2/tiny-qwen2-F16.gguf", 256);
  QVERIFY2(qwen.ok(), "models/tiny-qwen2/tiny-qwen2-F16.gguf is missing or does not load");
  ServerHarness h({}, {}, {}, qwen);
  QVERIFY(h.ok());
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", json::object()}}}}});
  const json messages = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  auto [s1, with] = h.post("/v1/chat/completions", {{"messages", messages}, {"tools", tools}, {"max_tokens", 1},
                                                    {"chat_template_kwargs", {{"enable_thinking", false}}}});
  auto [s2, without] = h.post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}});
  QCOMPARE(s1, 200);
  QCOMPARE(s2, 200);
  const gb::ChatFormatter formatter = gb::chat_formatter_for(*qwen.model, *qwen.tokenizer);
  QVERIFY(formatter.uses_model_template());
  gb::ChatRenderOptions options;
  auto extra = gb::json_to_value(json{{"enable_thinking", false}, {"tools", tools}}.dump());
  QVERIFY(extra.ok());
  options.extra = *extra;
  const auto local = gb::make_chat_request(formatter, *qwen.tokenizer, {{"user", "Weather in Paris?", {}}}, {}, options);
  QVERIFY(local.prompt.text.find("get_weather") != std::string::npos);
  QCOMPARE(with["usage"]["prompt_tokens"].get<int>(), static_cast<int>(local.request.prompt_ids.size()));
  QVERIFY(without["usage"]["prompt_tokens"].get<int>() < with["usage"]["prompt_tokens"].get<int>());
}

// A web page must not reach a keyless server on loopback: a Host that is not
// this server (DNS rebinding) and an Origin that was not allowed are refused
// with 403 before anything runs; allowed origins get CORS headers and their
// preflight. A non-loopback address without a key is refused unless asked for.
GB_TEST(hosts_origins_and_the_bind_policy) {
  gb::server::ServerConfig config;
  config.allowed_origins = {"http://localhost:3000"};
  config.allowed_hosts = {"glassbox.lan"};
  ServerHarness h(config);
  QVERIFY(h.ok());
  const std::string body = json{{"prompt", kPrompt}, {"max_tokens", 2}}.dump();
  auto c = h.client();
  const auto post = [&](const httplib::Headers& headers) { return c.Post("/v1/completions", headers, body, "application/json"); };
  auto plain = post({});
  QVERIFY(plain && plain->status == 200);
  for (const char* host : {"localhost:8080", "127.0.0.1", "[::1]:9", "GLASSBOX.lan:1234"}) {
    auto r = post({{"Host", host}});
    QVERIFY2(r && r->status == 200, host);
  }
  for (const char* host : {"attacker.example", "attacker.example:8080", "127.0.0.1.attacker.example", "[::2]:80"}) {
    auto r = post({{"Host", host}});
    QVERIFY2(r, host);
    check_error(r->status, json::parse(r->body), 403, "");
    QCOMPARE(json::parse(r->body)["error"]["code"].get<std::string>(), std::string("host_not_allowed"));
  }
  auto evil = post({{"Origin", "http://evil.example"}});
  QVERIFY(evil);
  check_error(evil->status, json::parse(evil->body), 403, "");
  QCOMPARE(json::parse(evil->body)["error"]["code"].get<std::string>(), std::string("origin_not_allowed"));
  auto models = c.Get("/v1/models", httplib::Headers{{"Origin", "null"}});  // a sandboxed page or a file:// page
  QVERIFY(models && models->status == 403);
  auto friendly = post({{"Origin", "http://localhost:3000"}});
  QVERIFY(friendly && friendly->status == 200);
  QCOMPARE(friendly->get_header_value("Access-Control-Allow-Origin"), std::string("http://localhost:3000"));
  auto preflight = c.Options("/v1/completions", httplib::Headers{{"Origin", "http://localhost:3000"},
                                                                  {"Access-Control-Request-Method", "POST"}});
  QVERIFY(preflight && preflight->status == 204);
  QVERIFY(preflight->get_header_value("Access-Control-Allow-Methods").find("POST") != std::string::npos);
  auto bad_preflight = c.Options("/v1/completions", httplib::Headers{{"Origin", "http://evil.example"}});
  QVERIFY(bad_preflight && bad_preflight->status == 403);
  // The gauge follows the engine thread: a bounded poll until the allowed requests have ended.
  double running = -1;
  for (int i = 0; i < 200 && running != 0.0; ++i) {
    running = h.metrics().at("glassbox_num_requests_running");
    if (running != 0.0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  QCOMPARE(running, 0.0);

  // Every interface and no key: refused, with the way out named.
  gb::server::ServerConfig open;
  open.host = "0.0.0.0";
  open.port = 0;
  gb::server::OpenAiServer refused(h.worker->hub(), h.stories.model, h.stories.tokenizer, open);
  const gb::Status st = refused.start();
  QVERIFY(!st.ok());
  QVERIFY2(st.error().message.find("--insecure-no-key") != std::string::npos, st.error().message.c_str());
  open.insecure_no_key = true;
  gb::server::OpenAiServer allowed(h.worker->hub(), h.stories.model, h.stories.tokenizer, open);
  QVERIFY(allowed.start().ok());
  allowed.stop();
  open.insecure_no_key = false;
  open.api_keys = {"k"};
  gb::server::OpenAiServer keyed(h.worker->hub(), h.stories.model, h.stories.tokenizer, open);
  QVERIFY(keyed.start().ok());
  keyed.stop();
  QVERIFY(gb::server::is_loopback_host("127.0.0.2") && gb::server::is_loopback_host("[::1]") &&
          !gb::server::is_loopback_host("0.0.0.0") && !gb::server::is_loopback_host("192.168.1.2"));
}

// A chunked body has no Content-Length to refuse up front: it is bounded while
// it is read (413 past max_body_bytes), so 64 MiB sent that way never sits in
// the server's memory, and the server answers the next request.
GB_TEST(chunked_bodies_are_bounded_while_read) {
  gb::server::ServerConfig config;
  config.max_body_bytes = 1 << 20;
  ServerHarness h(config);
  QVERIFY(h.ok());
  auto warm = h.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 2}});
  QCOMPARE(warm.first, 200);
  const long long before = gbtest::vm_hwm_kib();
  QVERIFY(before > 0);
  const std::string piece(64 * 1024, ' ');
  size_t sent = 0;
  auto c = h.client();
  auto r = c.Post(
      "/v1/completions",
      [&](size_t, httplib::DataSink& sink) {
        if (sent >= (64u << 20)) {
          sink.done();
          return true;
        }
        sent += piece.size();
        return sink.write(piece.data(), piece.size());
      },
      "application/json");
  // The server answers 413 and closes; the client may see the answer or a closed connection.
  if (r) check_error(r->status, json::parse(r->body), 413, "");
  const long long after = gbtest::vm_hwm_kib();
  QVERIFY2(after - before < 24 * 1024, (std::to_string(before) + " KiB -> " + std::to_string(after) + " KiB").c_str());
  auto next = h.post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 2}});
  QCOMPARE(next.first, 200);
  // A small chunked body is read and served like any other.
  const std::string small = json{{"prompt", kPrompt}, {"max_tokens", 2}}.dump();
  bool written = false;
  auto ok = c.Post(
      "/v1/completions",
      [&](size_t, httplib::DataSink& sink) {
        if (!written) sink.write(small.data(), small.size());
        written = true;
        sink.done();
        return true;
      },
      "application/json");
  QVERIFY(ok && ok->status == 200);
}
