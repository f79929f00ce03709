// TokenTrie and TokenMasks (see token_masks.h).
#include "grammar/token_masks.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <unordered_map>

#include "grammar/grammar_space.h"

namespace gb {

TokenTrie::TokenTrie(const std::vector<std::string>& bytes, std::vector<TokenClass> classes)
    : bytes_(bytes), classes_(std::move(classes)) {
  classes_.resize(bytes_.size(), TokenClass::Never);
  std::vector<TokenId> order;
  for (size_t t = 0; t < bytes_.size(); ++t) {
    if (classes_[t] == TokenClass::EndOfGeneration) eog_.push_back(static_cast<TokenId>(t));
    if (classes_[t] == TokenClass::Text && bytes_[t].empty()) classes_[t] = TokenClass::Never;
    if (classes_[t] == TokenClass::Text) order.push_back(static_cast<TokenId>(t));
  }
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
    const int c = bytes_[static_cast<size_t>(a)].compare(bytes_[static_cast<size_t>(b)]);
    return c < 0 || (c == 0 && a < b);
  });
  // Preorder construction over the sorted strings: keep the path to the
  // previous string; close (set subtree_end of) the nodes below the common prefix.
  byte_.push_back(0);
  depth_.push_back(0);
  subtree_end_.push_back(0);
  std::vector<uint32_t> path{0};  // path[d] = node at depth d
  std::vector<uint32_t> parent{0};
  std::vector<std::pair<uint32_t, TokenId>> ends;
  const std::string* prev = nullptr;
  for (TokenId t : order) {
    const std::string& s = bytes_[static_cast<size_t>(t)];
    size_t lcp = 0;
    if (prev) {
      const size_t n = std::min(prev->size(), s.size());
      while (lcp < n && (*prev)[lcp] == s[lcp]) ++lcp;
    }
    while (path.size() > lcp + 1) {
      subtree_end_[path.back()] = static_cast<uint32_t>(byte_.size());
      path.pop_back();
    }
    for (size_t k = lcp; k < s.size(); ++k) {
      parent.push_back(path.back());
      path.push_back(static_cast<uint32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[k]));
      depth_.push_back(static_cast<uint32_t>(k + 1));
      subtree_end_.push_back(0);
    }
    ends.emplace_back(path.back(), t);
    prev = &s;
  }
  while (!path.empty()) {
    subtree_end_[path.back()] = static_cast<uint32_t>(byte_.size());
    path.pop_back();
  }
  token_begin_.assign(byte_.size() + 1, 0);
  for (const auto& e : ends) ++token_begin_[e.first + 1];
  std::partial_sum(token_begin_.begin(), token_begin_.end(), token_begin_.begin());
  tokens_.resize(ends.size());
  std::vector<uint32_t> fill(token_begin_.begin(), token_begin_.end() - 1);
  for (const auto& e : ends) tokens_[fill[e.first]++] = e.second;
  // Children lists: nodes are made in preorder over sorted strings, so each
  // parent's children arrive in ascending byte order.
  child_begin_.assign(byte_.size() + 1, 0);
  for (size_t i = 1; i < byte_.size(); ++i) ++child_begin_[parent[i] + 1];
  std::partial_sum(child_begin_.begin(), child_begin_.end(), child_begin_.begin());
  children_.resize(byte_.size() > 0 ? byte_.size() - 1 : 0);
  std::vector<uint32_t> at(child_begin_.begin(), child_begin_.end() - 1);
  for (size_t i = 1; i < byte_.size(); ++i) children_[at[parent[i]]++] = static_cast<uint32_t>(i);
}

uint32_t TokenTrie::child(uint32_t i, uint8_t b) const {
  auto first = children_.begin() + child_begin_[i];
  auto last = children_.begin() + child_begin_[i + 1];
  auto it = std::lower_bound(first, last, b, [&](uint32_t node, uint8_t v) { return byte_[node] < v; });
  return it != last && byte_[*it] == b ? *it : 0;
}

// ---- TokenMasks ----

// A frame's result: tokens allowed whatever lies below the position (dense
// bitset when many, else a sorted list), and the trie nodes where the frame
// can end with bytes left (their subtrees are walked again from the context).
struct TokenMasks::Frame {
  TokenBitmask dense;
  std::vector<TokenId> sparse;
  std::vector<uint32_t> dependent_nodes;
};

struct TokenMasks::Impl {
  std::unordered_map<uint32_t, Frame> frames;          // by grammar position
  std::unordered_map<uint32_t, TokenBitmask> by_state; // whole masks, bounded
  // Context-dependent tokens of (position, context state): the dependent
  // walks' result, so a frame that can end almost anywhere (a run of optional
  // characters) costs its walks once per context, not once per mask. Bounded.
  std::unordered_map<uint64_t, std::vector<TokenId>> dependent;
  static constexpr size_t kMaxDependentEntries = 4096;
  std::vector<uint32_t> state_at_depth;                // walk scratch
  std::vector<TokenId> accepted;                       // walk scratch
  static constexpr size_t kMaxCachedStates = 64;
};

TokenMasks::TokenMasks(std::shared_ptr<GrammarSpace> space, std::shared_ptr<const TokenTrie> trie)
    : space_(std::move(space)), trie_(std::move(trie)), impl_(std::make_unique<Impl>()) {}

TokenMasks::~TokenMasks() = default;

namespace {

// Walks trie nodes [first, end) -- a whole subtree below a node at depth
// `base_depth` whose state is `start` -- calling on_token(id) for every token
// whose bytes reach a live state and on_open(node) for every node with
// children where the state is accepting (for a frame: where it can end).
template <class OnToken, class OnOpen>
void walk_trie(const TokenTrie& trie, GrammarSpace& space, uint32_t start, uint32_t base_depth, uint32_t first,
               uint32_t end, std::vector<uint32_t>& state_at_depth, OnToken&& on_token, OnOpen&& on_open) {
  if (state_at_depth.size() <= base_depth) state_at_depth.resize(base_depth + 1);
  state_at_depth[base_depth] = start;
  for (uint32_t i = first; i < end;) {
    const uint32_t d = trie.depth_[i];
    const uint32_t s = space.next(state_at_depth[d - 1], trie.byte_[i]);
    if (s == GrammarSpace::kDead) {
      i = trie.subtree_end_[i];
      continue;
    }
    if (state_at_depth.size() <= d) state_at_depth.resize(d + 1);
    state_at_depth[d] = s;
    for (uint32_t k = trie.token_begin_[i]; k < trie.token_begin_[i + 1]; ++k) on_token(trie.tokens_[k]);
    if (space.accepting(s) && trie.subtree_end_[i] > i + 1) on_open(i);
    ++i;
  }
}

void set_bit(TokenBitmask& mask, TokenId id) {
  mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (static_cast<unsigned>(id) & 63u);
}

}  // namespace

void TokenMasks::compute(const GrammarMatcher& matcher, TokenBitmask& mask) {
  const auto t0 = std::chrono::steady_clock::now();
  ++stats_.num_masks;
  const size_t num_words = (static_cast<size_t>(trie_->vocab_size()) + 63) / 64;
  mask.assign(num_words, 0);
  const uint32_t state = matcher.state();
  GrammarSpace& space = *space_;
  if (state == GrammarSpace::kDead) return;
  if (auto hit = impl_->by_state.find(state); hit != impl_->by_state.end()) {
    mask = hit->second;
    ++stats_.num_state_cache_hits;
  } else {
    const std::vector<uint32_t> stacks(space.stacks(state).begin(), space.stacks(state).end());
    for (uint32_t n : stacks) {
      if (n == GrammarSpace::kEmptyStack) continue;
      const uint32_t pos = space.top(n);
      const Frame& fr = frame(pos);
      if (!fr.dense.empty()) {
        for (size_t w = 0; w < num_words; ++w) mask[w] |= fr.dense[w];
      } else {
        for (TokenId t : fr.sparse) set_bit(mask, t);
      }
      if (fr.dependent_nodes.empty() || space.parent(n) == GrammarSpace::kEmptyStack) continue;
      // The frame ended with bytes left: those bytes continue from the stack below.
      const uint32_t context = space.expanded_state(space.parent(n));
      if (context == GrammarSpace::kDead) continue;
      const uint64_t key = (uint64_t{pos} << 32) | context;
      auto dep = impl_->dependent.find(key);
      if (dep == impl_->dependent.end()) {
        std::vector<TokenId> found;
        const auto on_token = [&](TokenId t) { found.push_back(t); };
        // A context that starts with few bytes (a comma, a quote, a newline)
        // looks up those children only; a wide one walks every child.
        const std::bitset<256> first = space.first_bytes(context);  // a copy: walks add states
        std::vector<uint8_t> first_list;
        if (first.count() <= 8)
          for (unsigned b = 0; b < 256; ++b)
            if (first.test(b)) first_list.push_back(static_cast<uint8_t>(b));
        for (uint32_t node : fr.dependent_nodes) {
          ++stats_.num_dependent_walks;
          if (first.count() > 8) {
            walk_trie(*trie_, space, context, trie_->depth_[node], node + 1, trie_->subtree_end_[node],
                      impl_->state_at_depth, on_token, [](uint32_t) {});
            continue;
          }
          for (uint8_t b : first_list) {
            const uint32_t c = trie_->child(node, b);
            if (c == 0) continue;
            const uint32_t s = space.next(context, b);
            if (s == GrammarSpace::kDead) continue;
            for (uint32_t k = trie_->token_begin_[c]; k < trie_->token_begin_[c + 1]; ++k) on_token(trie_->tokens_[k]);
            walk_trie(*trie_, space, s, trie_->depth_[c], c + 1, trie_->subtree_end_[c], impl_->state_at_depth,
                      on_token, [](uint32_t) {});
          }
        }
        if (impl_->dependent.size() >= Impl::kMaxDependentEntries) impl_->dependent.clear();
        dep = impl_->dependent.emplace(key, std::move(found)).first;
      }
      for (TokenId t : dep->second) set_bit(mask, t);
    }
    if (space.accepting(state))
      for (TokenId t : trie_->end_of_generation_ids()) set_bit(mask, t);
    if (impl_->by_state.size() >= Impl::kMaxCachedStates) impl_->by_state.clear();
    impl_->by_state.emplace(state, mask);
  }
  stats_.total_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

const TokenMasks::Frame& TokenMasks::frame(uint32_t pos) {
  auto it = impl_->frames.find(pos);
  if (it != impl_->frames.end()) return it->second;
  ++stats_.num_frames_computed;
  Frame f;
  GrammarSpace& space = *space_;
  const uint32_t start = space.frame_state(pos);
  impl_->accepted.clear();
  if (start != GrammarSpace::kDead)
    walk_trie(*trie_, space, start, 0, 1, static_cast<uint32_t>(trie_->num_nodes()), impl_->state_at_depth,
              [&](TokenId t) { impl_->accepted.push_back(t); },
              [&](uint32_t node) { f.dependent_nodes.push_back(node); });
  const size_t vocab = static_cast<size_t>(trie_->vocab_size());
  if (impl_->accepted.size() * 32 >= vocab) {
    f.dense.assign((vocab + 63) / 64, 0);
    for (TokenId t : impl_->accepted) set_bit(f.dense, t);
  } else {
    f.sparse = impl_->accepted;
    std::sort(f.sparse.begin(), f.sparse.end());
  }
  return impl_->frames.emplace(pos, std::move(f)).first->second;
}

bool TokenMasks::allows(const GrammarMatcher& matcher, TokenId id) const {
  GrammarMatcher probe = matcher;
  return accept_token(probe, id);
}

bool TokenMasks::accept_token(GrammarMatcher& matcher, TokenId id) const {
  if (id < 0 || id >= trie_->vocab_size()) return false;
  switch (trie_->token_class(id)) {
    case TokenClass::Never: return false;
    case TokenClass::EndOfGeneration: return matcher.is_accepting();
    case TokenClass::Text: return matcher.accept_bytes(trie_->token_bytes(id));
  }
  return false;
}

}  // namespace gb
