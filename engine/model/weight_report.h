// What a model's weights are made of, for `info`, the workbench's Model panel and
// the recent-files list: bytes per weight type, bits per weight, a memory
// estimate before running, and a scan of every block's scales for NaN/Inf.
// Pure functions of a loaded Model, plus read_weight_summary, which reads only a
// file's header and tensor infos (for menus and file dialogs); any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "model/model.h"

namespace gb {

struct WeightTypeRow {
  WeightType type = WeightType::F32;
  int num_tensors = 0;
  uint64_t num_values = 0;
  uint64_t num_bytes = 0;
  double bits_per_weight() const { return num_values ? 8.0 * static_cast<double>(num_bytes) / static_cast<double>(num_values) : 0; }
};

// One row per type present, largest share of bytes first (a tied classifier counted once).
std::vector<WeightTypeRow> weight_type_table(const Model& model);
double bits_per_weight(const Model& model);
// "Q4_K_M, 4.9 bpw": the file's declared mixture (general.file_type) when it
// has one, else the type holding most bytes.
std::string weight_type_label(const Model& model);

// A file's weight mix without loading it: the same table and label as above.
struct WeightSummary {
  std::vector<WeightTypeRow> types;  // as weight_type_table
  uint64_t num_values = 0;
  uint64_t num_bytes = 0;
  uint64_t file_bytes = 0;
  std::string label;  // as weight_type_label; "F32 (llama2.c)" for llama2.c checkpoints
};

// Reads only the GGUF header and tensor infos (or a llama2.c header); never
// touches the weights. Errors are short and name the problem.
Result<WeightSummary> read_weight_summary(const std::string& path);

// Weights (mapped in place) + KV pool (float32, as the backends keep it) for a
// context of num_tokens.
uint64_t memory_estimate_bytes(const Model& model, int64_t num_tokens);

// Scans every tensor: the f16 scales (d, dmin/m) of every quantized block and
// every float value. Error names the first bad tensor and block (or value).
Status check_tensor_values(const Model& model);

}  // namespace gb
