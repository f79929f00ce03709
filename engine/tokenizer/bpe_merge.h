// Priority-ordered BPE merging, the segmentation step shared by the llama2.c, the
// GGUF SentencePiece and the byte-level BPE tokenizers. Pure function of its
// inputs; any thread.
//
// Algorithm: start with one symbol per UTF-8 character of the (already
// normalized) text; while some adjacent pair may merge, merge the pair with the
// highest priority, the leftmost pair on ties. What "may merge" and "priority"
// mean is the ranker's business: SentencePiece (and llama2.c run.c, by brute
// force) ranks a pair by the score of the concatenated piece; GPT-2 style BPE
// ranks the *pair* by its line in the merges list (a string reachable only
// through an unlisted split must not merge, so ranking the result is not
// equivalent). A heap of candidate
// pairs plus a linked list of symbols makes this O(n log n) instead of run.c's
// O(n^2) rescans; stale heap entries (a side changed since the push) are skipped,
// so each step still merges argmax(score, -offset) over the current pairs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/piece_index.h"

namespace gb {

struct BpeSegment {
  uint32_t offset = 0;    // byte offset into the merged text
  uint32_t length = 0;    // bytes
  bool is_byte = false;   // one byte of a character that is not a piece (see bpe_merge)
};

struct BpeMergeResult {
  std::vector<BpeSegment> segments;  // (num_segments) in text order, covering the text
  // For every string produced by a merge: the byte length of its left part. Lets a
  // caller split a merged piece back into the two halves it came from (SentencePiece
  // does this for pieces of type "unused"). Keys view the input text.
  std::unordered_map<std::string_view, uint32_t> left_length;
};

// Priority of merging the adjacent symbols `left` and `right` (views into the
// text, `right` directly after `left`); nullopt when the pair may not merge.
using MergeRanker = std::function<std::optional<float>(std::string_view left, std::string_view right)>;

// The general form. `record_splits` fills BpeMergeResult::left_length (only
// SentencePiece's resegmentation of unused pieces needs it).
BpeMergeResult bpe_merge_ranked(std::string_view text, const MergeRanker& rank, bool record_splits = false);

// SentencePiece ranking: `mergeable` holds the pieces a merge may produce; `scores` is indexed by token id
// (empty means every score is 0, so merges go leftmost first).
//
// isolate_unknown_characters: run.c turns a character that is not a vocabulary
// piece into byte tokens before merging, and those never merge again; with this
// flag such a character becomes frozen one-byte segments (is_byte = true).
// SentencePiece instead lets it take part in merges and falls back to bytes only
// for what remains unmatched; for trained vocabularies the two agree.
BpeMergeResult bpe_merge(std::string_view text, const PieceIndex& mergeable, std::span<const float> scores,
                         bool isolate_unknown_characters = false);

}  // namespace gb
