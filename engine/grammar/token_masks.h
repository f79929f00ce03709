// Token masks: which vocabulary tokens may come next in a GrammarMatcher's state.
//
//   TokenTrie    the vocabulary's token byte strings as a trie laid out in depth-
//                first preorder: node i's subtree is [i, subtree_end[i]), so a
//                walk skips a dead subtree in one jump. Built once per vocabulary.
//   TokenMasks   the mask of a state, for one GrammarSpace and one TokenTrie.
//
// How a mask is computed (after XGrammar's split into context-independent and
// context-dependent tokens, written afresh): a state is a set of stacks, the
// mask is the union over its stacks. For a stack whose top is grammar position
// p, the trie is walked once from the stack [p] alone (its "frame"); a token
// consumed entirely inside the frame is allowed whatever lies below p, one that
// the frame rejects is refused, and the tokens below a trie node where the frame
// can end are context-dependent: they are walked again, at mask time, from the
// rest of the real stack. The frame's result is cached per position, so the full
// vocabulary is walked once per grammar position, and a mask costs the union of
// cached bitsets plus the few context-dependent subtrees (JSON: tokens that
// close a string, such as `",`). Whole masks are also cached per state.
//
// Token classes: Text tokens follow the grammar; end-of-generation tokens are
// allowed exactly when the grammar accepts; Never tokens (other control tokens,
// and any token with no bytes) never are.
// Threads: one thread at a time (a TokenMasks is used on the engine thread);
// TokenTrie is immutable and shared.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/ids.h"
#include "grammar/grammar_matcher.h"

namespace gb {

enum class TokenClass : uint8_t { Text, EndOfGeneration, Never };

class TokenTrie {
 public:
  // bytes[t]: token t's bytes as they appear in decoded text; classes[t] its class.
  TokenTrie(std::vector<std::string> bytes, std::vector<TokenClass> classes);

  int32_t vocab_size() const { return static_cast<int32_t>(classes_.size()); }
  size_t num_nodes() const { return byte_.size(); }
  TokenClass token_class(TokenId id) const { return classes_[static_cast<size_t>(id)]; }
  const std::string& token_bytes(TokenId id) const { return bytes_[static_cast<size_t>(id)]; }
  std::span<const TokenId> end_of_generation_ids() const { return eog_; }

  // Node layout (preorder; node 0 is the root, the empty string):
  std::vector<uint8_t> byte_;         // (num_nodes) the byte on the edge into the node
  std::vector<uint32_t> depth_;       // (num_nodes) bytes from the root
  std::vector<uint32_t> subtree_end_; // (num_nodes) one past the last node below
  std::vector<uint32_t> token_begin_; // (num_nodes + 1) tokens ending at node i: tokens_[token_begin_[i] .. token_begin_[i+1])
  std::vector<TokenId> tokens_;       // Text tokens grouped by their end node
  std::vector<uint32_t> child_begin_; // (num_nodes + 1) node i's children: children_[child_begin_[i] .. child_begin_[i+1])
  std::vector<uint32_t> children_;    // child node ids, by ascending byte under each parent

  // Node i's child on byte b, or 0 (the root is nobody's child).
  uint32_t child(uint32_t i, uint8_t b) const;
  // Every edge (parent, child) grouped by the child's byte, parents ascending:
  // edges on byte b are [edge_begin_[b], edge_begin_[b + 1]). A context that
  // must start with '"' looks only at the edges on '"'.
  std::vector<uint32_t> edge_begin_;   // (257)
  std::vector<uint32_t> edge_parent_;  // (num_nodes - 1)
  std::vector<uint32_t> edge_child_;   // (num_nodes - 1)

 private:
  std::vector<std::string> bytes_;
  std::vector<TokenClass> classes_;
  std::vector<TokenId> eog_;
};

// A vocabulary-sized bitset: bit t of word t / 64 set = token t allowed.
using TokenBitmask = std::vector<uint64_t>;
inline bool mask_allows(std::span<const uint64_t> mask, TokenId id) {
  return (mask[static_cast<size_t>(id) >> 6] >> (static_cast<unsigned>(id) & 63u)) & 1u;
}

struct TokenMaskStats {
  uint64_t num_masks = 0;              // compute() calls
  uint64_t num_state_cache_hits = 0;   // whole mask found in the per-state cache
  uint64_t num_frames_computed = 0;    // full-vocabulary walks (one per grammar position)
  uint64_t num_dependent_walks = 0;    // context-dependent subtree walks
  double total_us = 0.0;               // time in compute()
};

class TokenMasks {
 public:
  TokenMasks(std::shared_ptr<GrammarSpace> space, std::shared_ptr<const TokenTrie> trie);
  ~TokenMasks();

  // The mask of `matcher`'s state into `mask` (resized to ceil(vocab / 64) words).
  void compute(const GrammarMatcher& matcher, TokenBitmask& mask);
  // Whether one token may follow (a walk of its bytes; no mask).
  bool allows(const GrammarMatcher& matcher, TokenId id) const;
  // Advances `matcher` over token `id`; false (matcher unchanged) if not allowed.
  // End-of-generation tokens are accepted iff the matcher accepts and do not move it.
  bool accept_token(GrammarMatcher& matcher, TokenId id) const;

  const TokenTrie& trie() const { return *trie_; }
  const TokenMaskStats& stats() const { return stats_; }

 private:
 public:
  // A frame's identity: the top `depth` grammar positions of a stack, top first.
  static constexpr uint32_t kMaxFrameDepth = 4;
  struct FrameKey {
    std::array<uint32_t, kMaxFrameDepth> positions{};
    uint32_t depth = 0;
    bool operator==(const FrameKey&) const = default;
  };

 private:
  struct Frame;
  struct Impl;
  const Frame& frame(const FrameKey& key);  // the cached walk of a frame
  std::vector<TokenId> dependent_tokens(const Frame& frame, uint32_t context);
  std::shared_ptr<GrammarSpace> space_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unique_ptr<Impl> impl_;
  TokenMaskStats stats_;
};

}  // namespace gb
