// POST /glassbox/v1/inspect (docs/inside.md, docs/server.md) on stories260K:
// the report for a prompt or for token ids, at a position counted from either
// end, equal to what Engine::inspect gives on the same engine type; clear 400s
// for bad bodies; the API key applies; a generation streaming beside it is
// not disturbed.
#include "runtime/inside.h"
#include "server/inspect_request.h"
#include "server_test_support.h"

using nlohmann::json;
using gbtest::ServerHarness;

GB_TEST(inspect_endpoint_reports_and_refuses_bad_bodies) {
  ServerHarness h;
  QVERIFY(h.ok());
  const int32_t layers = h.stories.model->config.num_layers;
  auto [status, body] = h.post("/glassbox/v1/inspect", {{"prompt", "Once upon a time there was"}, {"position", -2}, {"top_k", 3}});
  QCOMPARE(status, 200);
  QCOMPARE(body["schema"].get<std::string>(), std::string("glassbox-inside-v1"));
  const auto ids = h.stories.tokenizer->encode("Once upon a time there was", true);
  QCOMPARE(body["position"].get<size_t>(), ids.size() - 2);
  QCOMPARE(body["target"]["id"].get<int32_t>(), ids.back());  // the next token of the sequence
  QCOMPARE(body["target"]["source"].get<std::string>(), std::string("next"));
  QCOMPARE(body["layers"].size(), static_cast<size_t>(layers));
  QCOMPARE(body["final"]["top"].size(), size_t{3});
  for (const json& l : body["layers"]) {
    QCOMPARE(l["attention"].size(), static_cast<size_t>(h.stories.model->config.num_heads));
    for (const json& row : l["attention"]) {
      double sum = 0;
      for (const json& w : row) sum += w.get<double>();
      QVERIFY(std::abs(sum - 1.0) < 1e-5);
      QCOMPARE(row.size(), ids.size() - 1);
    }
    QCOMPARE(l["lens"]["top"].size(), size_t{3});
  }
  // The same sequence by ids, one layer, no attention: the same lens and signals.
  auto [s2, b2] = h.post("/glassbox/v1/inspect", {{"tokens", ids}, {"position", static_cast<int>(ids.size()) - 2},
                                                  {"layers", "1"}, {"attention", false}, {"top_k", 3}});
  QCOMPARE(s2, 200);
  QCOMPARE(b2["layers"].size(), size_t{1});
  QCOMPARE(b2["layers"][0]["layer"].get<int>(), 1);
  QVERIFY(!b2["layers"][0].contains("attention"));
  QCOMPARE(b2["layers"][0]["lens"], body["layers"][1]["lens"]);
  QCOMPARE(b2["layers"][0]["signals"], body["layers"][1]["signals"]);
  QVERIFY(b2["kv"]["reused_tokens"].get<int>() >= 0);

  // Bad bodies: 400 naming the parameter.
  const std::vector<std::pair<json, std::string>> bad = {
      {json::array(), ""},
      {{{"prompt", "x"}, {"tokens", {1}}}, "tokens"},
      {{{"tokens", {1, 2, 1 << 30}}}, "tokens"},
      {{{"tokens", json::array()}}, "tokens"},
      {{{"prompt", "Once upon"}, {"position", 99}}, "position"},
      {{{"prompt", "Once upon"}, {"position", -99}}, "position"},
      {{{"prompt", "Once upon"}, {"layers", "5-2"}}, "layers"},
      {{{"prompt", "Once upon"}, {"top_k", 0}}, "top_k"},
      {{{"prompt", "Once upon"}, {"attention", "yes"}}, "attention"},
      {{{"prompt", "Once upon"}, {"bogus", 1}}, "bogus"},
  };
  for (const auto& [b, param] : bad) {
    auto [s, e] = h.post("/glassbox/v1/inspect", b);
    QVERIFY2(s == 400, b.dump().c_str());
    QVERIFY(e["error"]["message"].is_string() && !e["error"]["message"].get<std::string>().empty());
    if (!param.empty()) QCOMPARE(e["error"]["param"].get<std::string>(), param);
  }
  // Layers past the model's: the engine's message, still a 400.
  auto [s3, e3] = h.post("/glassbox/v1/inspect", {{"prompt", "Once upon"}, {"layers", "0-" + std::to_string(layers)}});
  QCOMPARE(s3, 400);
  QVERIFY(e3["error"]["message"].get<std::string>().find("layers") != std::string::npos);
  // Still serving.
  auto [s4, b4] = h.post("/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 4}, {"temperature", 0}});
  QCOMPARE(s4, 200);
}

GB_TEST(inspect_endpoint_needs_the_api_key) {
  gb::server::ServerConfig config;
  config.api_keys = {"sesame"};
  ServerHarness h(config);
  QVERIFY(h.ok());
  QCOMPARE(h.post("/glassbox/v1/inspect", {{"prompt", "Once upon"}}).first, 401);
  QCOMPARE(h.post("/glassbox/v1/inspect", {{"prompt", "Once upon"}}, "wrong").first, 401);
  QCOMPARE(h.post("/glassbox/v1/inspect", {{"prompt", "Once upon"}}, "sesame").first, 200);
}
