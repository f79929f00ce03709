// Sha256: the SHA-256 hash of FIPS 180-4 (section 6.2), written from the standard
// for model fingerprints (trace headers, chat templates; the machine has no libssl). Streaming:
// update() any number of times, then finish() once.
//
// Invariants: buffer_ holds fewer than 64 bytes between calls; num_bytes_ counts
// every byte passed to update(). A finished hasher must be reset() before reuse.
// Threads: a value type; one instance per thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gb {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;
  // Auto: the processor's SHA instructions (SHA-NI: Intel since Goldmont and Ice
  // Lake, AMD since Zen) when it has them, else the portable rounds. Scalar:
  // always the portable rounds (tests compare the two).
  enum class Impl { Auto, Scalar };
  // True when this processor has SHA-NI (cpuid leaf 7 EBX bit 29, with SSE4.1).
  static bool hardware_available();

  explicit Sha256(Impl impl = Impl::Auto) : use_hardware_(impl == Impl::Auto && hardware_available()) { reset(); }
  void reset();
  void update(std::span<const std::byte> bytes);
  void update(std::string_view text) { update(std::as_bytes(std::span(text.data(), text.size()))); }
  Digest finish();

  // Lowercase hex, 64 characters.
  static std::string hex(const Digest& digest);

 private:
  void compress(const uint8_t* blocks, size_t num_blocks);  // 64-byte blocks into state_

  std::array<uint32_t, 8> state_{};  // H0..H7
  std::array<uint8_t, 64> buffer_{}; // (num_buffered_) bytes of a partial block
  size_t num_buffered_ = 0;
  uint64_t num_bytes_ = 0;
  bool finished_ = false;
  bool use_hardware_ = false;
};

// SHA-256 of a string, lowercase hex.
std::string sha256_hex(std::string_view text);

// SHA-256 of a whole file, read in 1 MiB pieces; errors name the file. The
// portable rounds ran at about 270 MB/s on Zen 4; with SHA-NI a 439 MB file was
// hashed, with the model load, in under 0.5 s.
Result<std::string> sha256_file_hex(const std::string& path);

}  // namespace gb
