// The CUDA backend as a plugin: libglassbox-cuda.so (engine/backend/cuda,
// target glassbox_cuda_plugin) holds CudaBackend, its kernels and its links to
// the CUDA runtime and cuBLAS; the programs themselves link none of them. So a
// Glassbox built with CUDA starts on a machine without a GPU, a driver or the
// CUDA libraries, and runs on the GPU where they are: make_backend asks this
// loader for the plugin and falls back to the CPU (auto) or reports why
// (--device cuda). The Debian package ships it separately (glassbox-cuda,
// docs/install.md), so CUDA is never a dependency of the application.
//
// Where the loader looks, first found wins:
//   1. $GLASSBOX_CUDA_PLUGIN (a file; when set, nothing else is tried)
//   2. <directory of the running program>/../lib/glassbox/libglassbox-cuda.so
//      (the installed layout: /usr/bin -> /usr/lib/glassbox)
//   3. the build tree's lib/glassbox/, for a program that runs from inside the
//      build tree it was built in (never for an installed copy)
// Before opening it, the loader makes the plugin's CUDA libraries (their sonames
// come from the toolkit it was built with) loadable: by name when the dynamic
// linker finds them, else from $CUDA_HOME, $CUDA_PATH or /usr/local/cuda
// (lib64/ or lib/), where NVIDIA's installers put them without telling ld.so.
//
// The boundary is C++ (one build makes both sides): the plugin exports one C
// function returning a table of function pointers, and the loader accepts it
// only when the table's ABI number and build identity (version, compiler and
// the sizes of the types crossing the boundary) equal its own.
// Threads: any; the plugin is opened once per process (the first call) and
// stays loaded until the process exits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"

namespace gb {

struct Model;

inline constexpr uint32_t kCudaPluginAbi = 1;
// The one symbol the plugin exports (extern "C", returns const CudaPluginApi*).
inline constexpr const char* kCudaPluginEntry = "glassbox_cuda_plugin";
inline constexpr const char* kCudaPluginFileName = "libglassbox-cuda.so";

struct CudaPluginApi {
  uint32_t abi = 0;              // kCudaPluginAbi of the build that made the plugin
  const char* build_id = "";     // cuda_plugin_build_id() of that build
  // True when the CUDA runtime finds a usable device; otherwise the reason in *why.
  bool (*device_available)(std::string* why) = nullptr;
  // Ok when the backend has kernels for every weight type of the model.
  Status (*weights_supported)(const Model& model) = nullptr;
  // The backend on device 0 (uploads the weights).
  Result<std::unique_ptr<Backend>> (*make_backend)(std::shared_ptr<const Model> model) = nullptr;
};

// What both sides of the boundary must agree on: the version, the compiler, and
// the sizes of the types that cross it. Compared as text by the loader.
std::string cuda_plugin_build_id();

// The plugin of this process: loaded on the first call (the search above);
// later calls return the same table or the same error. The error says where it
// looked and why each place failed.
Result<const CudaPluginApi*> cuda_plugin();

// Opens the plugin at `path` (not cached; for tests and diagnostics): the same
// checks as cuda_plugin(), errors naming the file.
Result<const CudaPluginApi*> load_cuda_plugin(const std::filesystem::path& path);

// The places searched, in order (for messages and `glassbox-cli info`).
std::vector<std::filesystem::path> cuda_plugin_candidates();

}  // namespace gb
