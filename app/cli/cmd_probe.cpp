// `glassbox-cli probe`: what this machine can do, without a model: the
// processor, the kernel level the run-time dispatch chose, the FMA peak of one
// thread and of N threads running at once (kernels::fma_peak_gflops, the same
// probe `bench` reports), the bf16 dot-product peak where the processor has one
// (AVX512-BF16), and the read bandwidth at 1 and N threads. The denominators of
// `bench`'s prefill_fraction_of_fma_peak and roofline_ratio, for scripts such as
// tools/bench-vs-llamacpp.sh that compare engines on one machine.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/command_registry.h"
#include "cli/memory_bandwidth.h"
#include "cpu/cpu_info.h"
#include "cpu/matmul.h"

namespace gb::cli {
namespace {

struct ProbeArgs {
  int threads = 0;  // 0: every hardware thread
  bool json = false;
};

int run_probe(const ProbeArgs& a) {
  const int n = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double peak = kernels::fma_peak_gflops();
  const double peak_n = n > 1 ? kernels::fma_peak_gflops(n) : peak;
  const double bf16_peak = kernels::bf16_dot_peak_gflops();
  const double bf16_peak_n = n > 1 ? kernels::bf16_dot_peak_gflops(n) : bf16_peak;
  const double bw1 = measure_read_bandwidth(1) / 1e9;
  const double bwn = n > 1 ? measure_read_bandwidth(n) / 1e9 : bw1;
  const nlohmann::json j = {{"processor", kernels::processor_name()},
                            {"instruction_sets", kernels::instruction_sets()},
                            {"threads", n},
                            {"fma_peak_gflops_per_thread", peak},
                            {"fma_peak_gflops", peak_n},
                            {"bf16_dot_peak_gflops_per_thread", bf16_peak},
                            {"bf16_dot_peak_gflops", bf16_peak_n},
                            {"read_bandwidth_gb_s_1_thread", bw1},
                            {"read_bandwidth_gb_s", bwn}};
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s, kernels %s\n", kernels::processor_name().c_str(), kernels::instruction_sets().c_str());
  std::printf("FMA peak %.1f GFLOP/s on one thread, %.1f on %d threads at once\n", peak, peak_n, n);
  if (bf16_peak > 0)
    std::printf("bf16 dot-product peak %.1f GFLOP/s on one thread, %.1f on %d threads at once\n", bf16_peak,
                bf16_peak_n, n);
  std::printf("read bandwidth %.2f GB/s on 1 thread, %.2f GB/s on %d threads\n", bw1, bwn, n);
  return 0;
}

const CommandRegistrar probe_command("probe", "Measure this machine's FMA (and bf16 dot) peak and memory read bandwidth (no model)",
                                 [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<ProbeArgs>();
  sub.add_option("-t,--threads", a->threads, "Threads for the bandwidth and the total peak (default: all)")
      ->check(CLI::NonNegativeNumber);
  sub.add_flag("--json", a->json, "Print the result as JSON");
  return [a] { return run_probe(*a); };
});

}  // namespace
}  // namespace gb::cli
