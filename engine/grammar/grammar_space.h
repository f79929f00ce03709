// GrammarSpace: the interned parse stacks and states of one Grammar, and the
// cached byte transitions between states -- a DFA over the grammar's pushdown
// configurations, built lazily as matchers and mask walks ask for it.
//
//   stack node   (position, parent): a persistent list. Node 0 is the empty
//                stack. A node's position is a Bytes or Rule element (never
//                End: a continuation that would start at End is its parent).
//   state        a sorted set of stacks whose tops are Bytes elements, or the
//                empty stack (the grammar has accepted). kDead = no stack.
//   next(s, b)   the state after byte b; computed once per (state, byte) and
//                stored by the byte's rank in the state's first-byte set.
// Expansion (a Rule top becomes the first element of each alternative over a
// continuation node) always ends because compile_gbnf refuses left recursion.
// Limits: kMaxStacks per state, kMaxNodes / kMaxStates / kMaxWork in all; past them the
// space fails (status()) and next() returns kDead from then on.
// Threads: one thread (not synchronized).
#pragma once

#include <bitset>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/result.h"
#include "grammar/grammar.h"

namespace gb {

class GrammarSpace {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;
  static constexpr uint32_t kEmptyStack = 0;
  static constexpr size_t kMaxStacks = 1024;
  static constexpr size_t kMaxNodes = 8u << 20;
  static constexpr size_t kMaxStates = 2u << 20;
  // Expansion steps over the space's life (every transition and frame built):
  // bounds the time an adversarial grammar can take, whatever its shape.
  static constexpr uint64_t kMaxWork = 16ull << 20;

  explicit GrammarSpace(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }
  const Status& status() const { return status_; }
  // Expansion steps taken so far (bounded by kMaxWork).
  uint64_t work() const { return work_; }

  uint32_t start_state() const { return start_; }
  // The state of stack node `node` expanded (its top may be a Rule element);
  // the empty stack's state is {empty} (accepting, no byte).
  uint32_t expanded_state(uint32_t node);
  // The interned node (pos, parent) (pos not an End element), and the state
  // holding that one stack (its top must be a Bytes element): frames of
  // token_masks.h are built from these.
  uint32_t stack_node(uint32_t pos, uint32_t parent) { return node(pos, parent); }
  uint32_t single_stack_state(uint32_t stack) { return intern_state({stack}); }

  uint32_t next(uint32_t state, uint8_t byte) {
    const State& s = states_[state];
    if (!s.first_bytes.test(byte)) return kDead;
    const uint32_t slot = rank(s.first_bytes, byte);
    const uint32_t cached = s.next[slot];
    return cached != kUnknown ? cached : compute_next(state, byte, slot);
  }

  std::span<const uint32_t> stacks(uint32_t state) const { return states_[state].stacks; }
  bool accepting(uint32_t state) const { return states_[state].accepting; }
  const std::bitset<256>& first_bytes(uint32_t state) const { return states_[state].first_bytes; }
  uint32_t top(uint32_t node) const { return nodes_[node].pos; }
  uint32_t parent(uint32_t node) const { return nodes_[node].parent; }
  size_t num_states() const { return states_.size(); }
  size_t num_nodes() const { return nodes_.size(); }

  // "rule 'string' (alternative 2, element 1)" for a grammar position.
  std::string describe_position(uint32_t pos);

 private:
  static constexpr uint32_t kUnknown = UINT32_MAX - 1;
  struct Node {
    uint32_t pos;
    uint32_t parent;
  };
  struct State {
    std::vector<uint32_t> stacks;  // sorted node ids
    bool accepting = false;
    std::bitset<256> first_bytes;  // bytes some stack's top accepts
    std::vector<uint32_t> next;    // (popcount(first_bytes)) cached next state or kUnknown
  };

  // Set bits of `set` below `byte` (the byte's slot in State::next). Inline
  // and without std::popcount: the engine is built for baseline x86-64, where
  // that is a call into libgcc.
  static uint32_t rank(const std::bitset<256>& set, uint8_t byte) {
    uint64_t words[4];  // std::bitset<256> is four 64-bit words in order (libstdc++)
    static_assert(sizeof(set) == sizeof(words), "std::bitset<256> is four 64-bit words");
    std::memcpy(words, &set, sizeof(words));
    const unsigned w = byte >> 6u;
    uint32_t r = 0;
    for (unsigned k = 0; k < w; ++k) r += count_bits(words[k]);
    const uint64_t below = (byte & 63u) == 0 ? 0 : words[w] & ((uint64_t{1} << (byte & 63u)) - 1);
    return r + count_bits(below);
  }
  static uint32_t count_bits(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return static_cast<uint32_t>((x * 0x0101010101010101ull) >> 56);
  }
  uint32_t compute_next(uint32_t state, uint8_t byte, uint32_t slot);
  uint32_t node(uint32_t pos, uint32_t parent);
  // Terminal stacks reached from the seeds in expand_work_, each "continue at
  // pos over parent" (pos may be End: return to parent); empties the list.
  void expand(std::vector<uint32_t>& out);
  uint32_t intern_state(std::vector<uint32_t> stacks);
  void fail(std::string message);

  std::shared_ptr<const Grammar> grammar_;
  Status status_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> state_ids_;
  std::vector<std::pair<uint32_t, uint32_t>> expand_work_;  // scratch
  std::unordered_set<uint64_t> expand_seen_;                // scratch
  std::vector<uint32_t> position_rule_;                     // built on first describe
  uint64_t work_ = 0;                                       // expansion steps so far (kMaxWork)
  uint32_t start_ = kDead;
};

}  // namespace gb
