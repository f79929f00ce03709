// quantize_model(): rewrite a GGUF with its 2-D weight matrices in a quantized
// type, either one type for all of them (--pure) or one of llama-quantize's
// named mixtures (Q4_K_M, Q3_K_S ...) with the same per-tensor choices as
// llama.cpp's defaults (a table of rules in quantize_model.cpp). 1-D tensors
// (norms) are copied as they are. The output is written to "<out>.partial" and
// renamed when complete. Reports the RMSE of every quantized tensor against its
// source values. Runs on the calling thread plus a ThreadPool of its own.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "model/dtype.h"

namespace gb {

struct QuantizeOptions {
  std::string type;   // a weight type name ("Q4_K", "IQ4_XS") or a mixture ("Q4_K_M")
  bool pure = false;  // every 2-D weight in the base type, no mixture rules
  int num_threads = 0;
  // (tensor index, tensor count, name, chosen type) before each tensor is written.
  std::function<void(size_t, size_t, const std::string&, WeightType)> on_tensor;
};

struct QuantizedTensor {
  std::string name;
  WeightType from = WeightType::F32, to = WeightType::F32;
  int64_t num_elements = 0;
  double rmse = 0;      // sqrt(mean((dequantized - source)^2)); 0 for copied tensors
  double source_rms = 0;
};

// Names accepted as QuantizeOptions::type (types and mixtures).
std::vector<std::string> quantize_type_names();

// The type every tensor of in_path would get (name, type), without writing.
Result<std::vector<std::pair<std::string, WeightType>>> plan_quantization(const std::string& in_path,
                                                                     const QuantizeOptions& options);

Result<std::vector<QuantizedTensor>> quantize_model(const std::string& in_path, const std::string& out_path,
                                                    const QuantizeOptions& options);

}  // namespace gb
