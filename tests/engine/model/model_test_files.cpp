#include "model_test_files.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "gb_test.h"
#include "model/synthetic_model.h"

namespace gbtest {

gb::GgufWriter tiny_gguf_writer(const TinyGgufOptions& options) {
  using gb::GgufValue;
  constexpr uint64_t kDim = 8, kHidden = 16, kKv = 4, kVocab = 260;
  std::vector<std::pair<std::string, GgufValue>> md = {
      {"general.architecture", GgufValue::str("llama")},
      {"general.name", GgufValue::str("tiny")},
      {"llama.context_length", GgufValue::u32(32)},
      {"llama.embedding_length", GgufValue::u32(kDim)},
      {"llama.block_count", GgufValue::u32(1)},
      {"llama.feed_forward_length", GgufValue::u32(kHidden)},
      {"llama.attention.head_count", GgufValue::u32(2)},
      {"llama.attention.head_count_kv", GgufValue::u32(1)},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f)},
  };
  gb::Vocabulary v = gb::make_synthetic_vocabulary(kVocab);
  md.emplace_back("tokenizer.ggml.model", GgufValue::str("llama"));
  md.emplace_back("tokenizer.ggml.tokens", GgufValue::string_array(v.tokens));
  md.emplace_back("tokenizer.ggml.scores", GgufValue::f32_array(v.scores));
  md.emplace_back("tokenizer.ggml.token_type", GgufValue::i32_array(v.token_types));
  for (const auto& [key, value] : options.overrides) {
    // key_ref: clang 14 (the sanitizer builds) cannot capture a structured binding.
    const auto& key_ref = key;
    auto it = std::find_if(md.begin(), md.end(), [&](const auto& kv) { return kv.first == key_ref; });
    if (it != md.end()) it->second = value;
    else md.emplace_back(key, value);
  }
  gb::GgufWriter w;
  for (auto& [key, value] : md)
    if (std::find(options.removed_keys.begin(), options.removed_keys.end(), key) == options.removed_keys.end())
      w.add_metadata(key, value);

  uint64_t index = 0;
  auto tensor = [&](const std::string& name, uint64_t rows, uint64_t cols, uint32_t type = 0) {
    std::vector<uint64_t> dims = rows == 1 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows};
    const uint64_t seed = ++index;
    // F32 values i * 1e-3 + tensor index, so every tensor is distinguishable.
    w.add_tensor(name, dims, type, rows * cols * 4, [seed](std::span<std::byte> out) {
      auto* f = reinterpret_cast<float*>(out.data());
      for (size_t i = 0; i < out.size() / 4; ++i) f[i] = static_cast<float>(seed) + 1e-3f * static_cast<float>(i);
    });
  };
  tensor("token_embd.weight", kVocab, kDim);
  tensor("blk.0.attn_norm.weight", 1, kDim);
  tensor("blk.0.attn_q.weight", kDim, kDim, options.q_tensor_type);
  tensor("blk.0.attn_k.weight", kKv, kDim);
  tensor("blk.0.attn_v.weight", kKv, kDim);
  tensor("blk.0.attn_output.weight", kDim, kDim);
  tensor("blk.0.ffn_norm.weight", 1, kDim);
  tensor("blk.0.ffn_gate.weight", kHidden, kDim);
  tensor("blk.0.ffn_down.weight", kDim, kHidden);
  tensor("blk.0.ffn_up.weight", kHidden, kDim);
  tensor("output_norm.weight", 1, kDim);
  return w;
}

std::string write_tiny_gguf(const std::string& name, const TinyGgufOptions& options) {
  const std::string path = temp_dir() + "/" + name;
  gb::Status st = tiny_gguf_writer(options).write(path);
  GB_CHECK_MSG(st.ok(), st.ok() ? nullptr : st.error().message.c_str());
  return path;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string write_bytes(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

size_t find_bytes(const std::vector<uint8_t>& hay, const std::string& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](uint8_t a, char b) { return a == static_cast<uint8_t>(b); });
  return it == hay.end() ? std::string::npos : static_cast<size_t>(it - hay.begin());
}

}  // namespace gbtest
