// Shared set-up for CLI commands that run a model: load the model and tokenizer,
// pick the backend (--device), with errors as messages for gb::cli::fail().
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/result.h"
#include "model/model.h"
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
};

// Adds --model, --tokenizer, --ctx, --threads, --device, --check-tensors,
// --bf16-matmuls to a subcommand
// (--model optional where another source can stand in, e.g. generate --remote).
void add_model_options(CLI::App& sub, ModelOptions& options, bool model_required = true);

struct ModelSession {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  int32_t context_length = 0;
};

Result<ModelSession> open_model_session(const ModelOptions& options);

}  // namespace gb::cli
