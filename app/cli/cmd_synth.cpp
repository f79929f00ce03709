// `glassbox-cli synth --shape NAME --dtype f32|f16|q4_0|q8_0 --seed S --out FILE.gguf`:
// write a synthetic llama GGUF (random weights, generated vocabulary) with the
// shape of a known checkpoint, for benchmarks at real sizes. Progress on stderr.
// `glassbox-cli synth --arch NAME --seed S --out FILE.gguf`: a small random model
// of one architecture (qwen3, mistral, gemma2, gemma3, phi3), F32, for the
// architecture references (tools/make_arch_refs.py, tests/data/arch).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "cli/command_registry.h"
#include "model/synthetic_model.h"

namespace gb::cli {
namespace {

struct SynthArgs {
  std::string shape = "stories260K";
  std::string arch;
  std::string dtype = "f32";
  uint64_t seed = 1;
  int32_t layers = 0;  // 0: the shape's
  std::string out;
};

int run_synth_arch(const SynthArgs& a) {
  const SyntheticArch* arch = find_synthetic_arch(a.arch);
  if (arch == nullptr) {
    std::string names;
    for (const auto& s : synthetic_archs()) names += (names.empty() ? "" : ", ") + s.name;
    return fail("unknown --arch '" + a.arch + "' (known: " + names + ")");
  }
  if (Status st = write_synthetic_arch_model(*arch, a.seed, a.out); !st) return fail(st.error().message);
  std::fprintf(stderr, "synth: wrote %s (arch %s as %s, f32, seed %llu)\n", a.out.c_str(), arch->name.c_str(),
               arch->architecture.c_str(), static_cast<unsigned long long>(a.seed));
  return 0;
}

int run_synth(const SynthArgs& a) {
  if (!a.arch.empty()) return run_synth_arch(a);
  auto shape = find_synthetic_shape(a.shape);
  if (!shape) {
    std::string names;
    for (const auto& s : synthetic_shapes()) names += (names.empty() ? "" : ", ") + s.name;
    return fail("unknown shape '" + a.shape + "' (known: " + names + ")");
  }
  // f32, f16 or a quantized type every matrix is written in (Q4_0: the
  // llama-3.1-8b shape in 4.2 GiB).
  const WeightType dtype = a.dtype == "f16"    ? WeightType::F16
                      : a.dtype == "q4_0" ? WeightType::Q4_0
                      : a.dtype == "q8_0" ? WeightType::Q8_0
                                          : WeightType::F32;
  SyntheticSpec spec{*shape, dtype, a.seed};
  // A shape with another layer count: per-token overhead is measured by
  // regressing decode time on the number of layers (docs/performance.md).
  if (a.layers > 0) spec.shape.num_layers = a.layers;
  const auto start = std::chrono::steady_clock::now();
  int last_percent = -1;
  Status st = write_synthetic_model(spec, a.out, [&](uint64_t done, uint64_t total) {
    // Only big files get a progress line; small ones finish before anyone looks.
    if (total < (uint64_t{64} << 20)) return;
    const int percent = static_cast<int>(100 * done / total);
    if (percent / 5 == last_percent / 5) return;
    last_percent = percent;
    std::fprintf(stderr, "\rsynth: %3d%% of %.0f MiB", percent, static_cast<double>(total) / (1 << 20));
    std::fflush(stderr);
  });
  if (last_percent >= 0) std::fputc('\n', stderr);
  if (!st) return fail(st.error().message);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "synth: wrote %s (%s, %d layers, %s, seed %llu) in %.1f s\n", a.out.c_str(),
               shape->name.c_str(), spec.shape.num_layers, a.dtype.c_str(), static_cast<unsigned long long>(a.seed),
               seconds);
  return 0;
}

const CommandRegistrar synth_command("synth", "Write a synthetic GGUF: a llama with a known shape, or a small model of an architecture",
                                  [](CLI::App& sub) -> CommandRunner {
                                    auto args = std::make_shared<SynthArgs>();
                                    sub.add_option("--shape", args->shape,
                                                   "stories260K, stories15M, stories42M, stories110M, tinyllama-1.1b, llama-3.1-8b")
                                        ->capture_default_str();
                                    sub.add_option("--arch", args->arch,
                                                   "Small random model of an architecture instead of a shape: "
                                                   "qwen3, mistral, gemma2, gemma3, phi3 (F32)");
                                    sub.add_option("--dtype", args->dtype, "Weight type")
                                        ->check(CLI::IsMember({"f32", "f16", "q4_0", "q8_0"}))
                                        ->capture_default_str();
                                    sub.add_option("--seed", args->seed, "Random seed")->capture_default_str();
                                    sub.add_option("--layers", args->layers,
                                                   "Number of layers (default: the shape's), e.g. for a "
                                                   "per-token overhead regression")
                                        ->check(CLI::Range(1, 1024));
                                    sub.add_option("--out", args->out, "Output .gguf file")->required();
                                    return [args] { return run_synth(*args); };
                                  });

}  // namespace
}  // namespace gb::cli
