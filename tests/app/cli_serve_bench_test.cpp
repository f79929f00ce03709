// `glassbox-cli serve-bench` from outside: the summary has every documented key,
// a pool of 8 blocks still completes a workload needing 10x that, and every
// request's tokens equal the tokens it gets alone (preemption and batching
// change nothing), an impossible prompt is rejected alone, and a malformed
// workload fails with file:line.
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

std::string write_workload(const std::string& name, const std::vector<nlohmann::json>& lines) {
  const std::string path = gbtest::temp_dir() + "/" + name;
  std::ofstream out(path);
  for (const auto& l : lines) out << l.dump() << "\n";
  return path;
}

nlohmann::json run_json(const std::string& args) {
  const auto r = gbtest::run_cli(args, false);
  if (r.exit_code != 0) return nlohmann::json();
  return nlohmann::json::parse(r.output, nullptr, false);
}

const char* kPrompts[] = {"Once upon a time", "Lily wanted to bake a cake", "The dog ran", "Tom and Sue",
                          "One day, a little bird"};

}  // namespace

GB_TEST(small_pool_completes_10x_workload_with_alone_tokens) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  std::vector<nlohmann::json> lines;
  for (int i = 0; i < 10; ++i)
    lines.push_back({{"prompt", kPrompts[i % 5]}, {"max_tokens", 100 + i}, {"ignore_eos", true},
                     {"priority", i % 3 == 0 ? "batch" : "interactive"}});
  const std::string wl = write_workload("pressure.jsonl", lines);  // ~1,100 tokens = 70 blocks of 16
  const auto out = run_json("serve-bench --model " + gbtest::quote(model) + " --workload " + gbtest::quote(wl) +
                            " --kv-blocks 8 --block-size 16 --json --emit-tokens");
  QVERIFY2(out.is_object(), "serve-bench failed or printed invalid JSON");
  const auto& s = out["summary"];
  for (const char* key : {"ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p90", "queue_ms_p50",
                          "throughput_tok_s", "kv_peak_blocks", "kv_peak_bytes", "prefix_hit_rate", "preemptions"})
    QVERIFY2(s.contains(key), key);
  QVERIFY(s["kv_peak_blocks"].get<int>() <= 8);
  QVERIFY2(s["preemptions"].get<int>() > 0, "8 blocks for 10 requests must preempt");
  QCOMPARE(out["requests"].size(), size_t{10});
  for (size_t i = 0; i < 10; ++i) {
    const auto& r = out["requests"][i];
    QCOMPARE(r["index"].get<size_t>(), i);
    QCOMPARE(r["finish_reason"].get<std::string>(), std::string("max_tokens"));
    // Alone, with a roomy pool.
    const std::string single = write_workload("single" + std::to_string(i) + ".jsonl", {lines[i]});
    const auto alone = run_json("serve-bench --model " + gbtest::quote(model) + " --workload " + gbtest::quote(single) +
                                " --json --emit-tokens");
    QVERIFY(alone.is_object());
    QVERIFY2(r["generated_ids"] == alone["requests"][0]["generated_ids"],
             ("request " + std::to_string(i) + " differs from its run alone").c_str());
  }
}

GB_TEST(shared_prefix_hits_and_isolation_keys_do_not_share) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog.";
  const std::string wl = write_workload(
      "prefix.jsonl", {{{"prompt", prompt}, {"max_tokens", 4}, {"isolation_key", "alice"}},
                       {{"prompt", prompt}, {"max_tokens", 4}, {"isolation_key", "alice"}, {"arrival_ms", 300}},
                       {{"prompt", prompt}, {"max_tokens", 4}, {"isolation_key", "bob"}, {"arrival_ms", 600}}});
  const auto out =
      run_json("serve-bench --model " + gbtest::quote(model) + " --workload " + gbtest::quote(wl) + " --json");
  QVERIFY(out.is_object());
  QCOMPARE(out["requests"][0]["num_cached_tokens"].get<int>(), 0);
  QVERIFY2(out["requests"][1]["num_cached_tokens"].get<int>() >= 16, "same tenant: the prefix must be reused");
  QCOMPARE(out["requests"][2]["num_cached_tokens"].get<int>(), 0);  // other tenant: never shared
  QVERIFY(out["summary"]["prefix_hit_rate"].get<double>() > 0.0);
}

GB_TEST(impossible_prompt_is_rejected_alone) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  std::vector<int> huge(600, 300);
  huge[0] = 1;
  const std::string wl = write_workload("reject.jsonl", {{{"prompt", "Once"}, {"max_tokens", 5}},
                                                         {{"prompt_ids", huge}, {"max_tokens", 5}}});
  const auto out =
      run_json("serve-bench --model " + gbtest::quote(model) + " --workload " + gbtest::quote(wl) + " --json");
  QVERIFY(out.is_object());
  QCOMPARE(out["requests"][0]["finish_reason"].get<std::string>(), std::string("max_tokens"));
  QCOMPARE(out["requests"][1]["finish_reason"].get<std::string>(), std::string("rejected"));
  QVERIFY(out["requests"][1]["error"].get<std::string>().find("context") != std::string::npos);
}

GB_TEST(malformed_workload_names_file_and_line) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string path = gbtest::temp_dir() + "/bad.jsonl";
  std::ofstream(path) << "{\"prompt\": \"ok\", \"max_tokens\": 3}\n{\"prompt\": 5}\n";
  const auto r = gbtest::run_cli("serve-bench --model " + gbtest::quote(model) + " --workload " + gbtest::quote(path));
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find(path + ":2") != std::string::npos, r.output.c_str());
}

// Found by tests/fuzz (fuzz_workload): a field of the wrong JSON type threw an
// uncaught nlohmann::json exception (std::terminate); an id outside the
// vocabulary or a max_tokens past INT32_MAX went through. Each is now a clear
// error naming the file, the line and the field.
GB_TEST(mistyped_workload_fields_are_errors_not_crashes) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "ok", "priority": 2})", "priority"},
      {R"({"prompt": "ok", "ignore_eos": "yes"})", "ignore_eos"},
      {R"({"prompt": "ok", "isolation_key": {"tenant": 7}})", "isolation_key"},
      {R"({"prompt_ids": [1, 512]})", "prompt_ids"},
      {R"({"prompt_ids": [1, -1]})", "prompt_ids"},
      {R"({"prompt": "ok", "max_tokens": 4294967297})", "max_tokens"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = gbtest::temp_dir() + "/mistyped" + std::to_string(i) + ".jsonl";
    std::ofstream(path) << "{\"prompt\": \"ok\", \"max_tokens\": 3}\n" << cases[i].first << "\n";
    const auto r =
        gbtest::run_cli("serve-bench --model " + gbtest::quote(model) + " --workload " + gbtest::quote(path));
    QVERIFY2(r.exit_code == 1, (cases[i].first + " -> exit " + std::to_string(r.exit_code) + ": " + r.output).c_str());
    QVERIFY2(r.output.find(path + ":2: " + cases[i].second) != std::string::npos, r.output.c_str());
  }
}
