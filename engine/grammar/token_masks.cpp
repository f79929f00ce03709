// TokenTrie and TokenMasks (see token_masks.h).
#include "grammar/token_masks.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <unordered_map>

#include "grammar/grammar_space.h"

namespace gb {

TokenTrie::TokenTrie(std::vector<std::string> bytes, std::vector<TokenClass> classes)
    : bytes_(std::move(bytes)), classes_(std::move(classes)) {
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
  // Edges by byte (nodes in preorder, so each byte's parents come ascending).
  edge_begin_.assign(257, 0);
  for (size_t i = 1; i < byte_.size(); ++i) ++edge_begin_[byte_[i] + 1u];
  std::partial_sum(edge_begin_.begin(), edge_begin_.end(), edge_begin_.begin());
  edge_parent_.resize(children_.size());
  edge_child_.resize(children_.size());
  std::vector<uint32_t> slot(edge_begin_.begin(), edge_begin_.end() - 1);
  for (size_t i = 1; i < byte_.size(); ++i) {
    const uint32_t k = slot[byte_[i]]++;
    edge_parent_[k] = parent[i];
    edge_child_[k] = static_cast<uint32_t>(i);
  }
}

uint32_t TokenTrie::child(uint32_t i, uint8_t b) const {
  auto first = children_.begin() + child_begin_[i];
  auto last = children_.begin() + child_begin_[i + 1];
  auto it = std::lower_bound(first, last, b, [&](uint32_t node, uint8_t v) { return byte_[node] < v; });
  return it != last && byte_[*it] == b ? *it : 0;
}

// ---- TokenMasks ----

// A frame: the walk of the whole vocabulary from the top `depth` positions of
// a stack, over nothing. Tokens consumed inside it are allowed whatever lies
// below (dense bitset when many, else a sorted list); trie nodes where the
// frame can end with bytes left are "dependent": their subtrees are walked
// again from the real context (ascending; also as a bitset over trie nodes
// when there are many).
struct TokenMasks::Frame {
  uint32_t id = 0;
  TokenBitmask dense;
  std::vector<TokenId> sparse;
  std::vector<uint32_t> dependent_nodes;
  std::vector<uint64_t> dependent_bits;
  bool is_dependent(uint32_t node) const {
    if (!dependent_bits.empty()) return (dependent_bits[node >> 6] >> (node & 63u)) & 1u;
    return std::binary_search(dependent_nodes.begin(), dependent_nodes.end(), node);
  }
};

// (Not in an anonymous namespace: Impl, a member type, holds a map using it.)
struct TokenMasksFrameKeyHash {
  size_t operator()(const TokenMasks::FrameKey& k) const {
    uint64_t h = 0x9E3779B97F4A7C15ull * (k.depth + 1);
    for (uint32_t p : k.positions) h = (h ^ p) * 0x100000001B3ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

struct TokenMasks::Impl {
  std::unordered_map<FrameKey, uint32_t, TokenMasksFrameKeyHash> frame_ids;
  std::vector<std::unique_ptr<Frame>> frames;         // by id (stable addresses)
  std::unordered_map<uint32_t, TokenBitmask> by_state; // whole masks, bounded
  // Context-dependent tokens of (frame, context state), so a frame that can
  // end almost anywhere costs its walks once per context, not once per mask.
  std::unordered_map<uint64_t, std::vector<TokenId>> dependent;
  std::vector<uint32_t> state_at_depth;  // walk scratch
  std::vector<TokenId> accepted;         // walk scratch
  static constexpr size_t kMaxCachedStates = 64;
  static constexpr size_t kMaxDependentEntries = 4096;
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
      // The frame: the top position, deepened while it can end into a context
      // that would take many bytes (a string's `char` rule ends after one
      // character; one level down, its loop covers the whole string).
      FrameKey key;
      uint32_t below = n;
      const Frame* fr = nullptr;
      uint32_t context = GrammarSpace::kDead;
      for (;;) {
        key.positions[key.depth++] = space.top(below);
        fr = &frame(key);
        below = space.parent(below);
        context = GrammarSpace::kDead;
        if (fr->dependent_nodes.empty() || below == GrammarSpace::kEmptyStack) break;
        context = space.expanded_state(below);
        if (context == GrammarSpace::kDead || key.depth == kMaxFrameDepth || space.first_bytes(context).count() <= 8)
          break;
      }
      if (!fr->dense.empty()) {
        for (size_t w = 0; w < num_words; ++w) mask[w] |= fr->dense[w];
      } else {
        for (TokenId t : fr->sparse) set_bit(mask, t);
      }
      if (context == GrammarSpace::kDead) continue;
      // The frame ended with bytes left: those bytes continue from the context.
      const uint64_t dep_key = (uint64_t{fr->id} << 32) | context;
      auto dep = impl_->dependent.find(dep_key);
      if (dep == impl_->dependent.end()) {
        std::vector<TokenId> found = dependent_tokens(*fr, context);
        if (impl_->dependent.size() >= Impl::kMaxDependentEntries) impl_->dependent.clear();
        dep = impl_->dependent.emplace(dep_key, std::move(found)).first;
      }
      for (TokenId t : dep->second) set_bit(mask, t);
    }
    if (space.accepting(state))
      for (TokenId t : trie_->end_of_generation_ids()) set_bit(mask, t);
    if (!space.status().ok()) {
      // The walks hit a limit of the space (a too ambiguous grammar): from now
      // on every transition is dead, so no token can be accepted -- the mask
      // says so too (part of it was built before the failure), and is not cached.
      mask.assign(num_words, 0);
    } else {
      if (impl_->by_state.size() >= Impl::kMaxCachedStates) impl_->by_state.clear();
      impl_->by_state.emplace(state, mask);
    }
  }
  stats_.total_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// The tokens below the frame's dependent nodes that the context accepts. A
// context that starts with few bytes (a quote, a comma, a newline) looks only
// at the trie edges on those bytes; a wide one walks each dependent subtree.
std::vector<TokenId> TokenMasks::dependent_tokens(const Frame& fr, uint32_t context) {
  GrammarSpace& space = *space_;
  std::vector<TokenId> found;
  const auto on_token = [&](TokenId t) { found.push_back(t); };
  const std::bitset<256> first = space.first_bytes(context);  // a copy: walks add states
  if (first.count() > 8) {
    for (uint32_t node : fr.dependent_nodes) {
      ++stats_.num_dependent_walks;
      walk_trie(*trie_, space, context, trie_->depth_[node], node + 1, trie_->subtree_end_[node], impl_->state_at_depth,
                on_token, [](uint32_t) {});
    }
    return found;
  }
  for (unsigned b = 0; b < 256; ++b) {
    if (!first.test(b)) continue;
    const uint32_t s = space.next(context, static_cast<uint8_t>(b));
    if (s == GrammarSpace::kDead) continue;
    for (uint32_t e = trie_->edge_begin_[b]; e < trie_->edge_begin_[b + 1]; ++e) {
      if (!fr.is_dependent(trie_->edge_parent_[e])) continue;
      ++stats_.num_dependent_walks;
      const uint32_t c = trie_->edge_child_[e];
      for (uint32_t k = trie_->token_begin_[c]; k < trie_->token_begin_[c + 1]; ++k) on_token(trie_->tokens_[k]);
      walk_trie(*trie_, space, s, trie_->depth_[c], c + 1, trie_->subtree_end_[c], impl_->state_at_depth, on_token,
                [](uint32_t) {});
    }
  }
  return found;
}

const TokenMasks::Frame& TokenMasks::frame(const FrameKey& key) {
  auto it = impl_->frame_ids.find(key);
  if (it != impl_->frame_ids.end()) return *impl_->frames[it->second];
  ++stats_.num_frames_computed;
  auto f = std::make_unique<Frame>();
  f->id = static_cast<uint32_t>(impl_->frames.size());
  GrammarSpace& space = *space_;
  // The stack [positions[depth-1], ..., positions[0]] over the empty stack.
  uint32_t node = GrammarSpace::kEmptyStack;
  for (uint32_t i = key.depth; i-- > 0;) node = space.stack_node(key.positions[i], node);
  const uint32_t start = space.single_stack_state(node);
  impl_->accepted.clear();
  if (start != GrammarSpace::kDead)
    walk_trie(*trie_, space, start, 0, 1, static_cast<uint32_t>(trie_->num_nodes()), impl_->state_at_depth,
              [&](TokenId t) { impl_->accepted.push_back(t); },
              [&](uint32_t n) { f->dependent_nodes.push_back(n); });
  if (f->dependent_nodes.size() * 32 >= trie_->num_nodes()) {
    f->dependent_bits.assign((trie_->num_nodes() + 63) / 64, 0);
    for (uint32_t n : f->dependent_nodes) f->dependent_bits[n >> 6] |= uint64_t{1} << (n & 63u);
  }
  const size_t vocab = static_cast<size_t>(trie_->vocab_size());
  if (impl_->accepted.size() * 32 >= vocab) {
    f->dense.assign((vocab + 63) / 64, 0);
    for (TokenId t : impl_->accepted) set_bit(f->dense, t);
  } else {
    f->sparse = impl_->accepted;
    std::sort(f->sparse.begin(), f->sparse.end());
  }
  impl_->frame_ids.emplace(key, f->id);
  impl_->frames.push_back(std::move(f));
  return *impl_->frames.back();
}

bool TokenMasks::allows(const GrammarMatcher& matcher, TokenId id) const {
  GrammarMatcher probe = matcher;
  return accept_token(probe, id);
}

bool TokenMasks::accept_token(GrammarMatcher& matcher, TokenId id) const {
  // A space that hit a limit accepts nothing more (as its masks allow nothing),
  // even along transitions it had built before the failure.
  if (id < 0 || id >= trie_->vocab_size() || !space_->status().ok()) return false;
  switch (trie_->token_class(id)) {
    case TokenClass::Never: return false;
    case TokenClass::EndOfGeneration: return matcher.is_accepting();
    case TokenClass::Text: return matcher.accept_bytes(trie_->token_bytes(id));
  }
  return false;
}

}  // namespace gb
