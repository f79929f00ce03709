// make_backend: the one place that turns "run this model on that device" into a
// Backend, for every front end (CLI, workbench, server). It knows which backends
// this build has, whether a CUDA device is present and which weights each backend
// runs; front ends pass the user's choice and show the message they get back.
//
//   device  CUDA plugin loads, weights supported, device present  ->  backend
//   auto    yes / yes / yes                                        ->  CUDA
//   auto    any no                                                 ->  CPU
//   cpu     -                                                      ->  CPU
//   cuda    yes / yes / yes                                        ->  CUDA (or make_cuda_backend's error)
//   cuda    any no                                                 ->  error "--device cuda: <why>"
//
// The CUDA backend is a plugin opened at run time (backend/cuda_plugin.h): a
// build with CUDA runs where there is no GPU, driver or CUDA library.
//
// "Weights supported" is cuda_weights_supported(): F32/F16/BF16 and every
// quantized type with CUDA kernels (all of kernels/cpu/weight_type.h today). For
// a type without kernels auto stays on the CPU and cuda reports the first such
// tensor and its type.
//
// Threads: any thread; the returned backend belongs to its one caller thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "core/result.h"

namespace gb {

struct Model;

enum class Device { Auto, Cpu, Cuda };

// "auto", "cpu", "cuda" (the CLI's --device values); nullopt for anything else.
std::optional<Device> parse_device(std::string_view name);

struct BackendOptions {
  Device device = Device::Auto;
  int32_t num_threads = 0;  // CPU backend threads; 0: every available core
  // CPU backend only: float matrices as bf16 dot products (CpuBackendOptions::bf16_matmuls).
  bool bf16_matmuls = false;
};

// Whether the CUDA plugin is installed and loads: gb::cuda_plugin()
// (backend/cuda_plugin.h). What the CUDA path would do with this model here, for `info` and the
// workbench: each stage and, at the first that fails, why.
struct CudaReadiness {
  bool installed = false;  // the plugin loads
  bool weights = false;    // it has kernels for every weight type of the model
  bool device = false;     // a usable device is present
  std::string reason;      // why the first false stage failed ("" when all are true)
};
CudaReadiness cuda_readiness(const Model& model);

Result<std::unique_ptr<Backend>> make_backend(std::shared_ptr<const Model> model, const BackendOptions& options);

}  // namespace gb
