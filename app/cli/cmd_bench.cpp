// `glassbox-cli bench`: prefill and decode speed of one model on one backend, and
// the decode roofline: weight bytes read per token against the machine's measured
// read bandwidth. Speed targets are checked with this, never with timed tests.
// Records the processor and the instruction sets the kernels' run-time dispatch
// chose; --llama-bench-table prints llama-bench's markdown table.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/command_registry.h"
#include "cli/memory_bandwidth.h"
#include "cli/model_session.h"
#include "cpu/cpu_info.h"
#include "cpu/exp_sums.h"
#include "cpu/matmul.h"
#include "cpu/matmul_quant.h"
#include "model/weight_report.h"

namespace gb::cli {
namespace {

struct BenchArgs {
  ModelOptions model;
  int32_t prompt_tokens = 128;
  int32_t gen_tokens = 64;
  int32_t repeats = 3;
  int32_t block_size = 16;
  bool json = false;
  bool skip_bandwidth = false;
  bool llama_bench_table = false;
  std::string out;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// Sample standard deviation (n - 1), as llama-bench reports; 0 for one run.
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double sq = 0;
  for (double x : v) sq += (x - m) * (x - m);
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

// What ran the model: the processor (or GPU), the instruction sets the CPU
// dispatch chose, and the weight types that fall back to the scalar kernels.
// The decode prefetch distance of each weight type (backend/decode_tuning.h).
nlohmann::json decode_prefetch_json(const DeviceInfo& device) {
  nlohmann::json out = nlohmann::json::array();
  for (const DecodePrefetchReport& d : device.decode_prefetch) {
    nlohmann::json trials = nlohmann::json::array();
    for (const auto& [bytes, rate] : d.trials) trials.push_back({{"bytes", bytes}, {"gb_s", rate}});
    out.push_back({{"type", d.type}, {"bytes", d.bytes}, {"source", d.source}, {"trials", trials}});
  }
  return out;
}

nlohmann::json kernel_fields(const DeviceInfo& device, const Model& model) {
  nlohmann::json j;
  if (device.backend != "cpu") {
    j["processor"] = kernels::processor_name();
    j["instruction_sets"] = device.backend;
    j["scalar_weight_types"] = nlohmann::json::array();
    return j;
  }
  const std::string sets = kernels::instruction_sets();
  nlohmann::json scalar = nlohmann::json::array();
  if (sets != "scalar")
    for (const WeightTypeRow& r : weight_type_table(model))
      if (!kernels::matmul_weights_has_simd(r.type)) scalar.push_back(std::string(dtype_info(r.type).name));
  j["processor"] = kernels::processor_name();
  j["instruction_sets"] = sets;
  j["scalar_weight_types"] = scalar;
  return j;
}

// llama-bench's markdown table: model, size, params, backend, threads, test, t/s
// (mean ± sample standard deviation over the repeats).
void print_llama_bench_table(const nlohmann::json& j) {
  const double params = j["num_parameters"].get<double>();
  char size[32], count[32];
  std::snprintf(size, sizeof size, "%.2f MiB", j["weight_bytes"].get<double>() / (1024.0 * 1024.0));
  std::snprintf(count, sizeof count, params >= 1e9 ? "%.2f B" : "%.2f M", params >= 1e9 ? params / 1e9 : params / 1e6);
  std::string backend = j["backend"].get<std::string>();
  std::transform(backend.begin(), backend.end(), backend.begin(), [](unsigned char ch) { return std::toupper(ch); });
  std::string mix = j["type_label"].get<std::string>();  // "Q4_K_M, 4.6 bpw" -> "Q4_K_M"
  mix = mix.substr(0, mix.find(','));
  const std::string model = j["architecture"].get<std::string>() + " " + mix;
  std::printf("| model | size | params | backend | threads | test | t/s |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
  struct Test { const char* prefix; const char* tokens; const char* kind; };
  for (const Test& t : {Test{"pp", "prompt_tokens", "prefill"}, Test{"tg", "gen_tokens", "decode"}}) {
    const std::string test = t.prefix + std::to_string(j[t.tokens].get<int>());
    std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f |\n", model.c_str(), size, count, backend.c_str(),
                j["threads"].get<int>(), test.c_str(), j[std::string(t.kind) + "_mean_tok_s"].get<double>(),
                j[std::string(t.kind) + "_stddev_tok_s"].get<double>());
  }
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Tokens per second of each timed run (run 0 warms up and is not kept).
struct BenchRuns {
  std::vector<double> prefill_tok_s, decode_tok_s;
};

// The first largest logit, by the sampler's vector scans (the max, then the
// first element not below it): a scalar std::max_element over 32000 logits was
// 25 us of every decoded token, 1.5% of a stories15M step (llama-bench samples
// nothing at all).
TokenId greedy(const std::vector<float>& logits) {
  const auto n = static_cast<int64_t>(logits.size());
  return static_cast<TokenId>(kernels::find_not_below(logits.data(), n, kernels::max_strided(logits.data(), n, 1)));
}

// Prefills a fixed prompt and decodes greedily after it, repeats + 1 times, on
// one sequence whose blocks are 0 .. num_blocks-1.
Result<BenchRuns> time_runs(const BenchArgs& a, Backend& backend, const ModelConfig& c, int32_t needed, KvTypes kv) {
  const int32_t num_blocks = (needed + a.block_size - 1) / a.block_size;
  GB_TRY(backend.init_kv_pool({num_blocks, a.block_size, kv.k, kv.v}));
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));
  for (int32_t i = 0; i < num_blocks; ++i) table[static_cast<size_t>(i)] = i;

  // A fixed pseudo-random prompt of ordinary (non-control) tokens.
  std::mt19937 rng(1234);
  std::uniform_int_distribution<TokenId> pick(std::min(3, c.vocab_size - 1), c.vocab_size - 1);
  std::vector<TokenId> prompt(static_cast<size_t>(a.prompt_tokens));
  for (auto& t : prompt) t = pick(rng);
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));

  BenchRuns runs;
  BatchLayout batch;
  batch.block_size = a.block_size;
  for (int32_t r = 0; r < a.repeats + 1; ++r) {  // run 0 warms up
    batch.clear();
    batch.add_sequence(prompt.data(), a.prompt_tokens, 0, table.data(), num_blocks, false);
    auto t0 = Clock::now();
    GB_TRY(backend.forward(batch, logits));
    const double prefill_s = seconds_since(t0);
    TokenId next = greedy(logits);
    t0 = Clock::now();
    for (int32_t i = 0; i < a.gen_tokens; ++i) {
      batch.clear();
      batch.add_sequence(&next, 1, a.prompt_tokens + i, table.data(), num_blocks, false);
      GB_TRY(backend.forward(batch, logits));
      next = greedy(logits);
    }
    const double decode_s = seconds_since(t0);
    if (r == 0) continue;
    runs.prefill_tok_s.push_back(a.prompt_tokens / prefill_s);
    runs.decode_tok_s.push_back(a.gen_tokens / decode_s);
    if (!a.json && !a.llama_bench_table)
      std::fprintf(stderr, "run %d: prefill %.1f tok/s, decode %.2f tok/s\n", r, runs.prefill_tok_s.back(),
                   runs.decode_tok_s.back());
  }
  return runs;
}

// The result: speeds, the decode roofline (weight bytes per token against the
// measured read bandwidth) and prefill against the FMA peak.
nlohmann::json bench_json(const BenchArgs& a, const Model& model, const DeviceInfo& device, const BenchRuns& runs) {
  const std::vector<double>& prefill_tok_s = runs.prefill_tok_s;
  const std::vector<double>& decode_tok_s = runs.decode_tok_s;
  const double decode = median(decode_tok_s);
  const double bytes_per_token = static_cast<double>(
      device.weight_bytes_per_token > 0 ? device.weight_bytes_per_token : model.weight_bytes_per_token());
  const double implied_bw = bytes_per_token * decode;
  double measured_bw = 0.0;
  if (!a.skip_bandwidth && device.backend == "cpu") measured_bw = measure_read_bandwidth(device.num_threads);
  // Prefill arithmetic against the FMA peak of the cores used, measured with
  // all of them busy at once: 2 flops per parameter and token (the matmuls;
  // attention is left out, so this slightly understates the work done at long
  // prompts).
  const bool probe = device.backend == "cpu" && !a.skip_bandwidth;
  const int threads = std::max(1, device.num_threads);
  const double peak_gflops = probe ? kernels::fma_peak_gflops() : 0.0;
  const double peak_all_gflops = threads > 1 && probe ? kernels::fma_peak_gflops(threads) : peak_gflops;
  // BF16 weights run as bf16 dot products where the processor has them (twice
  // the products per instruction): measure their prefill against that peak.
  const std::vector<WeightTypeRow> types = weight_type_table(model);
  const bool bf16_dots = device.bf16_matmuls || (!types.empty() && types.front().type == WeightType::BF16);
  const double bf16_peak = probe && bf16_dots ? kernels::bf16_dot_peak_gflops() : 0.0;
  const double bf16_peak_all = threads > 1 && probe && bf16_dots ? kernels::bf16_dot_peak_gflops(threads) : bf16_peak;
  // A mixture's token uses only its experts' share (active parameters).
  const double prefill_gflops = 2.0 * static_cast<double>(model.active_parameters()) * median(prefill_tok_s) / 1e9;
  const double peak_all = bf16_peak > 0 ? bf16_peak_all : peak_all_gflops;
  nlohmann::json j = {
      {"model", model.path},
      {"model_name", model.name},
      {"architecture", model.config.architecture},
      {"type_label", weight_type_label(model)},
      {"num_parameters", model.num_parameters()},
      {"active_parameters", model.active_parameters()},
      {"weight_bytes", model.weight_bytes()},
      {"backend", device.backend},
      {"device", device.name},
      {"threads", device.num_threads},
      {"prompt_tokens", a.prompt_tokens},
      {"gen_tokens", a.gen_tokens},
      {"repeats", a.repeats},
      {"prefill_tok_s", median(prefill_tok_s)},
      {"decode_tok_s", decode},
      {"decode_ms_per_token", decode > 0 ? 1000.0 / decode : 0.0},
      {"prefill_mean_tok_s", mean(prefill_tok_s)},
      {"prefill_stddev_tok_s", stddev(prefill_tok_s)},
      {"decode_mean_tok_s", mean(decode_tok_s)},
      {"decode_stddev_tok_s", stddev(decode_tok_s)},
      {"prefill_runs_tok_s", prefill_tok_s},
      {"decode_runs_tok_s", decode_tok_s},
      {"weight_bytes_per_token", bytes_per_token},
      {"implied_bandwidth_gb_s", implied_bw / 1e9},
      {"measured_read_bandwidth_gb_s", measured_bw / 1e9},
      {"roofline_ratio", measured_bw > 0 ? implied_bw / measured_bw : 0.0},
      {"prefill_gflops", prefill_gflops},
      {"fma_peak_gflops_per_thread", peak_gflops},
      {"fma_peak_gflops", peak_all_gflops},
      {"fma_peak_threads", threads > 1 && probe ? threads : 1},  // the threads fma_peak_gflops was measured on
      {"prefill_fraction_of_fma_peak", peak_all > 0 ? prefill_gflops / peak_all : 0.0},
      {"bf16_dot_peak_gflops_per_thread", bf16_peak},
      {"bf16_dot_peak_gflops", bf16_peak_all},
      {"prefill_peak_kind", bf16_peak > 0 ? "bf16_dot" : "fma"},
      {"bf16_matmuls", device.bf16_matmuls},
      {"weights_in_huge_pages", device.weights_in_huge_pages},
      {"decode_prefetch", decode_prefetch_json(device)},
  };
  j.update(kernel_fields(device, model));
  return j;
}

// The plain-text report of bench_json's result.
void print_bench_text(const nlohmann::json& j) {
  const double decode = j["decode_tok_s"].get<double>();
  const int threads = j["threads"].get<int>();
  const bool bf16 = j.value("prefill_peak_kind", std::string("fma")) == "bf16_dot";
  const double peak_gflops = j[bf16 ? "bf16_dot_peak_gflops_per_thread" : "fma_peak_gflops_per_thread"].get<double>();
  const double peak_all = j[bf16 ? "bf16_dot_peak_gflops" : "fma_peak_gflops"].get<double>();
  const double prefill_gflops = j["prefill_gflops"].get<double>();
  std::printf("%s, kernels %s on %s\n", j["type_label"].get<std::string>().c_str(),
              j["instruction_sets"].get<std::string>().c_str(), j["processor"].get<std::string>().c_str());
  std::printf("prefill %.1f tok/s, decode %.2f tok/s (%.2f ms/token), %d threads\n", j["prefill_tok_s"].get<double>(),
              decode, j["decode_ms_per_token"].get<double>(), threads);
  std::printf("weights read per token %.1f MB%s -> %.2f GB/s; measured read bandwidth %.2f GB/s; roofline ratio %.2f\n",
              j["weight_bytes_per_token"].get<double>() / 1e6,
              j.value("weights_in_huge_pages", false) ? " (huge pages)" : "", j["implied_bandwidth_gb_s"].get<double>(),
              j["measured_read_bandwidth_gb_s"].get<double>(), j["roofline_ratio"].get<double>());
  if (const auto& d = j["decode_prefetch"]; d.is_array() && !d.empty()) {
    std::string line;
    for (const auto& e : d)
      line += (line.empty() ? "" : ", ") + e["type"].get<std::string>() + " " + std::to_string(e["bytes"].get<int64_t>()) +
              " B (" + e["source"].get<std::string>() + ")";
    std::printf("decode prefetch: %s\n", line.c_str());
    for (const auto& e : d)
      if (const auto& trials = e["trials"]; trials.is_array() && !trials.empty()) {
        std::string rates;
        for (const auto& t : trials) {
          char one[64];
          std::snprintf(one, sizeof one, "%s%lld B %.1f GB/s", rates.empty() ? "" : ", ",
                        static_cast<long long>(t["bytes"].get<int64_t>()), t["gb_s"].get<double>());
          rates += one;
        }
        std::printf("  %s measured on one thread: %s\n", e["type"].get<std::string>().c_str(), rates.c_str());
      }
  }
  if (peak_all > 0)
    std::printf("prefill %.1f GFLOP/s of %s peak of %.1f on %d threads at once (%.1f on one): %.0f%%\n",
                prefill_gflops, bf16 ? "a bf16 dot-product" : "an FMA", peak_all, threads, peak_gflops,
                100.0 * prefill_gflops / peak_all);
}

int run_bench(BenchArgs a) {
  const int32_t needed = a.prompt_tokens + a.gen_tokens + 1;
  a.model.context_length = std::max(a.model.context_length, needed);
  a.model.allow_longer_context = true;  // a depth past the file's context is a measurement, not a request
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  Backend& backend = *session->backend;
  auto runs = time_runs(a, backend, session->model->config, needed, session->kv_types);
  if (!runs) return fail(runs.error().message);
  nlohmann::json j = bench_json(a, *session->model, backend.device_info(), *runs);
  j["kv_type_k"] = std::string(kernels::kv_type_name(session->kv_types.k));
  j["kv_type_v"] = std::string(kernels::kv_type_name(session->kv_types.v));
  j["kv_bytes_per_token"] = kv_bytes_per_token(session->model->config, session->kv_types);
  const std::string text = j.dump(2);
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << text << '\n';
    if (!f) return fail(a.out + ": cannot write the benchmark result");
  }
  if (a.json) std::printf("%s\n", text.c_str());
  else if (a.llama_bench_table) print_llama_bench_table(j);
  else print_bench_text(j);
  return 0;
}

const CommandRegistrar bench_command("bench", "Measure prefill/decode speed and the decode bandwidth roofline",
                                 [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<BenchArgs>();
  add_model_options(sub, a->model);
  sub.add_option("--prompt-tokens", a->prompt_tokens, "Prompt length for the prefill measurement")->check(CLI::PositiveNumber);
  sub.add_option("--gen-tokens", a->gen_tokens, "Tokens decoded per run")->check(CLI::PositiveNumber);
  sub.add_option("--repeats", a->repeats, "Timed runs (the median is reported)")->check(CLI::PositiveNumber);
  auto* json = sub.add_flag("--json", a->json, "Print the result as JSON");
  sub.add_flag("--llama-bench-table", a->llama_bench_table,
               "Print the result as llama-bench's markdown table (pp<N>, tg<N>; t/s mean ± stddev)")
      ->excludes(json);
  sub.add_option("--out", a->out, "Also write the JSON result to this file");
  sub.add_flag("--skip-bandwidth", a->skip_bandwidth, "Do not measure memory bandwidth or the FMA peak");
  return [a] { return run_bench(*a); };
});

}  // namespace
}  // namespace gb::cli
