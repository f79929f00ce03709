// The CUDA plugin loader (see cuda_plugin.h).
#include "backend/cuda_plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string_view>
#include <system_error>
#include <utility>

#include "backend/batch_layout.h"
#include "model/model.h"

// The CUDA libraries the plugin links, by soname, in load order (cuBLAS needs
// cuBLASLt), and the build tree's plugin folder: set by CMake when this build
// has the CUDA backend (engine/backend/CMakeLists.txt).
#ifndef GLASSBOX_CUDA_LIBRARIES
#define GLASSBOX_CUDA_LIBRARIES ""
#endif
#ifndef GLASSBOX_CUDA_PLUGIN_BUILD_DIR
#define GLASSBOX_CUDA_PLUGIN_BUILD_DIR ""
#endif
#ifndef GLASSBOX_BUILD_TREE_DIR
#define GLASSBOX_BUILD_TREE_DIR ""
#endif

namespace gb {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_colons(std::string_view text) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    const size_t colon = text.find(':');
    if (colon != 0) parts.emplace_back(text.substr(0, colon));
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
  }
  return parts;
}

std::string last_dl_error() {
  const char* e = dlerror();
  return e ? std::string(e) : std::string("unknown error");
}

// The folders NVIDIA's installers use for the CUDA libraries.
std::vector<fs::path> cuda_library_dirs() {
  std::vector<fs::path> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* v = std::getenv(var); v && *v) roots.emplace_back(v);
  }
  roots.emplace_back("/usr/local/cuda");
  std::vector<fs::path> dirs;
  for (const fs::path& root : roots) {
    dirs.push_back(root / "lib64");
    dirs.push_back(root / "lib");
  }
  return dirs;
}

// Makes each CUDA library loadable before the plugin is opened: by soname if
// the dynamic linker finds it, else from the CUDA folders. A library loaded by
// path satisfies the plugin's DT_NEEDED entry of the same soname. The handles
// stay open for the life of the process.
Status preload_cuda_libraries() {
  for (const std::string& soname : split_colons(GLASSBOX_CUDA_LIBRARIES)) {
    if (dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL)) continue;
    std::string tried = "the dynamic linker's path";
    bool loaded = false;
    for (const fs::path& dir : cuda_library_dirs()) {
      const fs::path file = dir / soname;
      std::error_code ec;
      if (!fs::exists(file, ec)) continue;
      if (dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
        loaded = true;
        break;
      }
      tried += ", " + file.string() + " (" + last_dl_error() + ")";
    }
    if (!loaded) {
      return make_error("the CUDA library " + soname + " was not found (looked in " + tried +
                        ", $CUDA_HOME/lib64 and /usr/local/cuda/lib64): install NVIDIA's CUDA runtime and cuBLAS");
    }
  }
  return {};
}

fs::path running_program_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

struct LoadedPlugin {
  Result<const CudaPluginApi*> result = make_error("not loaded");
};

}  // namespace

std::string cuda_plugin_build_id() {
  std::string id = "glassbox " GLASSBOX_VERSION;
#if defined(__VERSION__)
  id += " compiler " __VERSION__;
#endif
  // The types whose layout both sides use: a change of any size means another build.
  for (const size_t size : {sizeof(Model), sizeof(ModelConfig), sizeof(BatchLayout), sizeof(Status),
                            sizeof(Result<std::unique_ptr<Backend>>), sizeof(std::string), sizeof(std::shared_ptr<Model>)}) {
    id += ' ';  // appended piecewise: GCC 12 at -O3 reports a false -Wrestrict for " " + ...
    id += std::to_string(size);
  }
  return id;
}

std::vector<fs::path> cuda_plugin_candidates() {
  if (const char* forced = std::getenv("GLASSBOX_CUDA_PLUGIN"); forced && *forced) return {fs::path(forced)};
  std::vector<fs::path> places;
  if (const fs::path dir = running_program_dir(); !dir.empty()) {
    places.push_back((dir / ".." / "lib" / "glassbox" / kCudaPluginFileName).lexically_normal());
  }
  // The build tree's plugin only for a program run from that build tree: an
  // installed copy never picks up a plugin from where it was built.
  const std::string_view build_tree = GLASSBOX_BUILD_TREE_DIR;
  const std::string_view build_dir = GLASSBOX_CUDA_PLUGIN_BUILD_DIR;
  const std::string program = running_program_dir().string();
  if (!build_dir.empty() && !build_tree.empty() && program.rfind(build_tree, 0) == 0 &&
      (program.size() == build_tree.size() || program[build_tree.size()] == '/')) {
    places.push_back(fs::path(build_dir) / kCudaPluginFileName);
  }
  return places;
}

Result<const CudaPluginApi*> load_cuda_plugin(const fs::path& path) {
  const std::string where = "the CUDA plugin " + path.string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return make_error(where + " does not exist");
  if (Status libs = preload_cuda_libraries(); !libs) return make_error(where + ": " + libs.error().message);
  // RTLD_LOCAL: its copies of the engine's code stay its own (it also hides them, see its CMakeLists.txt).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return make_error(where + " could not be opened: " + last_dl_error());
  using Entry = const CudaPluginApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaPluginEntry));
  if (!entry) {
    dlclose(handle);
    return make_error(where + " is not a Glassbox CUDA plugin (no " + std::string(kCudaPluginEntry) + ")");
  }
  const CudaPluginApi* api = entry();
  const bool same_build = api && api->build_id && cuda_plugin_build_id() == api->build_id;
  if (!api || api->abi != kCudaPluginAbi || !same_build) {
    const std::string theirs = api && api->build_id ? std::string(api->build_id) : std::string("none");
    // Left open: its code may have run (static constructors); closing it buys nothing.
    return make_error(where + " was built by another build of Glassbox (plugin: \"" + theirs + "\", ABI " +
                      std::to_string(api ? api->abi : 0) + "; this program: \"" + cuda_plugin_build_id() + "\", ABI " +
                      std::to_string(kCudaPluginAbi) + "): install the glassbox-cuda package of the same version");
  }
  if (!api->device_available || !api->weights_supported || !api->make_backend) {
    return make_error(where + " has an incomplete function table");
  }
  return api;
}

Result<const CudaPluginApi*> cuda_plugin() {
  static std::once_flag once;
  static LoadedPlugin loaded;
  std::call_once(once, [] {
    if (const char* forced = std::getenv("GLASSBOX_CUDA_PLUGIN"); forced && *forced) {
      loaded.result = load_cuda_plugin(forced);  // that file or nothing
      return;
    }
    std::string looked;
    for (const fs::path& place : cuda_plugin_candidates()) {
      std::error_code ec;
      if (fs::exists(place, ec)) {
        loaded.result = load_cuda_plugin(place);
        return;
      }
      looked += (looked.empty() ? "" : ", ") + place.string();
    }
    loaded.result = make_error("the CUDA backend is not installed (no " + std::string(kCudaPluginFileName) +
                               (looked.empty() ? std::string() : " at " + looked) +
                               "; on Debian: install the glassbox-cuda package)");
  });
  return loaded.result;
}

}  // namespace gb
