#include "cli/model_session.h"

#include <CLI/CLI.hpp>

#if defined(GLASSBOX_HAVE_CUDA) && __has_include("cuda/cuda_backend.h")
#include "cuda/cuda_backend.h"
#define GLASSBOX_CLI_CUDA 1
#endif

namespace gb::cli {

void add_model_options(CLI::App& sub, ModelOptions& o, bool model_required) {
  sub.add_option("--model,-m", o.model_path, "Model file (GGUF or llama2.c .bin)")->required(model_required);
  sub.add_option("--tokenizer,-z", o.tokenizer_path,
                 "Tokenizer (.model SentencePiece or llama2.c tokenizer.bin); default: embedded or beside the model");
  sub.add_option("--ctx", o.context_length, "Context length in tokens (default: the model file's)");
  sub.add_option("--threads,-t", o.num_threads, "CPU threads (default: all cores)");
  sub.add_option("--device", o.device, "Compute device: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  sub.add_flag("--check-tensors", o.check_tensors, "Scan every weight block for NaN/Inf scales while loading");
}

Result<ModelSession> open_model_session(const ModelOptions& o) {
  ModelSession s;
  LoadOptions load;
  load.context_length = o.context_length;
  load.check_tensors = o.check_tensors;
  auto model = load_model(o.model_path, load);
  if (!model) return model.error();
  s.model = *model;
  auto tokenizer = load_tokenizer(*s.model, o.tokenizer_path);
  if (!tokenizer) return tokenizer.error();
  s.tokenizer = *tokenizer;
  s.context_length = s.model->config.context_length;
#if defined(GLASSBOX_CLI_CUDA)
  bool quantized = false;
  for (const TensorView* t : s.model->all_tensors()) quantized |= kernels::is_quantized(t->dtype);
  // The CUDA backend runs float weights only so far: auto picks the CPU for
  // quantized files, an explicit --device cuda reports why it cannot.
  if (o.device == "cuda" || (o.device == "auto" && !quantized)) {
    std::string why;
    if (cuda_device_available(&why)) {
      auto backend = make_cuda_backend(s.model, {});
      if (!backend) return backend.error();
      s.backend = std::move(*backend);
      return s;
    }
    if (o.device == "cuda") return make_error("--device cuda: " + why);
  }
#else
  if (o.device == "cuda") return make_error("--device cuda: this build of Glassbox has no CUDA backend");
#endif
  CpuBackendOptions cpu;
  cpu.num_threads = o.num_threads;
  s.backend = make_cpu_backend(s.model, cpu);
  return s;
}

}  // namespace gb::cli
