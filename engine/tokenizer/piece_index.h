// PieceIndex: piece text -> token id, looked up with string_view keys without
// building a temporary std::string (C++20 heterogeneous lookup), and the parser
// of byte-token pieces. Built once by a tokenizer at load and read-only
// afterwards; any thread may read it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/ids.h"

namespace gb {

// SentencePiece's word-boundary mark, U+2581 LOWER ONE EIGHTH BLOCK.
inline constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

using PieceIndex = std::unordered_map<std::string, TokenId, PieceHash, std::equal_to<>>;

// Id of `piece`, or -1.
inline TokenId find_piece(const PieceIndex& index, std::string_view piece) {
  const auto it = index.find(piece);
  return it == index.end() ? TokenId{-1} : it->second;
}

// "<0xAB>" -> 0xAB (either hex case, as run.c's sscanf accepts); -1 for any other
// text. Byte-fallback tokens are spelled this way in every format we read.
inline int parse_byte_piece(std::string_view piece) {
  auto hex_digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  const int hi = hex_digit(piece[3]);
  const int lo = hex_digit(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

}  // namespace gb
