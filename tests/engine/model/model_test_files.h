// Helpers for model tests: a tiny valid llama GGUF built with GgufWriter (so
// tests can override metadata or damage bytes), and raw byte file helpers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf_value.h"
#include "model/gguf_writer.h"

namespace gbtest {

// Tiny llama: dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 260, ctx 32,
// F32, tied. `overrides` replace (or add) metadata keys; `removed_keys` drops keys.
struct TinyGgufOptions {
  std::vector<std::pair<std::string, gb::GgufValue>> overrides;
  std::vector<std::string> removed_keys;
  uint32_t q_tensor_type = 0;  // ggml type code of blk.0.attn_q.weight
};
gb::GgufWriter tiny_gguf_writer(const TinyGgufOptions& options = {});
// Writes the tiny model to temp_dir()/name and returns the path.
std::string write_tiny_gguf(const std::string& name, const TinyGgufOptions& options = {});

std::vector<uint8_t> read_bytes(const std::string& path);
std::string write_bytes(const std::string& name, const std::vector<uint8_t>& bytes);  // in temp_dir()
size_t find_bytes(const std::vector<uint8_t>& hay, const std::string& needle);          // npos if absent
template <class T>
void poke(std::vector<uint8_t>& bytes, size_t offset, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) bytes.at(offset + i) = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
}

}  // namespace gbtest
