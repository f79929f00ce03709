// The entry point of libglassbox-cuda.so (backend/cuda_plugin.h): the table the
// loader asks for, over the CUDA backend of this folder.
#include <memory>
#include <string>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_plugin.h"

namespace {

bool plugin_device_available(std::string* why) { return gb::cuda_device_available(why); }

gb::Status plugin_weights_supported(const gb::Model& model) { return gb::cuda_weights_supported(model); }

gb::Result<std::unique_ptr<gb::Backend>> plugin_make_backend(std::shared_ptr<const gb::Model> model) {
  auto backend = gb::make_cuda_backend(std::move(model), {});
  if (!backend) return backend.error();
  return std::unique_ptr<gb::Backend>(std::move(*backend));
}

const gb::CudaPluginApi* plugin_table() {
  static const std::string build_id = gb::cuda_plugin_build_id();
  static const gb::CudaPluginApi api{gb::kCudaPluginAbi, build_id.c_str(), &plugin_device_available,
                                     &plugin_weights_supported, &plugin_make_backend};
  return &api;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const gb::CudaPluginApi* glassbox_cuda_plugin() {
  return plugin_table();
}
