// Runs `glassbox-cli info` (and synth) as a subprocess on good and corrupt files
// and checks the exit status and the message. The CLI's path comes from CMake
// ($<TARGET_FILE:glassbox-cli>) as GLASSBOX_CLI_PATH.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

using RunResult = gbtest::CliResult;
using gbtest::run_cli;

void expect_failure(const std::string& args, const std::string& file, const std::string& problem) {
  const RunResult r = run_cli(args);
  QVERIFY2(r.exit_code != 0, ("exit code 0 for: " + args).c_str());
  QVERIFY2(r.output.find("glassbox-cli: error: " + file) != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find(problem) != std::string::npos, r.output.c_str());
}

}  // namespace

GB_TEST(info_on_unknown_gguf_version_fails_with_message) {
  // "GGUF", version 9, zero tensors, zero metadata. Appended rather than
  // `std::string(...) + std::string(...)`: GCC 12 reports a false -Warray-bounds
  // inside std::string's operator+ here (GCC bug 105651).
  std::string header("GGUF\x09\0\0\0", 8);
  header.append(16, '\0');
  const std::string path = gbtest::write_temp_file("v9.gguf", header);
  expect_failure("info '" + path + "'", path, "unsupported GGUF version 9");
}

GB_TEST(info_on_truncated_gguf_fails_with_message) {
  const std::string path = gbtest::write_temp_file("short.gguf", std::string("GGUF\x03\0\0\0\x01\0", 10));
  expect_failure("info '" + path + "'", path, "truncated file");
}

GB_TEST(info_on_missing_file_fails_with_message) {
  const std::string path = gbtest::temp_dir() + "/nothing-here.gguf";
  expect_failure("info '" + path + "'", path, "file not found");
}

GB_TEST(info_on_stories260k_reports_shape_and_kv_bytes) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  const RunResult r = run_cli("info --json '" + path + "'");
  QCOMPARE(r.exit_code, 0);
  QVERIFY2(r.output.find("\"num_parameters\": 260032") != std::string::npos, r.output.c_str());
  // 2 (K and V) x 5 layers x 4 kv heads x 8 head dims x 4 bytes.
  QVERIFY2(r.output.find("\"kv_bytes_per_token_f32\": 1280") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("\"kv_bytes_per_token_f16\": 640") != std::string::npos, r.output.c_str());
}

// `info` says whether the CUDA path would run the model here, and why not.
GB_TEST(info_says_why_cuda_is_not_used) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.bin");
  ::setenv("GLASSBOX_CUDA_PLUGIN", "/nonexistent/libglassbox-cuda.so", 1);
  const RunResult text = run_cli("info '" + path + "'");
  const RunResult json = run_cli("info --json '" + path + "'");
  ::unsetenv("GLASSBOX_CUDA_PLUGIN");
  QCOMPARE(text.exit_code, 0);
  QVERIFY2(text.output.find("CUDA           not used: the CUDA plugin /nonexistent/libglassbox-cuda.so does not "
                            "exist") != std::string::npos,
           text.output.c_str());
  QCOMPARE(json.exit_code, 0);
  QVERIFY2(json.output.find("\"installed\": false") != std::string::npos, json.output.c_str());
  QVERIFY2(json.output.find("\"reason\": \"the CUDA plugin /nonexistent/libglassbox-cuda.so does not exist\"") !=
               std::string::npos,
           json.output.c_str());
}

GB_TEST(synth_then_info_round_trips) {
  const std::string path = gbtest::temp_dir() + "/synth.gguf";
  const RunResult w = run_cli("synth --shape stories260K --dtype f16 --seed 5 --out '" + path + "'");
  QVERIFY2(w.exit_code == 0, w.output.c_str());
  const RunResult r = run_cli("info '" + path + "'");
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  QVERIFY2(r.output.find("synthetic-stories260K") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("F16 x 36") != std::string::npos, r.output.c_str());  // 1 embedding + 5 x 7 matrices
  const RunResult bad = run_cli("synth --shape nope --out '" + path + "'");
  QVERIFY(bad.exit_code != 0);
  QVERIFY2(bad.output.find("unknown shape 'nope'") != std::string::npos, bad.output.c_str());
}

GB_TEST(synth_arch_then_info_shows_windows_caps_and_rope) {
  const std::string path = gbtest::temp_dir() + "/gemma2.gguf";
  const RunResult w = run_cli("synth --arch gemma2 --seed 3 --out '" + path + "'");
  QVERIFY2(w.exit_code == 0, w.output.c_str());
  const RunResult r = run_cli("info '" + path + "'");
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  for (const char* want : {"architecture   gemma2", "sliding window 6 tokens on 2 of 3 layers", "soft-caps      attention 5, final logits 15",
                           "rope           NeoX", "GELU-tanh gated FFN", "post-attention/FFN norms"})
    QVERIFY2(r.output.find(want) != std::string::npos, (std::string(want) + " not in:\n" + r.output).c_str());
  const std::string phi = gbtest::temp_dir() + "/phi3.gguf";
  QVERIFY(run_cli("synth --arch phi3 --seed 3 --out '" + phi + "'").exit_code == 0);
  const RunResult p = run_cli("info --ctx 32 '" + phi + "'");
  QVERIFY2(p.output.find("LongRoPE short factors (original context 32)") != std::string::npos, p.output.c_str());
  const RunResult bad = run_cli("synth --arch nope --out '" + path + "'");
  QVERIFY(bad.exit_code != 0);
  QVERIFY2(bad.output.find("unknown --arch 'nope'") != std::string::npos, bad.output.c_str());
}

// A model with global and sliding layers: the plan's two layer groups, one
// with --swa-full; generate gives the same greedy tokens either way.
GB_TEST(info_and_generate_on_a_window_group_model) {
  const std::string path = gbtest::temp_dir() + "/gemma3-groups.gguf";
  QCOMPARE(run_cli("synth --arch gemma3 --seed 4 --out '" + path + "'").exit_code, 0);
  const RunResult r = run_cli("info --json '" + path + "'");
  QCOMPARE(r.exit_code, 0);
  // 6 layers, layers 0-4 slide over 6 tokens; 2 KV heads of 32, f16: 256 bytes a layer.
  QVERIFY2(r.output.find("\"groups\": [") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("\"layers\": 5") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("\"bytes_per_token\": 1280") != std::string::npos, r.output.c_str());
  QVERIFY2(r.output.find("\"window\": 6") != std::string::npos, r.output.c_str());
  const RunResult text = run_cli("info '" + path + "'");
  QVERIFY2(text.output.find("sliding (window 6): 5 layers") != std::string::npos, text.output.c_str());
  const RunResult full = run_cli("info --json --swa-full '" + path + "'");
  QCOMPARE(full.exit_code, 0);
  QVERIFY2(full.output.find("\"window\": 6") == std::string::npos, full.output.c_str());
  QVERIFY2(full.output.find("\"bytes_per_token\": 1536") != std::string::npos, full.output.c_str());

  const std::string gen = "generate -m '" + path + "' -p 'a b c d e f g h i j k l' -n 40 --json";
  const RunResult on = run_cli(gen);
  const RunResult off = run_cli(gen + " --swa-full");
  QCOMPARE(on.exit_code, 0);
  QCOMPARE(off.exit_code, 0);
  const auto ids = [](const std::string& out) {  // the generated token ids, in order
    std::string found;
    for (size_t at = out.find("\"id\":"); at != std::string::npos; at = out.find("\"id\":", at + 5))
      found += out.substr(at, out.find_first_of(",}", at) - at) + " ";
    return found;
  };
  QVERIFY(!ids(on.output).empty());
  QCOMPARE(ids(on.output), ids(off.output));
}

// A mixture of experts (the converted Qwen3-MoE file): the experts' width
// (the file's unused dense width said as such), the experts, and the active
// parameters in text and JSON.
GB_TEST(info_on_a_mixture_of_experts) {
  const std::string path = std::string(GLASSBOX_CONVERTED_REF_DIR) + "/qwen3moe.gguf";
  const RunResult text = run_cli("info '" + path + "'");
  QVERIFY2(text.exit_code == 0, text.output.c_str());
  for (const char* want : {"hidden dim     32 per expert (the file's dense FFN width 64 is not used)",
                           "8 experts of width 32, 2 per token", "active per token (2 of 8 experts)"})
    QVERIFY2(text.output.find(want) != std::string::npos, (std::string(want) + " not in:\n" + text.output).c_str());
  const RunResult json = run_cli("info --json '" + path + "'");
  QVERIFY2(json.exit_code == 0, json.output.c_str());
  const auto j = nlohmann::json::parse(json.output);
  QCOMPARE(j["num_experts"].get<int>(), 8);
  QCOMPARE(j["num_experts_used"].get<int>(), 2);
  QCOMPARE(j["expert_hidden_dim"].get<int>(), 32);
  // Per layer 6 of the 8 experts' three 32 x 32 matrices are not active: 2 layers x 6 x 3 x 1024.
  QCOMPARE(j["num_parameters"].get<uint64_t>() - j["active_parameters"].get<uint64_t>(), uint64_t{2 * 6 * 3 * 1024});
}
