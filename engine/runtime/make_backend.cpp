// make_backend (see make_backend.h): the device policy for every front end.
#include "runtime/make_backend.h"

#include <string>
#include <utility>

#include "backend/cpu_backend.h"
#include "backend/cuda_plugin.h"
#include "model/model.h"

namespace gb {
namespace {

// The CUDA backend when the device policy picks it; nullptr: use the CPU.
// Auto falls back to the CPU when the plugin is not installed or cannot load,
// when there is no usable device, for a weight type the device has no kernels
// for, or for a mixture of experts; --device cuda reports each (naming the
// tensor and the type).
Result<std::unique_ptr<Backend>> try_cuda(const std::shared_ptr<const Model>& model, Device device) {
  if (device == Device::Cpu) return std::unique_ptr<Backend>();
  // The CUDA backend has no mixture-of-experts step: auto runs such a model on the CPU.
  if (model->config.is_moe()) {
    if (device == Device::Cuda) return make_error("--device cuda: mixture-of-experts models run on the CPU backend only");
    return std::unique_ptr<Backend>();
  }
  auto plugin = cuda_plugin();
  if (!plugin) {
    if (device == Device::Cuda) return make_error("--device cuda: " + plugin.error().message);
    return std::unique_ptr<Backend>();
  }
  const CudaPluginApi& cuda = **plugin;
  if (Status types = cuda.weights_supported(*model); !types) {
    if (device == Device::Cuda) return make_error("--device cuda: " + types.error().message);
    return std::unique_ptr<Backend>();
  }
  std::string why;
  if (!cuda.device_available(&why)) {
    if (device == Device::Cuda) return make_error("--device cuda: " + why);
    return std::unique_ptr<Backend>();
  }
  return cuda.make_backend(model);
}

}  // namespace

std::optional<Device> parse_device(std::string_view name) {
  if (name == "auto") return Device::Auto;
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  return std::nullopt;
}

CudaReadiness cuda_readiness(const Model& model) {
  CudaReadiness r;
  auto plugin = cuda_plugin();
  if (!plugin) {
    r.reason = plugin.error().message;
    return r;
  }
  r.installed = true;
  if (Status types = (*plugin)->weights_supported(model); !types) {
    r.reason = types.error().message;
    return r;
  }
  r.weights = true;
  r.device = (*plugin)->device_available(&r.reason);
  if (r.device) r.reason.clear();
  return r;
}

Result<std::unique_ptr<Backend>> make_backend(std::shared_ptr<const Model> model, const BackendOptions& options) {
  auto cuda = try_cuda(model, options.device);
  if (!cuda) return cuda.error();
  if (*cuda) return std::move(*cuda);
  CpuBackendOptions cpu;
  cpu.num_threads = options.num_threads;
  cpu.bf16_matmuls = options.bf16_matmuls;
  return make_cpu_backend(std::move(model), cpu);
}

}  // namespace gb
