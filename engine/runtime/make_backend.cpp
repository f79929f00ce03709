// make_backend (see make_backend.h): the device policy for every front end.
#include "runtime/make_backend.h"

#include <string>
#include <utility>

#include "backend/cpu_backend.h"
#include "model/model.h"

#if defined(GLASSBOX_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace gb {
namespace {

#if defined(GLASSBOX_HAVE_CUDA)
// The CUDA backend when the device policy picks it; nullptr: use the CPU.
// Auto falls back to the CPU for a weight type the device has no kernels for;
// --device cuda reports it (naming the tensor and the type).
Result<std::unique_ptr<Backend>> try_cuda(const std::shared_ptr<const Model>& model, Device device) {
  if (device == Device::Cpu) return std::unique_ptr<Backend>();
  if (Status types = cuda_weights_supported(*model); !types) {
    if (device == Device::Cuda) return make_error("--device cuda: " + types.error().message);
    return std::unique_ptr<Backend>();
  }
  std::string why;
  if (!cuda_device_available(&why)) {
    if (device == Device::Cuda) return make_error("--device cuda: " + why);
    return std::unique_ptr<Backend>();
  }
  auto backend = make_cuda_backend(model, {});
  if (!backend) return backend.error();
  return std::unique_ptr<Backend>(std::move(*backend));
}
#else
Result<std::unique_ptr<Backend>> try_cuda(const std::shared_ptr<const Model>&, Device device) {
  if (device == Device::Cuda) return make_error("--device cuda: this build of Glassbox has no CUDA backend");
  return std::unique_ptr<Backend>();
}
#endif

}  // namespace

std::optional<Device> parse_device(std::string_view name) {
  if (name == "auto") return Device::Auto;
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  return std::nullopt;
}

bool cuda_backend_built() {
#if defined(GLASSBOX_HAVE_CUDA)
  return true;
#else
  return false;
#endif
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
