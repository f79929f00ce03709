// A stand-in for libglassbox-cuda.so, for cuda_plugin_test: built three ways.
//   FAKE_PLUGIN_GOOD   the right ABI and build identity; "no device" unless
//                      GLASSBOX_FAKE_CUDA_DEVICE=1, then its "device" is a
//                      one-thread CPU backend (so a test can tell it made it)
//   FAKE_PLUGIN_OTHER  another build's identity
//   (neither)          no entry point at all
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "backend/cpu_backend.h"
#include "backend/cuda_plugin.h"

#if defined(FAKE_PLUGIN_GOOD) || defined(FAKE_PLUGIN_OTHER)
namespace {

bool fake_device_available(std::string* why) {
  const char* on = std::getenv("GLASSBOX_FAKE_CUDA_DEVICE");
  if (on && std::string(on) == "1") return true;
  if (why) *why = "fake plugin: no device";
  return false;
}

gb::Status fake_weights_supported(const gb::Model&) { return {}; }

gb::Result<std::unique_ptr<gb::Backend>> fake_make_backend(std::shared_ptr<const gb::Model> model) {
  gb::CpuBackendOptions options;
  options.num_threads = 1;
  return gb::make_cpu_backend(std::move(model), options);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const gb::CudaPluginApi* glassbox_cuda_plugin() {
#if defined(FAKE_PLUGIN_GOOD)
  static const std::string build_id = gb::cuda_plugin_build_id();
#else
  static const std::string build_id = "glassbox 0.0.0 another build";
#endif
  static const gb::CudaPluginApi api{gb::kCudaPluginAbi, build_id.c_str(), &fake_device_available,
                                     &fake_weights_supported, &fake_make_backend};
  return &api;
}
#else
extern "C" __attribute__((visibility("default"))) int glassbox_not_a_plugin() { return 1; }
#endif
