// `glassbox-cli compare` and `glassbox-cli score` end to end: the JSON keys the
// docs promise, identical lanes with no divergence, and clear failures.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "gb_test.h"

GB_TEST(compare_json_has_lanes_samples_divergence_and_statistics) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string lane = R"({"temperature": 1.0, "top_p": 0.9, "top_k": 0, "min_p": 0})";
  const std::string other = R"({"temperature": 0.0})";
  const auto r =
      gbtest::run_cli("compare --model " + gbtest::quote(model) + " --prompt 'Once upon a time' --lane " +
                          gbtest::quote("A=" + lane) + " --lane " + gbtest::quote("B=" + lane) + " --lane " +
                          gbtest::quote("greedy=" + other) + " --samples 2 --seed 3 --crn --max-tokens 12 --json",
                      false);
  QCOMPARE(r.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  QCOMPARE(j["lanes"].size(), size_t{3});
  QCOMPARE(j["crn"].get<bool>(), true);
  QVERIFY(j["kv"]["num_prompt_blocks_shared"].is_number());
  for (const auto& l : j["lanes"]) {
    QVERIFY(l["name"].is_string());
    QVERIFY(l["summary"].contains("mean_logprob"));
    QCOMPARE(l["samples"].size(), size_t{2});
    for (const auto& s : l["samples"]) {
      for (const char* key : {"token_ids", "first_divergence", "mean_logprob", "mean_entropy", "length", "distinct_1",
                              "distinct_2", "repetition_rate", "stop_reason", "tokens_per_s", "seed", "tokens"})
        QVERIFY2(s.contains(key), key);
      QCOMPARE(s["length"].get<size_t>(), s["token_ids"].size());
      QCOMPARE(s["tokens"].size(), s["token_ids"].size());
    }
  }
  QCOMPARE(j["lanes"][0]["name"].get<std::string>(), std::string("A"));
  for (int s = 0; s < 2; ++s) {
    QVERIFY(j["lanes"][0]["samples"][s]["first_divergence"].is_null());
    QVERIFY(j["lanes"][1]["samples"][s]["first_divergence"].is_null());  // same settings, same draws
    QCOMPARE(j["lanes"][1]["samples"][s]["token_ids"], j["lanes"][0]["samples"][s]["token_ids"]);
  }
}

// compare --chat: the prompt is the messages rendered by the model's own chat
// template, the same path as generate --chat; the lanes' prompt ids equal the
// Hugging Face reference ids of that conversation (models/*/refs, "chat").
void check_chat_compare(const std::string& name) {
  GB_REQUIRE_SHARED(model, "models/" + name + "/" + name + "-F16.gguf");
  GB_REQUIRE_SHARED(refs, "models/" + name + "/refs/" + name + "-F16.json");
  std::vector<int> ref_ids;
  std::ifstream in(refs);
  const nlohmann::json reference = nlohmann::json::parse(in);
  for (const auto& p : reference["prompts"])
    if (p["name"] == "chat") ref_ids = p["ids"].get<std::vector<int>>();
  QVERIFY(!ref_ids.empty());
  const std::filesystem::path messages = std::filesystem::temp_directory_path() / ("gb_compare_chat_" + name + ".json");
  std::ofstream(messages) << R"([{"role": "system", "content": "You are a helpful assistant."},
                                 {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]}])";
  const auto r =
      gbtest::run_cli("compare --model " + gbtest::quote(model) + " --chat " + gbtest::quote(messages.string()) +
                          " --lane 'greedy={\"temperature\": 0}' --lane 'hot={\"temperature\": 1.5}'"
                          " --samples 2 --seed 5 --max-tokens 6 --json --no-records",
                      false);
  std::filesystem::remove(messages);
  QCOMPARE(r.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  QCOMPARE(j["prompt_ids"].get<std::vector<int>>(), ref_ids);
  QCOMPARE(j["chat_format"].get<std::string>(), std::string("model"));
  QCOMPARE(j["lanes"].size(), size_t{2});
  for (const auto& l : j["lanes"])
    for (const auto& s : l["samples"]) QVERIFY(s["length"].get<int>() >= 1);
}

GB_TEST(compare_chat_prompt_is_the_template_rendering_tiny_qwen2) { check_chat_compare("tiny-qwen2"); }
GB_TEST(compare_chat_prompt_is_the_template_rendering_tiny_llama3) { check_chat_compare("tiny-llama3"); }

GB_TEST(compare_needs_one_prompt) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  auto r = gbtest::run_cli("compare --model " + gbtest::quote(model) + " --lane 'A={}' --lane 'B={}'");
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.output.find("give --prompt TEXT or --chat MESSAGES.json") != std::string::npos);
  r = gbtest::run_cli("compare --model " + gbtest::quote(model) +
                      " --prompt hi --chat /nonexistent.json --lane 'A={}' --lane 'B={}'");
  QVERIFY(r.exit_code != 0);
  r = gbtest::run_cli("compare --model " + gbtest::quote(model) +
                      " --chat /nonexistent.json --lane 'A={}' --lane 'B={}'");
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.output.find("/nonexistent.json: cannot open") != std::string::npos);
}

GB_TEST(compare_refuses_bad_lanes_clearly) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  auto r = gbtest::run_cli("compare --model " + gbtest::quote(model) + " --prompt hi --lane 'A={}' --json");
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.output.find("1 lanes; give 2 to 6") != std::string::npos);
  r = gbtest::run_cli("compare --model " + gbtest::quote(model) +
                      " --prompt hi --lane 'A={}' --lane B=/nonexistent.json");
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.output.find("cannot open /nonexistent.json") != std::string::npos);
  r = gbtest::run_cli("compare --model " + gbtest::quote(model) +
                      " --prompt hi --lane 'A={}' --lane 'B={\"top_q\": 1}'");
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.output.find("top_q") != std::string::npos);
  r = gbtest::run_cli("compare --model " + gbtest::quote(model) +
                      " --prompt hi --lane 'A={}' --lane 'B={\"kv_policy\": {\"policy\": \"h2o\", \"budgt\": 8}}'");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("--lane B") != std::string::npos && r.output.find("budgt") != std::string::npos,
           r.output.c_str());
  r = gbtest::run_cli("compare --remote http://127.0.0.1:1 --prompt hi --lane 'A={}' "
                      "--lane 'B={\"kv_policy\": {\"policy\": \"sink\", \"budget\": 8}}'");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("lane B: a KV policy runs on a local model") != std::string::npos, r.output.c_str());
}

// KV eviction policies as lanes: the JSON names each lane's resolved policy,
// the pruned lane evicted (its text parts from the full lane's), and a lane
// whose budget holds everything gives the full lane's tokens.
GB_TEST(compare_runs_kv_policies_as_lanes) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r = gbtest::run_cli(
      "compare --model " + gbtest::quote(model) +
          " --prompt 'Once upon a time, there was a little girl named Lily. She loved to play' --max-tokens 48"
          " --ignore-eos --json --no-records --lane 'full={\"temperature\": 0}'"
          " --lane 'sink={\"temperature\": 0, \"kv_policy\": {\"policy\": \"sink\", \"budget\": 8}}'"
          " --lane 'roomy={\"temperature\": 0, \"kv_policy\": {\"policy\": \"h2o\", \"budget\": 128}}'",
      false);
  QCOMPARE(r.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  QCOMPARE(j["lanes"][0]["kv_policy"].get<std::string>(), std::string("full"));
  QCOMPARE(j["lanes"][1]["kv_policy"]["policy"].get<std::string>(), std::string("sink"));
  QCOMPARE(j["lanes"][1]["kv_policy"]["recent"].get<int>(), 4);
  QCOMPARE(j["lanes"][2]["kv_policy"]["budget"].get<int>(), 128);
  QCOMPARE(j["lanes"][2]["samples"][0]["token_ids"], j["lanes"][0]["samples"][0]["token_ids"]);
  QVERIFY(j["lanes"][2]["samples"][0]["first_divergence"].is_null());
  // Four slots of a 60-token sequence: greedy decoding leaves the full lane.
  QVERIFY(j["lanes"][1]["samples"][0]["first_divergence"].is_number());
  QCOMPARE(j["lanes"][1]["samples"][0]["length"].get<int>(), 48);
}

GB_TEST(score_json_keys_and_base_vocabulary_check) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(f16, "models/stories260K/stories260K-F16.gguf");
  GB_REQUIRE_SHARED(other, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  const std::string text_path = "cli_score_text.txt";
  {
    std::FILE* t = std::fopen(text_path.c_str(), "w");
    std::fputs("Tom had a red ball. He liked to play with it every day.", t);
    std::fclose(t);
  }
  auto r = gbtest::run_cli("score --model " + gbtest::quote(f16) + " --ctx 128 --text " + text_path + " --base " +
                               gbtest::quote(model) + " --json",
                           false);
  QCOMPARE(r.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  QVERIFY(j["perplexity"].get<double>() > 1.0);
  for (const char* key : {"kl_mean", "top1_agreement", "kl_percentiles"}) QVERIFY2(j.contains(key), key);
  QVERIFY(!j["tokens"].empty());
  for (const auto& t : j["tokens"]) {
    for (const char* key : {"id", "logprob", "rank", "entropy", "top", "kl", "top1_agree"}) QVERIFY2(t.contains(key), key);
    QCOMPARE(t["top"].size(), size_t{10});
  }
  for (const char* key : {"min", "p01", "p05", "p10", "p50", "p90", "p95", "p99", "p999", "max"})
    QVERIFY2(j["kl_percentiles"].contains(key), key);
  QVERIFY(j["window"].is_null());
  // llama-perplexity's windows: 8-token windows, tokens 5..7 of each counted.
  r = gbtest::run_cli("score --model " + gbtest::quote(f16) + " --ctx 128 --text " + text_path + " --base " +
                          gbtest::quote(model) + " --window 8 --json",
                      false);
  QCOMPARE(r.exit_code, 0);
  const nlohmann::json w = nlohmann::json::parse(r.output);
  QCOMPARE(w["window"].get<int>(), 8);
  QCOMPARE(w["tokens"].size(), (w["num_tokens"].get<size_t>() / 8) * 3);
  for (const auto& t : w["tokens"]) QVERIFY(t["position"].get<int>() % 8 >= 5);
  r = gbtest::run_cli("score --model " + gbtest::quote(model) + " --text " + text_path + " --base " +
                      gbtest::quote(other));
  QVERIFY(r.exit_code != 0);
  QVERIFY(r.output.find("cannot compare") != std::string::npos);
  std::remove(text_path.c_str());
}
