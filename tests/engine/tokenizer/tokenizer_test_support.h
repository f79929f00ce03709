// Helpers shared by the tokenizer tests: loading the shared tokenizers and golden
// files, and printing id lists in failure messages. Test-only; single thread.
#pragma once

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/ids.h"
#include "model/gguf_vocabulary.h"
#include "tokenizer/gguf_spm_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace gbtest {

// SentencePiece's space marker, U+2581, as text.
inline const std::string kSp = "\xE2\x96\x81";

inline std::string ids_text(std::span<const gb::TokenId> ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "]";
}

// Escapes control and non-ASCII bytes so a failure message shows what differed.
inline std::string visible(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string s;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F && b != '\\') s.push_back(c);
    else s += std::string("\\x") + hex[b >> 4] + hex[b & 15];
  }
  return s;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline std::vector<gb::TokenId> json_ids(const nlohmann::json& array) {
  return array.get<std::vector<gb::TokenId>>();
}

// The GGUF-embedded vocabulary of `path` as a tokenizer; null (with `error`) on failure.
inline std::shared_ptr<const gb::Tokenizer> gguf_tokenizer(const std::string& path, std::string& error) {
  auto vocab = gb::read_gguf_vocabulary(path);
  if (!vocab.ok()) {
    error = vocab.error().message;
    return nullptr;
  }
  auto tok = gb::create_gguf_tokenizer(std::move(vocab).value(), path);
  if (!tok.ok()) {
    error = tok.error().message;
    return nullptr;
  }
  return std::move(tok).value();
}

inline std::shared_ptr<const gb::Tokenizer> file_tokenizer(const std::string& path, std::string& error) {
  auto tok = gb::load_tokenizer_file(path);
  if (!tok.ok()) {
    error = tok.error().message;
    return nullptr;
  }
  return std::move(tok).value();
}

}  // namespace gbtest
