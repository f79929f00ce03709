// GrammarMatcher: where a generation stands in a Grammar, advanced one byte (or
// one token's bytes) at a time.
//
// The state is a set of parse stacks (llama.cpp's idea, written afresh): each
// stack lists the grammar positions still to match, the top always a Bytes
// element (or the stack is empty: the grammar has accepted). Stacks are
// interned persistent lists and stack sets are interned too, so a state is one
// integer and the transitions (state, byte) -> state are computed once and
// cached: a lazily built DFA over the grammar's pushdown states (GrammarSpace).
// Matchers that share a GrammarSpace share that cache (one per grammar per
// engine, all on one thread); copying a matcher is copying an integer.
//
// Invariants: a matcher never enters the dead state: accept_* returns false and
// leaves the state unchanged when the bytes are rejected. is_accepting() means
// the bytes so far form a complete sentence (end of generation is allowed);
// can_continue() means at least one more byte is possible.
// Limits: a state of more than kMaxStacks stacks, or more than kMaxNodes
// interned stack nodes, fails the matcher (status() says which; accept_* then
// returns false): an ambiguous grammar can never hang a step.
// Threads: a GrammarSpace and its matchers belong to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "grammar/grammar.h"

namespace gb {

class GrammarSpace;

class GrammarMatcher {
 public:
  // A fresh matcher at the start of `grammar`, with a space of its own.
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);
  // A fresh matcher at the start, sharing `space` (and its cached transitions).
  explicit GrammarMatcher(std::shared_ptr<GrammarSpace> space);

  bool accept_byte(uint8_t byte);
  bool accept_bytes(std::string_view bytes);  // all or nothing

  bool is_accepting() const;
  bool can_continue() const;
  const Status& status() const;

  // "rule 'string', byte 2 of alternative 1" for the top of each stack (at most
  // `max_stacks`), for the token inspector.
  std::string describe(size_t max_stacks = 3) const;

  uint32_t state() const { return state_; }
  void set_state(uint32_t state) { state_ = state; }
  const std::shared_ptr<GrammarSpace>& space() const { return space_; }
  const Grammar& grammar() const;

 private:
  std::shared_ptr<GrammarSpace> space_;
  uint32_t state_ = 0;
};

}  // namespace gb
