// `glassbox-cli soak`: a long random mixed workload with every invariant checked
// after every step and every request replayed alone (cli/soak.h). Exits 1 when
// any check fails; the last line is the one-line summary.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/command_registry.h"
#include "cli/model_session.h"
#include "cli/soak.h"
#include "runtime/make_backend.h"

namespace gb::cli {
namespace {

struct SoakArgs {
  ModelOptions model;
  SoakOptions soak;
};

int run_soak_command(const SoakArgs& a) {
  if (a.soak.num_requests < 1) return fail("--requests must be at least 1");
  if (a.soak.max_live < 1) return fail("--max-live must be at least 1");
  if (a.soak.num_blocks < 0) return fail("--kv-blocks must not be negative");
  ModelOptions model = a.model;
  model.device = "cpu";  // replays must run the same kernels as the soaked engine
  auto session = open_model_session(model);
  if (!session) return fail(session.error().message);
  const BackendOptions cpu{Device::Cpu, model.num_threads, model.bf16_matmuls};
  // The CPU device never fails to make a backend.
  const auto new_backend = [&] { return make_backend(session->model, cpu).value(); };
  SoakOptions options = a.soak;
  options.kv_types = session->kv_types;
  const SoakSummary s = run_soak(session->model, session->tokenizer, new_backend, options);
  for (const std::string& f : s.failures) std::fprintf(stderr, "soak: check failed: %s\n", f.c_str());
  if (s.num_failures > static_cast<int64_t>(s.failures.size()))
    std::fprintf(stderr, "soak: ... and %lld more failed checks\n",
                 static_cast<long long>(s.num_failures - static_cast<int64_t>(s.failures.size())));
  std::printf("%s\n", s.line().c_str());
  return s.ok() ? 0 : 1;
}

const CommandRegistrar soak_command("soak", "Random mixed workload with invariant checks and replays (reliability)",
                           [](CLI::App& sub) -> CommandRunner {
                             auto a = std::make_shared<SoakArgs>();
                             sub.add_option("--model,-m", a->model.model_path, "Model file (GGUF or llama2.c .bin)")
                                 ->required();
                             sub.add_option("--tokenizer,-z", a->model.tokenizer_path, "Tokenizer file");
                             sub.add_option("--ctx", a->model.context_length, "Context length (default: the file's)");
                             sub.add_option("--threads,-t", a->model.num_threads, "CPU threads (default 1: the workload is about scheduling, not speed)")
                                 ->default_val(1);
                             sub.add_option("--requests,-n", a->soak.num_requests, "Requests to submit")
                                 ->default_val(200);
                             sub.add_option("--seed,-s", a->soak.seed, "Workload seed")->default_val(1);
                             sub.add_option("--kv-blocks", a->soak.num_blocks,
                                            "KV pool blocks of 16 tokens (default: 1.5 contexts)");
                             sub.add_option("--max-live", a->soak.max_live, "Requests queued or running at once")
                                 ->default_val(8);
                             sub.add_option("--rss-growth-mib", a->soak.rss_growth_mib,
                                            "Allowed growth of resident memory after the warm-up")
                                 ->default_val(64);
                             sub.add_option("--kv-policy-mix", a->soak.kv_policy_share,
                                            "Share of new requests that evict KV (random sink/h2o/snapkv and budget)")
                                 ->check(CLI::Range(0.0, 1.0));
                             sub.add_flag("--inject-mismatch", a->soak.inject_mismatch,
                                          "Test the soak itself: alter one request's tokens so the replay check fails");
                             return [a] { return run_soak_command(*a); };
                           });

}  // namespace
}  // namespace gb::cli
