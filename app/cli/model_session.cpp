#include "cli/model_session.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/make_backend.h"

namespace gb::cli {

void add_model_options(CLI::App& sub, ModelOptions& o, bool model_required) {
  sub.add_option("--model,-m", o.model_path, "Model file (GGUF or llama2.c .bin)")->required(model_required);
  sub.add_option("--tokenizer,-z", o.tokenizer_path,
                 "Tokenizer (.model SentencePiece or llama2.c tokenizer.bin); default: embedded or beside the model");
  sub.add_option("--ctx", o.context_length,
                 "Context length in tokens (default: the model file's, or the largest whose KV fits in memory)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--threads,-t", o.num_threads, "CPU threads (default: all cores)");
  sub.add_option("--device", o.device, "Compute device: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  sub.add_flag("--check-tensors", o.check_tensors, "Scan every weight block for NaN/Inf scales while loading");
  sub.add_flag("--bf16-matmuls", o.bf16_matmuls,
               "CPU: round F32/F16 weight matrices to BF16 at load and run them as bf16 dot products "
               "(faster prefill with AVX512-BF16, no longer exact)");
  sub.add_option("--kv-type-k", o.kv_type_k,
                 "KV cache type of K (also -ctk): " + kernels::kv_type_names() + " (default f16)");
  sub.add_option("--kv-type-v", o.kv_type_v,
                 "KV cache type of V (also -ctv): " + kernels::kv_type_names() + " (default f16)");
  sub.add_flag("--swa-full", o.swa_full,
               "Sliding-window layers keep every token (as llama.cpp's --swa-full); by default they keep only "
               "their window (Gemma 2/3: in a pool of their own; Mistral: blocks released)");
}

void apply_session(const ModelSession& session, EngineConfig& config) {
  config.kv_types = session.kv_types;
  config.max_context = session.context_length;
  config.release_window_blocks = !session.swa_full;
}

Result<ModelSession> open_model_session(const ModelOptions& o) {
  ModelSession s;
  // KV types first: a misspelt name costs nothing.
  KvTypes types;
  if (!o.kv_type_k.empty()) GB_ASSIGN_OR_RETURN(types.k, parse_kv_type(o.kv_type_k, "--kv-type-k"));
  if (!o.kv_type_v.empty()) GB_ASSIGN_OR_RETURN(types.v, parse_kv_type(o.kv_type_v, "--kv-type-v"));
  LoadOptions load;
  load.context_length = o.context_length;
  load.check_tensors = o.check_tensors;
  auto model = load_model(o.model_path, load);
  if (!model) return model.error();
  s.model = *model;
  const ModelConfig& c = s.model->config;
  if (!o.allow_longer_context && o.context_length > 0 && c.file_context_length > 0 &&
      o.context_length > c.file_context_length)
    return make_error("--ctx " + std::to_string(o.context_length) + " is above the model's maximum context of " +
                      std::to_string(c.file_context_length) + " tokens");
  if (std::string why = kv_types_unsupported(c, types); !why.empty()) return make_error("KV type: " + why);
  {
    // One context of KV against this host's memory, before any weight is read
    // into a backend (a device's memory is checked by its backend).
    KvPlanRequest request;
    request.context = o.context_length;
    request.types = types;
    request.window_group = !o.swa_full && o.device != "cuda" && c.has_window_group();
    const MemoryBudget budget =
        o.device == "cuda" ? MemoryBudget{}
                           : host_budget(s.model->weight_bytes(),
                                         work_bytes(c, 512, 1, o.context_length > 0 ? o.context_length : c.context_length,
                                                    std::max(1, o.num_threads)));
    GB_ASSIGN_OR_RETURN(s.kv_plan, plan_kv(c, request, budget));
    if (!s.kv_plan.note.empty()) std::fprintf(stderr, "glassbox-cli: %s\n", s.kv_plan.note.c_str());
  }
  auto tokenizer = load_tokenizer(*s.model, o.tokenizer_path);
  if (!tokenizer) return tokenizer.error();
  s.tokenizer = *tokenizer;
  s.context_length = s.kv_plan.context;
  // The device policy (auto / cpu / cuda, which weights CUDA runs) is the engine's.
  BackendOptions backend_options;
  backend_options.device = parse_device(o.device).value_or(Device::Auto);
  backend_options.num_threads = o.num_threads;
  backend_options.bf16_matmuls = o.bf16_matmuls;
  auto backend = make_backend(s.model, backend_options);
  if (!backend) return backend.error();
  s.backend = std::move(*backend);
  // The backend's attention must read the types: a named type it cannot is an
  // error; the default falls back to F32 where F16 is not read (CUDA).
  const std::vector<WeightType> readable = s.backend->kv_types();
  const auto reads = [&](WeightType t) { return std::find(readable.begin(), readable.end(), t) != readable.end(); };
  for (auto [type, given, option] : {std::tuple{&types.k, !o.kv_type_k.empty(), "--kv-type-k"},
                                     std::tuple{&types.v, !o.kv_type_v.empty(), "--kv-type-v"}}) {
    if (reads(*type)) continue;
    if (given)
      return make_error(std::string(option) + " " + std::string(kernels::kv_type_name(*type)) + ": the " +
                        s.backend->device_info().backend + " backend's attention does not read this type");
    *type = WeightType::F32;
  }
  s.kv_types = types;
  s.kv_plan.types = types;
  s.swa_full = o.swa_full;
  return s;
}

}  // namespace gb::cli
