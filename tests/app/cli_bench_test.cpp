// `glassbox-cli bench` from outside (its shape, never its speed): the JSON names
// the processor (as /proc/cpuinfo has it) and the instruction sets the kernels'
// dispatch chose (as cpuid says), counts quant-llama's parameters and weight
// bytes as worked out from its README config, and its mean/stddev agree with the
// per-run figures; --llama-bench-table prints llama-bench's columns and tests.
#include <cmath>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

std::string cpuinfo_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      std::string v = line.substr(line.find(':') + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return {};
}

const char* kArgs = " --prompt-tokens 16 --gen-tokens 4 --repeats 3 --threads 1 --skip-bandwidth";

}  // namespace

GB_TEST(bench_json_names_processor_kernels_and_model) {
  GB_REQUIRE_SHARED(model, "models/quant-llama/quant-llama-Q4_K_M.gguf");
  const auto r = gbtest::run_cli("bench --model '" + model + "'" + kArgs + " --json", false);
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  QVERIFY2(j.is_object(), r.output.c_str());
  const std::string cpu = cpuinfo_model_name();
  if (!cpu.empty()) QCOMPARE(j["processor"].get<std::string>(), cpu);
  QVERIFY(!j["processor"].get<std::string>().empty());
  // The level cpuid allows (the test runs without GLASSBOX_CPU_ISA).
#if defined(__x86_64__)
  // F16C from cpuid leaf 1 (ECX bit 29): clang 14 does not know "f16c" in __builtin_cpu_supports.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512vnni");
  // AVX512-BF16: cpuid leaf 7 sub-leaf 1, EAX bit 5.
  const bool bf16 = avx512 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0;
#else
  const bool avx2 = false, avx512 = false, bf16 = false;
#endif
  // GLASSBOX_CPU_ISA caps the level (the suite can be run once per level).
  const std::string cap = std::getenv("GLASSBOX_CPU_ISA") != nullptr ? std::getenv("GLASSBOX_CPU_ISA") : "";
  const bool use_bf16 = bf16 && (cap.empty() || cap == "avx512bf16");
  const bool use512 = avx512 && (cap.empty() || cap == "avx512" || cap == "avx512bf16"), use2 = avx2 && cap != "scalar";
  const char* want = use_bf16 ? "avx512f+bw+dq+vl+vnni+bf16"
                     : use512 ? "avx512f+bw+dq+vl+vnni"
                     : use2   ? "avx2+fma+f16c"
                              : "scalar";
  QCOMPARE(j["instruction_sets"].get<std::string>(), std::string(want));
  QVERIFY(j["scalar_weight_types"].is_array());
  // README config: 32000x256 tied embedding, 4 layers of q,o 256x256, k,v 128x256,
  // gate/up/down 768x256, 9 F32 norms of 256. Q4_K_M (README: Q4_K x25, Q6_K x4):
  // attn_v and ffn_down of layers 0 and 2 in Q6_K (210 bytes / 256), the rest Q4_K (144 / 256).
  const uint64_t matrices = 32000ull * 256 + 4 * (2 * 65536 + 2 * 32768 + 3 * 196608), norms = 9 * 256;
  QCOMPARE(j["num_parameters"].get<uint64_t>(), matrices + norms);
  const uint64_t q6 = 2 * (32768 + 196608);
  QCOMPARE(j["weight_bytes"].get<uint64_t>(), (matrices - q6) * 144 / 256 + q6 * 210 / 256 + 4 * norms);
  QCOMPARE(j["type_label"].get<std::string>(), std::string("Q4_K_M, 4.6 bpw"));
  QCOMPARE(j["architecture"].get<std::string>(), std::string("llama"));
  for (const char* kind : {"prefill", "decode"}) {
    const auto runs = j[std::string(kind) + "_runs_tok_s"].get<std::vector<double>>();
    QCOMPARE(runs.size(), size_t{3});
    double m = 0, sq = 0;
    for (double v : runs) m += v / 3;
    for (double v : runs) sq += (v - m) * (v - m);
    QVERIFY(std::abs(j[std::string(kind) + "_mean_tok_s"].get<double>() - m) <= 1e-9 * m);
    QVERIFY(std::abs(j[std::string(kind) + "_stddev_tok_s"].get<double>() - std::sqrt(sq / 2)) <= 1e-9 * m);
  }
}

GB_TEST(bench_prints_llama_bench_table) {
  GB_REQUIRE_SHARED(model, "models/quant-llama/quant-llama-Q4_K_M.gguf");
  const auto r = gbtest::run_cli("bench --model '" + model + "'" + kArgs + " --llama-bench-table", false);
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  std::vector<std::string> lines;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  QCOMPARE(lines.size(), size_t{4});
  QCOMPARE(lines[0], std::string("| model | size | params | backend | threads | test | t/s |"));
  QVERIFY2(std::regex_match(lines[1], std::regex(R"((\| -*:?-+:? )+\|)")), lines[1].c_str());
  const std::string row = R"(\| llama Q4_K_M \| 6\.20 MiB \| 11\.34 M \| CPU \| 1 \| )";
  const std::string ts = R"( \| \d+\.\d\d ± \d+\.\d\d \|)";
  QVERIFY2(std::regex_match(lines[2], std::regex(row + "pp16" + ts)), lines[2].c_str());
  QVERIFY2(std::regex_match(lines[3], std::regex(row + "tg4" + ts)), lines[3].c_str());
}

GB_TEST(bench_json_and_table_exclude_each_other) {
  GB_REQUIRE_SHARED(model, "models/quant-llama/quant-llama-Q4_K_M.gguf");
  const auto r = gbtest::run_cli("bench --model '" + model + "'" + kArgs + " --json --llama-bench-table");
  QVERIFY(r.exit_code != 0);
}

// Without --skip-bandwidth the report carries the measured read bandwidth and
// the FMA peak of the kernel level, and the prefill's fraction of that peak is
// the prefill flops (2 per parameter and token) over the peak of the threads
// used, measured with all of them busy at once (on one thread: the one-thread
// peak itself).
GB_TEST(bench_json_reports_bandwidth_and_fma_peak) {
  GB_REQUIRE_SHARED(model, "models/quant-llama/quant-llama-Q4_K_M.gguf");
  const auto r = gbtest::run_cli("bench --model '" + model + "' --prompt-tokens 16 --gen-tokens 2 --repeats 1 --threads 1 --json", false);
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  QVERIFY2(j.is_object(), r.output.c_str());
  QVERIFY(j["measured_read_bandwidth_gb_s"].get<double>() > 0.0);
  const double peak = j["fma_peak_gflops_per_thread"].get<double>();
  if (j["instruction_sets"].get<std::string>() == "scalar") {
    QCOMPARE(peak, 0.0);
    return;
  }
  QVERIFY(peak > 0.0);
  const double flops = 2.0 * j["num_parameters"].get<double>() * j["prefill_tok_s"].get<double>() / 1e9;
  QVERIFY(std::abs(j["prefill_gflops"].get<double>() - flops) <= 1e-9 * flops);
  QVERIFY(std::abs(j["prefill_fraction_of_fma_peak"].get<double>() - flops / peak) <= 1e-9 * flops / peak);
  QCOMPARE(j["fma_peak_gflops"].get<double>(), peak);

  // Two threads: the denominator is the two-thread peak the report carries, a
  // measurement of its own (not the one-thread figure doubled).
  const auto r2 = gbtest::run_cli("bench --model '" + model + "' --prompt-tokens 16 --gen-tokens 2 --repeats 1 --threads 2 --json", false);
  QVERIFY2(r2.exit_code == 0, r2.output.c_str());
  const auto j2 = nlohmann::json::parse(r2.output, nullptr, false);
  QVERIFY2(j2.is_object(), r2.output.c_str());
  const double peak2 = j2["fma_peak_gflops"].get<double>();
  QVERIFY(peak2 > 0.0);
  // Measured with both threads busy at once (not the one-thread figure doubled).
  QCOMPARE(j2["fma_peak_threads"].get<int>(), 2);
  QCOMPARE(j["fma_peak_threads"].get<int>(), 1);
  const double flops2 = 2.0 * j2["num_parameters"].get<double>() * j2["prefill_tok_s"].get<double>() / 1e9;
  QVERIFY(std::abs(j2["prefill_fraction_of_fma_peak"].get<double>() - flops2 / peak2) <= 1e-9 * flops2 / peak2);
}

// `probe` needs no model: the same processor and kernel level as `bench`, and
// a peak and bandwidths that are positive numbers (their size is the machine's).
GB_TEST(probe_json_reports_peak_and_bandwidth_without_a_model) {
  const auto r = gbtest::run_cli("probe --threads 1 --json", false);
  QVERIFY2(r.exit_code == 0, r.output.c_str());
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  QVERIFY2(j.is_object(), r.output.c_str());
  const std::string cpu = cpuinfo_model_name();
  if (!cpu.empty()) QCOMPARE(j["processor"].get<std::string>(), cpu);
  QCOMPARE(j["threads"].get<int>(), 1);
  const std::string isa = j["instruction_sets"].get<std::string>();
  QVERIFY(!isa.empty());
  for (const char* key : {"read_bandwidth_gb_s_1_thread", "read_bandwidth_gb_s"})
    QVERIFY2(j[key].is_number() && j[key].get<double>() > 0.0, key);
  // The scalar level (GLASSBOX_CPU_ISA=scalar) has no FMA probe; the bf16 dot
  // probe runs only at the level that has the instruction.
  QCOMPARE(j["fma_peak_gflops_per_thread"].get<double>() > 0.0, isa != "scalar");
  QCOMPARE(j["bf16_dot_peak_gflops_per_thread"].get<double>() > 0.0, isa.find("bf16") != std::string::npos);
  QCOMPARE(j["fma_peak_gflops"].get<double>(), j["fma_peak_gflops_per_thread"].get<double>());
  const auto bad = gbtest::run_cli("probe --threads -2", false);
  QVERIFY(bad.exit_code != 0);
}

// The report says whether the weights were read from huge pages: by default
// wherever the kernel gives them (its transparent-huge-page mode is "always"
// or "madvise"), never with GLASSBOX_CPU_HUGE_PAGES=0; the text report says so
// on its bandwidth line.
GB_TEST(bench_says_whether_weights_sat_in_huge_pages) {
  GB_REQUIRE_SHARED(f16, "models/quant-llama/quant-llama-F16.gguf");
  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(mode_file, mode);
  const bool thp = mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
  const auto bench = [&](const char* extra) {
    return gbtest::run_cli("bench --model '" + f16 + "'" + kArgs + extra, false);
  };
  const auto json = bench(" --json");
  const auto j = nlohmann::json::parse(json.output, nullptr, false);
  QVERIFY2(json.exit_code == 0 && j.is_object(), json.output.c_str());
  QCOMPARE(j["weights_in_huge_pages"].get<bool>(), thp);
  const auto text = bench("");
  QVERIFY2(text.exit_code == 0, text.output.c_str());
  QCOMPARE(text.output.find("MB (huge pages) ->") != std::string::npos, thp);
  ::setenv("GLASSBOX_CPU_HUGE_PAGES", "0", 1);
  const auto off = bench(" --json");
  ::unsetenv("GLASSBOX_CPU_HUGE_PAGES");
  const auto o = nlohmann::json::parse(off.output, nullptr, false);
  QVERIFY2(off.exit_code == 0 && o.is_object(), off.output.c_str());
  QCOMPARE(o["weights_in_huge_pages"].get<bool>(), false);
  QCOMPARE(o["weight_bytes_per_token"].get<double>(), j["weight_bytes_per_token"].get<double>());
}

// Where each decode prefetch distance came from (backend/decode_tuning.h): a
// model this small is below the bytes worth measuring, so the defaults; with
// the threshold lowered, measured (one rate per candidate) and cached; the
// next run reads the cache; GLASSBOX_CPU_PREFETCH fixes every distance.
GB_TEST(bench_reports_where_each_decode_prefetch_distance_came_from) {
  GB_REQUIRE_SHARED(q8, "models/quant-llama/quant-llama-Q8_0.gguf");
  if (const char* isa = std::getenv("GLASSBOX_CPU_ISA"); isa != nullptr && std::string(isa) == "scalar")
    QSKIP("the scalar level has no decode loop that prefetches");
  const std::string file = gbtest::temp_dir() + "/bench-decode-prefetch.tsv";
  std::remove(file.c_str());
  ::setenv("GLASSBOX_CPU_TUNING_FILE", file.c_str(), 1);
  const auto bench = [&](const char* extra) {
    return gbtest::run_cli("bench --model '" + q8 + "'" + kArgs + extra, false);
  };
  // The report's entries, or a message saying what is wrong with them.
  struct Entries {
    nlohmann::json list;
    std::string error;
  };
  const auto entries = [&](const std::string& source) {
    const auto r = bench(" --json");
    const auto j = nlohmann::json::parse(r.output, nullptr, false);
    if (r.exit_code != 0 || !j.is_object()) return Entries{{}, r.output};
    Entries e{j["decode_prefetch"], {}};
    // Q8_0 has a decode kernel at every SIMD level.
    bool q8_seen = false;
    for (const auto& d : e.list) {
      // Measured: a rate for each candidate (0, 4 KB, ...), the chosen one among them.
      const auto& trials = d["trials"];
      bool chosen_tried = false;
      for (const auto& t : trials) {
        if (!(t["gb_s"].get<double>() > 0)) e.error = d.dump();
        chosen_tried = chosen_tried || t["bytes"] == d["bytes"];
      }
      const bool measured = source == "measured";
      if (d["source"] != source || (measured ? trials.size() < 5 || !chosen_tried : !trials.empty())) e.error = d.dump();
      q8_seen = q8_seen || d["type"] == "Q8_0";
    }
    if (!q8_seen) e.error = "no Q8_0 entry: " + e.list.dump();
    return e;
  };
  const Entries defaults = entries("default");
  QVERIFY2(defaults.error.empty(), defaults.error.c_str());
  for (const auto& d : defaults.list) QCOMPARE(d["bytes"].get<int64_t>(), int64_t{16384});
  QVERIFY(!std::ifstream(file).good());
  ::setenv("GLASSBOX_CPU_TUNING_MIN_BYTES", "1", 1);
  ::setenv("GLASSBOX_CPU_TUNING", "1", 1);  // the suite turns measuring off (tests/glassbox_tests.cmake)
  const Entries measured = entries("measured");
  QVERIFY2(measured.error.empty(), measured.error.c_str());
  QVERIFY(std::ifstream(file).good());
  const Entries cached = entries("cached");
  QVERIFY2(cached.error.empty(), cached.error.c_str());
  QCOMPARE(cached.list.size(), measured.list.size());
  for (size_t i = 0; i < cached.list.size(); ++i) QCOMPARE(cached.list[i]["bytes"], measured.list[i]["bytes"]);
  const auto text = bench("");
  QVERIFY2(text.exit_code == 0 && text.output.find(" B (cached)") != std::string::npos, text.output.c_str());
  ::setenv("GLASSBOX_CPU_PREFETCH", "4096", 1);
  const Entries fixed = entries("environment");
  ::unsetenv("GLASSBOX_CPU_PREFETCH");
  ::unsetenv("GLASSBOX_CPU_TUNING_MIN_BYTES");
  ::unsetenv("GLASSBOX_CPU_TUNING_FILE");
  ::setenv("GLASSBOX_CPU_TUNING", "0", 1);
  QVERIFY2(fixed.error.empty(), fixed.error.c_str());
  for (const auto& d : fixed.list) QCOMPARE(d["bytes"].get<int64_t>(), int64_t{4096});
}

// --bf16-matmuls: the report says whether float matrices ran as bf16 dot
// products (an F16 file's do; a Q4_K_M file has none to round), and the bytes
// a decode step reads are those the backend holds: an F16 matrix rounded to
// BF16 keeps two bytes a value; stories260K's F32 matrices lose two bytes a
// value, counted here from the llama2.c header (dim, hidden, layers, heads,
// kv heads, vocab): the layers' q, k, v, o, gate, up, down and the classifier.
GB_TEST(bench_json_says_whether_matmuls_ran_in_bf16) {
  GB_REQUIRE_SHARED(f16, "models/quant-llama/quant-llama-F16.gguf");
  GB_REQUIRE_SHARED(q4, "models/quant-llama/quant-llama-Q4_K_M.gguf");
  const auto bench = [](const std::string& model, const char* extra) {
    const auto r = gbtest::run_cli("bench --model '" + model + "'" + kArgs + " --json" + extra, false);
    [&] { QVERIFY2(r.exit_code == 0, r.output.c_str()); }();
    return nlohmann::json::parse(r.output, nullptr, false);
  };
  const auto exact = bench(f16, ""), rounded = bench(f16, " --bf16-matmuls"), quant = bench(q4, " --bf16-matmuls");
  QVERIFY(exact.is_object() && rounded.is_object() && quant.is_object());
  QCOMPARE(exact["bf16_matmuls"].get<bool>(), false);
  QCOMPARE(rounded["bf16_matmuls"].get<bool>(), true);
  QCOMPARE(quant["bf16_matmuls"].get<bool>(), false);
  QCOMPARE(rounded["weight_bytes_per_token"].get<double>(), exact["weight_bytes_per_token"].get<double>());

  GB_REQUIRE_SHARED(f32, "models/stories260K/stories260K.bin");
  int32_t h[7] = {};
  std::ifstream header(f32, std::ios::binary);
  QVERIFY(header.read(reinterpret_cast<char*>(h), sizeof h));
  const double dim = h[0], hidden = h[1], layers = h[2], kv_dim = dim * h[4] / h[3], vocab = std::abs(h[5]);
  const double matrix_values = layers * (2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden) + vocab * dim;
  const auto f32_exact = bench(f32, ""), f32_rounded = bench(f32, " --bf16-matmuls");
  QVERIFY(f32_exact.is_object() && f32_rounded.is_object());
  QCOMPARE(f32_rounded["bf16_matmuls"].get<bool>(), true);
  QCOMPARE(f32_exact["weight_bytes_per_token"].get<double>() - f32_rounded["weight_bytes_per_token"].get<double>(),
           2 * matrix_values);
}
