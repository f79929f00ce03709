// bpe_merge (see bpe_merge.h).
#include "tokenizer/bpe_merge.h"

#include <queue>

#include "core/check.h"
#include "core/utf8.h"

namespace gb {
namespace {

// One symbol of the doubly linked list; a merged-away symbol has length 0.
struct Symbol {
  int32_t prev = -1;
  int32_t next = -1;
  uint32_t offset = 0;
  uint32_t length = 0;
  bool frozen = false;  // a byte of an unknown character (isolate_unknown_characters)
};

// A candidate merge of symbols[left] and its right neighbour, valid only while
// both still have the lengths recorded here.
struct Candidate {
  float score = 0.0f;
  int32_t left = 0;
  int32_t right = 0;
  uint32_t left_length = 0;
  uint32_t right_length = 0;
};

// Heap order: the top is the highest score, then the smallest left index. Symbol
// indices increase with text offset and a merge keeps the left index, so the
// smallest index is the leftmost pair.
struct CandidateLess {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

namespace {

// The merge loop. `frozen_character(c)` marks a character that must stay as
// one-byte frozen segments (run.c's handling of unknown characters); may be null.
BpeMergeResult merge_core(std::string_view text, const MergeRanker& rank, bool record_splits,
                          const std::function<bool(std::string_view)>* frozen_character) {
  BpeMergeResult result;
  if (text.empty()) return result;
  GB_CHECK(text.size() < UINT32_MAX);

  // Initial symbols: one per UTF-8 character; an invalid or truncated run is one
  // symbol (no vocabulary piece can contain it, so it will fall back to bytes).
  std::vector<Symbol> symbols;  // (num_characters), more with isolated bytes
  symbols.reserve(text.size());
  auto add_symbol = [&](size_t pos, size_t n, bool frozen) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, index + 1, static_cast<uint32_t>(pos), static_cast<uint32_t>(n), frozen});
  };
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = utf8_next(text, pos).num_bytes;
    if (frozen_character != nullptr && (*frozen_character)(text.substr(pos, n))) {
      for (size_t k = 0; k < n; ++k) add_symbol(pos + k, 1, true);
    } else {
      add_symbol(pos, n, false);
    }
    pos += n;
  }
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateLess> heap;
  auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& a = symbols[static_cast<size_t>(left)];
    const Symbol& b = symbols[static_cast<size_t>(right)];
    if (a.frozen || b.frozen) return;
    const std::optional<float> priority = rank(text.substr(a.offset, a.length), text.substr(b.offset, b.length));
    if (!priority) return;
    heap.push({*priority, left, right, a.length, b.length});
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) try_pair(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));

  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& a = symbols[static_cast<size_t>(top.left)];
    Symbol& b = symbols[static_cast<size_t>(top.right)];
    // Stale: one side was merged into something else since this pair was pushed.
    if (a.length != top.left_length || b.length != top.right_length || a.next != top.right) continue;
    if (record_splits) result.left_length.emplace(text.substr(a.offset, a.length + b.length), a.length);
    a.length += b.length;
    a.next = b.next;
    if (b.next >= 0) symbols[static_cast<size_t>(b.next)].prev = top.left;
    b.length = 0;
    b.prev = b.next = -1;
    try_pair(a.prev, top.left);
    try_pair(top.left, a.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    result.segments.push_back({s.offset, s.length, s.frozen});
  }
  return result;
}

}  // namespace

BpeMergeResult bpe_merge_ranked(std::string_view text, const MergeRanker& rank, bool record_splits) {
  return merge_core(text, rank, record_splits, nullptr);
}

BpeMergeResult bpe_merge(std::string_view text, const PieceIndex& mergeable, std::span<const float> scores,
                         bool isolate_unknown_characters) {
  // A pair may merge when its concatenation (contiguous in `text`) is a piece;
  // its priority is that piece's score.
  const MergeRanker by_score = [&](std::string_view left, std::string_view right) -> std::optional<float> {
    const TokenId id = find_piece(mergeable, std::string_view(left.data(), left.size() + right.size()));
    if (id < 0) return std::nullopt;
    return scores.empty() ? 0.0f : scores[static_cast<size_t>(id)];
  };
  const std::function<bool(std::string_view)> unknown = [&](std::string_view c) { return find_piece(mergeable, c) < 0; };
  return merge_core(text, by_score, /*record_splits=*/true, isolate_unknown_characters ? &unknown : nullptr);
}

}  // namespace gb
