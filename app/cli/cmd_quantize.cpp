// `glassbox-cli quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N]`: rewrite
// a GGUF with quantized weights (a type, or a llama-quantize mixture such as
// Q4_K_M with llama.cpp's default per-tensor choices). Progress on stderr; the
// output appears only when complete (written to OUT.partial, then renamed).
// Prints the RMSE against the source values per stored type.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "cli/command_registry.h"
#include "model/quantize_model.h"

namespace gb::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, type;
  bool pure = false;
  int threads = 0;
};

int run_quantize(const QuantizeArgs& a) {
  QuantizeOptions options;
  options.type = a.type;
  options.pure = a.pure;
  options.num_threads = a.threads;
  options.on_tensor = [](size_t i, size_t n, const std::string& name, WeightType to) {
    std::fprintf(stderr, "\rquantize: [%3zu/%3zu] %-32s -> %-6s", i + 1, n, name.c_str(),
                 std::string(dtype_info(to).name).c_str());
    std::fflush(stderr);
  };
  const auto start = std::chrono::steady_clock::now();
  auto result = quantize_model(a.in, a.out, options);
  std::fputc('\n', stderr);
  if (!result) return fail(result.error().message);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Per stored type: tensors, values and the RMSE over all of them.
  struct Sum { int tensors = 0; int64_t values = 0; double sq_err = 0, sq_src = 0; };
  std::map<std::string, Sum> by_type;
  for (const QuantizedTensor& t : *result) {
    Sum& s = by_type[std::string(dtype_info(t.to).name) + (t.from == t.to ? " (copied)" : "")];
    ++s.tensors;
    s.values += t.num_elements;
    s.sq_err += t.rmse * t.rmse * static_cast<double>(t.num_elements);
    s.sq_src += t.source_rms * t.source_rms * static_cast<double>(t.num_elements);
  }
  std::printf("%-16s %8s %14s %12s %12s\n", "type", "tensors", "values", "rmse", "rmse/rms");
  for (const auto& [name, s] : by_type) {
    const double rmse = std::sqrt(s.sq_err / static_cast<double>(s.values));
    const double rms = std::sqrt(s.sq_src / static_cast<double>(s.values));
    std::printf("%-16s %8d %14lld %12.6g %12.6g\n", name.c_str(), s.tensors, static_cast<long long>(s.values), rmse,
                rms > 0 ? rmse / rms : 0.0);
  }
  std::fprintf(stderr, "quantize: wrote %s (%s%s) in %.1f s\n", a.out.c_str(), a.type.c_str(), a.pure ? ", pure" : "",
               seconds);
  return 0;
}

const CommandRegistrar quantize_command("quantize", "Write a copy of a GGUF with quantized weights",
                                  [](CLI::App& sub) -> CommandRunner {
                                    auto args = std::make_shared<QuantizeArgs>();
                                    std::string names;
                                    for (const auto& n : quantize_type_names()) names += (names.empty() ? "" : ", ") + n;
                                    sub.add_option("input", args->in, "Source .gguf (F32/F16/BF16 or quantized)")->required();
                                    sub.add_option("output", args->out, "Output .gguf")->required();
                                    sub.add_option("type", args->type, "Type or mixture: " + names + " (Q3_K/Q4_K/Q5_K = _M)")
                                        ->required();
                                    sub.add_flag("--pure", args->pure, "Every 2-D weight in the one type (no mixture rules)");
                                    sub.add_option("--threads", args->threads, "Threads (0: all cores)")->capture_default_str();
                                    return [args] { return run_quantize(*args); };
                                  });

}  // namespace
}  // namespace gb::cli
