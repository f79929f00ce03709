// GrammarSpace (grammar_space.h) and GrammarMatcher (grammar_matcher.h).
#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_set>

#include "grammar/grammar_space.h"

namespace gb {

GrammarSpace::GrammarSpace(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  nodes_.push_back({0, 0});  // node 0: the empty stack
  std::vector<uint32_t> stacks;
  const GrammarRule& root = grammar_->rules[grammar_->root];
  expand_work_.clear();
  for (auto it = root.alternatives.rbegin(); it != root.alternatives.rend(); ++it)
    expand_work_.emplace_back(*it, kEmptyStack);
  expand(stacks);
  start_ = status_.ok() ? intern_state(std::move(stacks)) : kDead;
}

void GrammarSpace::fail(std::string message) {
  if (status_.ok()) status_ = make_error("grammar: " + std::move(message));
}

uint32_t GrammarSpace::node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= kMaxNodes) fail("more than " + std::to_string(kMaxNodes) + " parse-stack nodes");
    nodes_.push_back({pos, parent});
  }
  return it->second;
}

// Depth-first over (position, continuation) pairs with an explicit work list,
// so a long run of returns through empty-matching rules cannot overflow the
// C++ stack. The seeds are expand_work_'s pairs; each pair is expanded once
// per call, however many seeds reach it (one seen set for all of them keeps
// a transition linear in the pairs it reaches: a nullable repetition of many
// copies reaches the same continuations from every copy).
void GrammarSpace::expand(std::vector<uint32_t>& out) {
  const std::vector<GrammarElement>& el = grammar_->elements;
  expand_seen_.clear();
  while (!expand_work_.empty()) {
    auto [p, par] = expand_work_.back();
    expand_work_.pop_back();
    const uint64_t key = (uint64_t{p} << 32) | par;
    if (!expand_seen_.insert(key).second) continue;
    if (++work_ > kMaxWork) {
      fail("building its states took more than " + std::to_string(kMaxWork) +
           " expansion steps (the grammar is too ambiguous)");
      expand_work_.clear();
      return;
    }
    const GrammarElement& e = el[p];
    if (e.kind == GrammarElement::Kind::End) {
      if (par == kEmptyStack) {
        out.push_back(kEmptyStack);
      } else {
        expand_work_.emplace_back(nodes_[par].pos, nodes_[par].parent);
      }
    } else if (e.kind == GrammarElement::Kind::Bytes) {
      out.push_back(node(p, par));
    } else {
      // Return continuation: skip a node whose position would be End.
      const uint32_t ret = el[p + 1].kind == GrammarElement::Kind::End ? par : node(p + 1, par);
      const std::vector<uint32_t>& alts = grammar_->rules[e.value].alternatives;
      for (auto it = alts.rbegin(); it != alts.rend(); ++it) expand_work_.emplace_back(*it, ret);
    }
    if (expand_seen_.size() > 64 * kMaxStacks) {
      fail("a state expands to too many parse stacks (the grammar is too ambiguous)");
      expand_work_.clear();
      return;
    }
  }
}

uint32_t GrammarSpace::intern_state(std::vector<uint32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty()) return kDead;
  if (stacks.size() > kMaxStacks) {
    fail("a state has more than " + std::to_string(kMaxStacks) + " parse stacks (the grammar is too ambiguous)");
    return kDead;
  }
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(uint32_t));
  auto [it, inserted] = state_ids_.try_emplace(std::move(key), static_cast<uint32_t>(states_.size()));
  if (!inserted) return it->second;
  if (states_.size() >= kMaxStates) {
    fail("more than " + std::to_string(kMaxStates) + " grammar states");
    return kDead;
  }
  State s;
  for (uint32_t n : stacks) {
    if (n == kEmptyStack) {
      s.accepting = true;
      continue;
    }
    s.first_bytes |= grammar_->byte_sets[grammar_->elements[nodes_[n].pos].value];
  }
  s.next.assign(s.first_bytes.count(), kUnknown);
  s.stacks = std::move(stacks);
  states_.push_back(std::move(s));
  return it->second;
}

uint32_t GrammarSpace::compute_next(uint32_t state, uint8_t byte, uint32_t slot) {
  if (!status_.ok()) return kDead;
  std::vector<uint32_t> out;
  const std::vector<GrammarElement>& el = grammar_->elements;
  // Seeds first (states_ may grow while interning the result).
  expand_work_.clear();
  const std::vector<uint32_t>& stacks = states_[state].stacks;
  for (auto it = stacks.rbegin(); it != stacks.rend(); ++it) {
    if (*it == kEmptyStack) continue;
    const Node nd = nodes_[*it];
    if (grammar_->byte_sets[el[nd.pos].value].test(byte)) expand_work_.emplace_back(nd.pos + 1, nd.parent);
  }
  expand(out);
  const uint32_t result = status_.ok() ? intern_state(std::move(out)) : kDead;
  states_[state].next[slot] = result;
  return result;
}

uint32_t GrammarSpace::expanded_state(uint32_t n) {
  if (n == kEmptyStack) return intern_state({kEmptyStack});
  std::vector<uint32_t> out;
  expand_work_.assign(1, {nodes_[n].pos, nodes_[n].parent});
  expand(out);
  return status_.ok() ? intern_state(std::move(out)) : kDead;
}

std::string GrammarSpace::describe_position(uint32_t pos) {
  const Grammar& g = *grammar_;
  if (position_rule_.empty()) {
    position_rule_.assign(g.elements.size(), 0);
    for (uint32_t r = 0; r < g.rules.size(); ++r)
      for (uint32_t p : g.rules[r].alternatives)
        for (; p < g.elements.size(); ++p) {
          position_rule_[p] = r;
          if (g.elements[p].kind == GrammarElement::Kind::End) break;
        }
  }
  const uint32_t r = position_rule_[pos];
  const std::vector<uint32_t>& alts = g.rules[r].alternatives;
  const auto a = static_cast<size_t>(std::upper_bound(alts.begin(), alts.end(), pos) - alts.begin()) - 1;
  return "rule '" + g.rules[r].name + "' (alternative " + std::to_string(a + 1) + ", element " +
         std::to_string(pos - alts[a] + 1) + ")";
}

// ---- GrammarMatcher ----

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : GrammarMatcher(std::make_shared<GrammarSpace>(std::move(grammar))) {}

GrammarMatcher::GrammarMatcher(std::shared_ptr<GrammarSpace> space)
    : space_(std::move(space)), state_(space_->start_state()) {}

const Grammar& GrammarMatcher::grammar() const { return space_->grammar(); }
const Status& GrammarMatcher::status() const { return space_->status(); }

bool GrammarMatcher::accept_byte(uint8_t byte) {
  if (state_ == GrammarSpace::kDead) return false;
  const uint32_t n = space_->next(state_, byte);
  if (n == GrammarSpace::kDead) return false;
  state_ = n;
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  uint32_t s = state_;
  if (s == GrammarSpace::kDead) return false;
  for (char c : bytes) {
    s = space_->next(s, static_cast<uint8_t>(c));
    if (s == GrammarSpace::kDead) return false;
  }
  state_ = s;
  return true;
}

bool GrammarMatcher::is_accepting() const {
  return state_ != GrammarSpace::kDead && space_->accepting(state_);
}

bool GrammarMatcher::can_continue() const {
  return state_ != GrammarSpace::kDead && space_->first_bytes(state_).any();
}

std::string GrammarMatcher::describe(size_t max_stacks) const {
  if (state_ == GrammarSpace::kDead) return "no state (" + (status().ok() ? std::string("rejected") : status().error().message) + ")";
  std::string out;
  size_t shown = 0;
  const auto stacks = space_->stacks(state_);
  for (uint32_t n : stacks) {
    if (shown == max_stacks) {
      out += "; +" + std::to_string(stacks.size() - shown) + " more";
      break;
    }
    if (!out.empty()) out += "; ";
    out += n == GrammarSpace::kEmptyStack ? std::string("complete") : space_->describe_position(space_->top(n));
    ++shown;
  }
  return out;
}

}  // namespace gb
