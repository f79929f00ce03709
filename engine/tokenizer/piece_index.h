// PieceIndex: piece text -> token id, looked up with string_view keys without
// building a temporary std::string (C++20 heterogeneous lookup). Built once by a
// tokenizer at load and read-only afterwards; any thread may read it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/ids.h"

namespace gb {

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

}  // namespace gb
