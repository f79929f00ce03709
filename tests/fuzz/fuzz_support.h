// Shared helpers for the libFuzzer harnesses (tests/fuzz, docs/testing.md).
//
// - InputFile: the fuzz input written to a file, for entry points that take a
//   path (the app opens models, tokenizers and sessions by path).
// - HeapPeak: the most heap bytes live at once while it is armed (ASan's malloc
//   and free hooks), so a harness can assert that a forged header never makes
//   Glassbox allocate far more than the file holds.
// - shared_dir(): ../shared (models, test data), from GLASSBOX_SHARED_DIR or the
//   folder configured at build time.
// - fuzz_fail(): prints a message and aborts, so libFuzzer saves the input.
// Threads: the harnesses run single-threaded.
#pragma once

#include <sanitizer/allocator_interface.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace gbfuzz {

[[noreturn]] inline void fuzz_fail(const std::string& message) {
  std::fprintf(stderr, "FUZZ CHECK FAILED: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string shared_dir() {
  if (const char* env = std::getenv("GLASSBOX_SHARED_DIR"); env != nullptr && *env != '\0') return env;
  return GLASSBOX_SHARED_DIR_DEFAULT;
}

// One file per process (in $TMPDIR or /tmp), rewritten for every input and
// removed at exit. `name` sets the extension the entry point looks at.
class InputFile {
 public:
  explicit InputFile(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    dir_ = std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
           ("glassbox-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / name).string();
  }
  ~InputFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& write(const uint8_t* data, size_t size) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) fuzz_fail("cannot write the fuzz input to " + path_);
    return path_;
  }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

// Peak live heap bytes between arm() and peak(): every malloc and free of the
// process goes through ASan's hooks (up to five hook pairs may be installed;
// libFuzzer's -malloc_limit_mb uses one more).
class HeapPeak {
 public:
  static void arm() {
    install();
    live_.store(0);
    peak_.store(0);
    armed_.store(true);
  }
  static int64_t peak() {
    armed_.store(false);
    return peak_.load();
  }

 private:
  static void on_malloc(const volatile void*, size_t size) {
    if (!armed_.load(std::memory_order_relaxed)) return;
    const int64_t now = live_.fetch_add(static_cast<int64_t>(size)) + static_cast<int64_t>(size);
    int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
  }
  static void on_free(const volatile void* p) {
    if (!armed_.load(std::memory_order_relaxed) || p == nullptr) return;
    // Blocks allocated before arm() also count down: peak is relative to arm().
    live_.fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<const void*>(p))));
  }
  static void install() {
    static const bool installed = [] {
      return __sanitizer_install_malloc_and_free_hooks(&HeapPeak::on_malloc, &HeapPeak::on_free) != 0;
    }();
    if (!installed) fuzz_fail("cannot install the sanitizer malloc hooks");
  }
  static inline std::atomic<bool> armed_{false};
  static inline std::atomic<int64_t> live_{0};
  static inline std::atomic<int64_t> peak_{0};
};

// The memory rule of issue 16: loading a file never needs more heap than a
// small multiple of its size (in-memory forms of metadata and vocabularies are
// larger than their packed bytes; a converted norm is F32) plus a fixed margin.
// A forged count or length that the parser trusted would blow far past this.
inline constexpr int64_t kHeapPerFileByte = 32;
inline constexpr int64_t kHeapMarginBytes = 16ll << 20;

inline void check_heap_bound(int64_t peak, size_t file_bytes, std::string_view what) {
  const int64_t bound = static_cast<int64_t>(file_bytes) * kHeapPerFileByte + kHeapMarginBytes;
  if (peak > bound)
    fuzz_fail(std::string(what) + " of a " + std::to_string(file_bytes) + "-byte file had " + std::to_string(peak) +
              " heap bytes live at once (bound " + std::to_string(bound) + ")");
}

}  // namespace gbfuzz
