#include "cli/model_session.h"

#include <CLI/CLI.hpp>

#include "runtime/make_backend.h"

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
  sub.add_flag("--bf16-matmuls", o.bf16_matmuls,
               "CPU: round F32/F16 weight matrices to BF16 at load and run them as bf16 dot products "
               "(faster prefill with AVX512-BF16, no longer exact)");
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
  // The device policy (auto / cpu / cuda, which weights CUDA runs) is the engine's.
  BackendOptions backend_options;
  backend_options.device = parse_device(o.device).value_or(Device::Auto);
  backend_options.num_threads = o.num_threads;
  backend_options.bf16_matmuls = o.bf16_matmuls;
  auto backend = make_backend(s.model, backend_options);
  if (!backend) return backend.error();
  s.backend = std::move(*backend);
  return s;
}

}  // namespace gb::cli
