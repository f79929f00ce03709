// Shared set-up for CLI commands that run a model: load the model and tokenizer,
// pick the backend (--device), with errors as messages for gb::cli::fail().
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/kv_pool_sizing.h"
#include "core/result.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace CLI {
class App;
}

namespace gb::cli {

struct ModelOptions {
  std::string model_path;
  std::string tokenizer_path;
  int32_t context_length = 0;  // 0: the file's context
  int32_t num_threads = 0;     // 0: all cores
  std::string device = "auto"; // auto | cpu | cuda
  bool check_tensors = false;  // scan every block for NaN/Inf scales at load
  bool bf16_matmuls = false;   // CPU: F32/F16 matrices rounded to BF16 at load
  std::string kv_type_k;       // --kv-type-k / -ctk; empty: the default (f16 where the backend reads it)
  std::string kv_type_v;       // --kv-type-v / -ctv
  bool allow_longer_context = false;  // bench: --ctx past the file's context
  bool swa_full = false;  // --swa-full: sliding layers keep every token (no window group, no release)
};

// Adds --model, --tokenizer, --ctx, --threads, --device, --check-tensors,
// --bf16-matmuls, --kv-type-k, --kv-type-v (-ctk, -ctv), --swa-full to a subcommand
// (--model optional where another source can stand in, e.g. generate --remote).
void add_model_options(CLI::App& sub, ModelOptions& options, bool model_required = true);

struct ModelSession {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  // The context requests get: --ctx, else the model's if its KV fits the
  // memory there is, else the largest that does (kv_plan.note says so).
  int32_t context_length = 0;
  KvTypes kv_types;  // what the backend's KV pool stores
  KvPlan kv_plan;    // one context at kv_types under this host's budget
  bool swa_full = false;
};

// Loads the model and picks its backend. Before the weights are read into a
// backend: the KV types are parsed and checked against the model, --ctx
// against the file's context, and one context of KV against the memory there
// is (plan_kv), so a request that cannot fit is refused with what it needs and
// what there is; a lowered default context is printed as one line on stderr.
Result<ModelSession> open_model_session(const ModelOptions& options);

// Sets an engine's KV types, context and window release from the session.
void apply_session(const ModelSession& session, EngineConfig& config);

}  // namespace gb::cli
