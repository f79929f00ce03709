// `glassbox-cli generate` end to end as a user runs it: golden ids in --json,
// the fields each line must carry, text mode, traces, and clear failures.
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace

GB_TEST(generate_json_reproduces_golden_ids_and_fields) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(golden_path, "testdata/golden/lily_cake_n256.json");
  std::ifstream gf(golden_path);
  const nlohmann::json g = nlohmann::json::parse(gf);
  const auto prompt_ids = g["prompt_tokens"].get<std::vector<int>>();
  const int max_tokens = g["steps"].get<int>() - static_cast<int>(prompt_ids.size()) + 1;
  const auto r = gbtest::run_cli("generate --model " + gbtest::quote(model) + " --prompt " +
                                     gbtest::quote(g["prompt"].get<std::string>()) + " --max-tokens " +
                                     std::to_string(max_tokens) + " --json",
                                 false);
  QCOMPARE(r.exit_code, 0);
  const auto lines = json_lines(r.output);
  QVERIFY(lines.size() >= 3);
  QVERIFY(lines.front()["prompt_ids"].get<std::vector<int>>() == prompt_ids);
  std::vector<int> ids;
  std::string text;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const auto& t = lines[i];
    ids.push_back(t["id"].get<int>());
    text += t["text"].get<std::string>();
    QVERIFY(t["logprob"].is_number_float() && t["logprob"].get<double>() <= 0.0);
    QVERIFY(t["top"].is_array() && t["top"].size() >= 10);
    for (const auto& c : t["top"]) QVERIFY(c.contains("id") && c.contains("logit") && c.contains("logprob"));
    QCOMPARE(t["top"][0]["id"].get<int>(), t["id"].get<int>());  // greedy: the best candidate
  }
  QVERIFY(ids == g["generated_tokens"].get<std::vector<int>>());
  const auto& done = lines.back();
  QVERIFY(done["done"].get<bool>());
  for (const char* key : {"reason", "ttft_ms", "tpot_ms", "tokens_per_s"}) QVERIFY2(done.contains(key), key);
  QVERIFY(done["ttft_ms"].get<double>() > 0.0);
  // The streamed text pieces add up to the run.c output after the prompt.
  const std::string expected_text = g["decoded_text"].get<std::string>();
  QVERIFY(expected_text.size() > text.size());
  QCOMPARE(expected_text.substr(expected_text.size() - text.size()), text);
}

GB_TEST(generate_text_mode_prints_prompt_and_continuation) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(golden_path, "testdata/golden/once_upon_a_time_n64.txt");
  std::ifstream gf(golden_path);
  std::stringstream expected;
  expected << gf.rdbuf();
  const auto r = gbtest::run_cli(
      "generate --model " + gbtest::quote(model) + " --prompt 'Once upon a time' --max-tokens 60", false);
  QCOMPARE(r.exit_code, 0);
  QCOMPARE(r.output, expected.str() + "\n");
  // Statistics (stderr) go on their own line after the text, also when both
  // streams share one pipe, as in a terminal.
  const auto merged =
      gbtest::run_cli("generate --model " + gbtest::quote(model) + " --prompt 'Once upon a time' --max-tokens 60");
  QCOMPARE(merged.exit_code, 0);
  const size_t stats = merged.output.find("[60 tokens, max_tokens");
  QVERIFY2(stats != std::string::npos, merged.output.c_str());
  QCOMPARE(merged.output.substr(0, stats), expected.str() + "\n");
}

GB_TEST(generate_writes_jsonl_and_chrome_traces) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.gguf");
  const std::string jsonl = gbtest::temp_dir() + "/gen.jsonl", chrome = gbtest::temp_dir() + "/gen.json";
  const auto r = gbtest::run_cli("generate --model " + gbtest::quote(model) +
                                 " --ctx 128 --prompt 'Lily' --max-tokens 8 --temperature 0.8 --seed 7 --trace " +
                                 gbtest::quote(jsonl) + " --chrome-trace " + gbtest::quote(chrome));
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  std::ifstream jf(jsonl);
  std::string first;
  std::getline(jf, first);
  const auto header = nlohmann::json::parse(first);
  QCOMPARE(header["type"].get<std::string>(), std::string("header"));
  QCOMPARE(header["model"]["sha256"].get<std::string>().size(), size_t{64});
  QCOMPARE(header["kv_block_size"].get<int>(), 16);  // the engine's default block size
  QVERIFY(header["kv_num_blocks"].get<int>() >= 128 / 16);
  std::ifstream cf(chrome);
  const auto c = nlohmann::json::parse(cf);
  QVERIFY(c["traceEvents"].is_array() && !c["traceEvents"].empty());
}

GB_TEST(generate_same_seed_same_tokens) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string args =
      "generate --model " + gbtest::quote(model) +
      " --prompt 'The dog' --max-tokens 40 --temperature 1.0 --top-k 0 --top-p 1 --min-p 0 --seed 42 --no-echo";
  const auto a = gbtest::run_cli(args, false), b = gbtest::run_cli(args, false);
  QCOMPARE(a.exit_code, 0);
  QCOMPARE(a.output, b.output);
  const auto c = gbtest::run_cli(args + " --seed 43", false);
  QVERIFY2(c.output != a.output, "a different seed should give a different sample of 40 tokens");
}

GB_TEST(generate_prompt_longer_than_context_fails_clearly) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r = gbtest::run_cli("generate --model " + gbtest::quote(model) +
                                 " --ctx 4 --prompt 'Once upon a time there was a dog'");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("glassbox-cli: error:") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("context") != std::string::npos, r.output.c_str());
}

GB_TEST(generate_bad_sampler_settings_fail_clearly) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  for (const char* bad : {"--top-p 0", "--temperature -1", "--top-k -3", "--logit-bias 5=abc", "--samplers top_k,bogus"}) {
    const auto r = gbtest::run_cli("generate --model " + gbtest::quote(model) + " --prompt x " + bad);
    QVERIFY2(r.exit_code != 0, bad);
    QVERIFY2(r.output.find("glassbox-cli: error:") != std::string::npos, (std::string(bad) + ": " + r.output).c_str());
  }
}

GB_TEST(generate_missing_model_and_vocab_mismatch_fail_clearly) {
  GB_REQUIRE_SHARED(tiny, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  GB_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  auto r = gbtest::run_cli("generate --model /nonexistent/model.gguf --prompt x");
  QVERIFY(r.exit_code != 0 && r.output.find("/nonexistent/model.gguf") != std::string::npos);
  r = gbtest::run_cli("generate --model " + gbtest::quote(tiny) + " --tokenizer " + gbtest::quote(tok) + " --prompt x");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("does not match model vocab size") != std::string::npos, r.output.c_str());
}

GB_TEST(generate_speculative_greedy_equals_plain_and_reports_stats) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(draft, "models/stories260K/stories260K_L4_draft.bin");
  const std::string base =
      "generate --model " + gbtest::quote(model) + " --prompt 'Lily wanted to bake a cake' --max-tokens 80 --json";
  const auto plain = json_lines(gbtest::run_cli(base, false).output);
  for (const std::string& spec : std::vector<std::string>{"ngram:n=2,k=4", "draft:" + draft + ":k=3", "self:3:k=2"}) {
    const auto r = gbtest::run_cli(base + " --speculative " + gbtest::quote(spec), false);
    QVERIFY2(r.exit_code == 0, spec.c_str());
    const auto lines = json_lines(r.output);
    QCOMPARE(lines.size(), plain.size());
    for (size_t i = 1; i + 1 < lines.size(); ++i) {
      QCOMPARE(lines[i]["id"].get<int>(), plain[i]["id"].get<int>());
      const std::string origin = lines[i]["origin"].get<std::string>();
      QVERIFY2(origin == "plain" || origin == "accepted" || origin == "resampled" || origin == "bonus", origin.c_str());
      // Every token line carries its record, drafted or not (greedy: rank 0).
      QVERIFY2(lines[i].contains("logprob") && lines[i]["top"].size() >= 10, (spec + ": token without a record").c_str());
      QCOMPARE(lines[i]["rank"].get<int>(), 0);
      QCOMPARE(lines[i]["top"][0]["logit"].get<double>(), plain[i]["top"][0]["logit"].get<double>());
    }
    const auto& s = lines.back()["speculative"];
    for (const char* key : {"drafted", "accepted", "acceptance_rate", "mean_accepted_length", "target_forwards"})
      QVERIFY2(s.contains(key), key);
    QVERIFY(s["target_forwards"].get<int>() > 0);
  }
  const auto bad = gbtest::run_cli(base + " --speculative bogus");
  QVERIFY(bad.exit_code != 0 && bad.output.find("--speculative") != std::string::npos);
}

GB_TEST(generate_zero_tokens_is_an_empty_completion) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const auto r =
      gbtest::run_cli("generate --model " + gbtest::quote(model) + " --prompt 'Once' --max-tokens 0 --json", false);
  QCOMPARE(r.exit_code, 0);
  const auto lines = json_lines(r.output);
  QCOMPARE(lines.size(), size_t{2});
  QCOMPARE(lines[1]["num_generated"].get<int>(), 0);
  QCOMPARE(lines[1]["reason"].get<std::string>(), std::string("max_tokens"));
}

// KV types: every type (and llama.cpp's -ctk/-ctv spelling) generates; F16
// greedy text equals F32's on this prompt; each bad option is one clear error.
GB_TEST(generate_with_every_kv_type_and_llama_cpp_spelling) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string base = "generate --model " + gbtest::quote(model) + " --prompt 'Once upon a time' --max-tokens 24 --no-echo";
  const auto f32 = gbtest::run_cli(base + " --kv-type-k f32 --kv-type-v f32", false);
  QCOMPARE(f32.exit_code, 0);
  const auto f16 = gbtest::run_cli(base + " -ctk f16 -ctv f16", false);
  QCOMPARE(f16.exit_code, 0);
  QCOMPARE(f16.output, f32.output);
  QCOMPARE(gbtest::run_cli(base, false).output, f16.output);  // f16 is the default
  for (const char* kv : {"bf16 bf16", "q8_0 q8_0", "q4_0 q4_0", "q4_1 q4_1", "iq4_nl iq4_nl", "q8_0 q4_0", "f32 q4_0"}) {
    const std::string k(kv, std::strchr(kv, ' ')), v(std::strchr(kv, ' ') + 1);
    const auto r = gbtest::run_cli(base + " -ctk " + k + " --kv-type-v " + v);
    QVERIFY2(r.exit_code == 0, (std::string(kv) + ": " + r.output).c_str());
    QVERIFY2(r.output.size() > 20, (std::string(kv) + ": " + r.output).c_str());
  }
}

GB_TEST(kv_and_context_options_refuse_bad_values_clearly) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string base = "generate --model " + gbtest::quote(model) + " --prompt x --max-tokens 2 ";
  const std::pair<const char*, const char*> cases[] = {
      {"--kv-type-k q3_k", "not a KV type"},
      {"-ctv fp8", "not a KV type"},
      {"--ctx 0", "--ctx"},
      {"--ctx 4096", "above the model's maximum context of 512"},
  };
  for (const auto& [args, want] : cases) {
    const auto r = gbtest::run_cli(base + args);
    QVERIFY2(r.exit_code != 0, args);
    QVERIFY2(r.output.find(want) != std::string::npos, (std::string(args) + ": " + r.output).c_str());
    QVERIFY2(r.output.find("Segmentation") == std::string::npos && r.output.find("terminate") == std::string::npos,
             r.output.c_str());
  }
  // A pool larger than the memory there is: refused before loading, naming both.
  GB_REQUIRE_SHARED(tiny, "models/stories260K/stories260K.bin");
  const auto big = gbtest::run_cli("serve --model " + gbtest::quote(tiny) + " --port 0 --kv-bytes 400000000000");
  QVERIFY(big.exit_code != 0);
  QVERIFY2(big.output.find("--kv-bytes") != std::string::npos && big.output.find("available") != std::string::npos,
           big.output.c_str());
}

// Address space short (RLIMIT_AS): reserving the pool fails, and that is an
// error message with the bytes asked for, not a crash or an OOM kill.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GB_CLI_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GB_CLI_SANITIZED 1
#endif
GB_TEST(a_pool_the_address_space_cannot_hold_is_an_error) {
#ifdef GB_CLI_SANITIZED
  QSKIP("a sanitizer's shadow memory needs more address space than the limit leaves");
#endif
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  std::string command = "ulimit -v 1500000; '";
  command += GLASSBOX_CLI_PATH;
  command += "' serve --model " + gbtest::quote(model) + " --port 0 --kv-bytes 3000000000 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  QVERIFY(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  QVERIFY2(WIFEXITED(status) && WEXITSTATUS(status) == 1, out.c_str());
  QVERIFY2(out.find("cannot reserve") != std::string::npos && out.find("KV pool") != std::string::npos, out.c_str());
}

// KV eviction from the command line: a sink policy with its full-cache shadow
// prints the shadow's summary; a budget the pool cannot hold is refused before
// anything is printed (stdout empty: no half-echoed prompt); a bad policy names
// itself. --temp is llama.cpp's spelling of --temperature.
GB_TEST(generate_kv_policy_flags_run_and_refuse_clearly) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string base = "generate --model " + gbtest::quote(model) + " --prompt 'Once upon a time' --max-tokens 30 --temp 0";
  auto r = gbtest::run_cli(base + " --kv-policy sink --kv-budget 8 --kv-shadow");
  QCOMPARE(r.exit_code, 0);
  QVERIFY2(r.output.find("[kv shadow: 29 tokens") != std::string::npos, r.output.c_str());
  const auto refused = gbtest::run_cli_split(base + " --kv-policy h2o --kv-budget 100000000");
  QCOMPARE(refused.exit_code, 1);
  QCOMPARE(refused.out, std::string());
  QVERIFY2(refused.err.find("a KV budget of 100000000 tokens needs") != std::string::npos, refused.err.c_str());
  r = gbtest::run_cli(base + " --kv-policy snapkv --kv-budget 3");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("recent window of 32") != std::string::npos, r.output.c_str());
  // --temp 1.5 is --temperature 1.5 (the same sample for a seed), and not the default greedy text.
  const std::string sampled = "generate --model " + gbtest::quote(model) +
                              " --prompt 'Once upon a time' --max-tokens 30 --top-k 0 --top-p 1 --min-p 0 --seed 3";
  const auto a = gbtest::run_cli(sampled + " --temp 1.5", false);
  const auto b = gbtest::run_cli(sampled + " --temperature 1.5", false);
  const auto greedy = gbtest::run_cli(sampled, false);
  QCOMPARE(a.exit_code, 0);
  QCOMPARE(a.output, b.output);
  QVERIFY(a.output != greedy.output);
}
