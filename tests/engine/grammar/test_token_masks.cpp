// TokenTrie and TokenMasks: the mask of every state along random generations
// equals the per-token check (walk each token's bytes through a copy of the
// matcher), over random vocabularies with multi-byte characters, byte
// fragments, duplicates, end-of-generation and control tokens; plus the
// trie's layout invariants.
#include <random>
#include <string>
#include <vector>

#include "gb_test.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_space.h"
#include "grammar/token_masks.h"

using namespace gb;

namespace {

const char* const kJsonish = R"(root ::= ws ( object | array ) ws
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member ::= string ws ":" ws value
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,4} )?
ws ::= [ \n]{0,3}
)";

struct Vocab {
  std::vector<std::string> bytes;
  std::vector<TokenClass> classes;
};

Vocab random_vocab(std::mt19937& rng, int size) {
  const std::vector<std::string> atoms = {"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "x",
                                          "0", "1", "9", "-", ".", "\\", "n", "true", "null", "\xC3\xA9",
                                          "\xCE\xB2", "\xF0\x9F\x98\x80", "\xC3", "\xA9", "\x80", "\t", "t", "r", "u", "e", "l", "f", "s"};
  Vocab v;
  v.bytes.push_back("");
  v.classes.push_back(TokenClass::EndOfGeneration);  // 0: EOS
  v.bytes.push_back("");
  v.classes.push_back(TokenClass::Never);  // 1: BOS
  v.bytes.push_back("{\"");
  v.classes.push_back(TokenClass::Never);  // 2: a control token that happens to have text
  while (static_cast<int>(v.bytes.size()) < size) {
    std::string t;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) t += atoms[rng() % atoms.size()];
    v.bytes.push_back(t);
    v.classes.push_back(TokenClass::Text);
  }
  v.bytes.push_back("\"");  // a duplicate of some atom, certainly
  v.classes.push_back(TokenClass::Text);
  for (const std::string& a : atoms) {  // every atom is a token: no dead ends from a missing byte
    v.bytes.push_back(a);
    v.classes.push_back(TokenClass::Text);
  }
  return v;
}

}  // namespace

GB_TEST(token_trie_layout) {
  std::mt19937 rng(7);
  Vocab v = random_vocab(rng, 300);
  TokenTrie trie(v.bytes, v.classes);
  QCOMPARE(trie.vocab_size(), static_cast<int32_t>(v.bytes.size()));
  // Every Text token ends at exactly one node whose root path spells its bytes.
  std::vector<int> seen(v.bytes.size(), 0);
  std::vector<std::string> path;
  for (uint32_t i = 0; i < trie.num_nodes(); ++i) {
    const uint32_t d = trie.depth_[i];
    path.resize(d + 1);
    if (i > 0) path[d] = path[d - 1] + static_cast<char>(trie.byte_[i]);
    QVERIFY(trie.subtree_end_[i] > i && trie.subtree_end_[i] <= trie.num_nodes());
    for (uint32_t j = i + 1; j < trie.subtree_end_[i]; ++j) QVERIFY(trie.depth_[j] > d);
    for (uint32_t k = trie.token_begin_[i]; k < trie.token_begin_[i + 1]; ++k) {
      const TokenId t = trie.tokens_[k];
      QCOMPARE(path[d], v.bytes[static_cast<size_t>(t)]);
      ++seen[static_cast<size_t>(t)];
    }
  }
  for (size_t t = 0; t < v.bytes.size(); ++t) QCOMPARE(seen[t], v.classes[t] == TokenClass::Text ? 1 : 0);
  QCOMPARE(static_cast<int>(trie.end_of_generation_ids().size()), 1);
}

GB_TEST(token_masks_equal_per_token_checks) {
  auto grammar = compile_gbnf(kJsonish);
  QVERIFY(grammar.ok());
  std::mt19937 rng(99);
  int num_steps = 0, num_finished = 0, num_forced = 0;
  for (int trial = 0; trial < 12; ++trial) {
    Vocab v = random_vocab(rng, 200 + 150 * trial);
    auto trie = std::make_shared<TokenTrie>(v.bytes, v.classes);
    auto space = std::make_shared<GrammarSpace>(*grammar);
    TokenMasks masks(space, trie);
    GrammarMatcher m(space);
    TokenBitmask mask;
    for (int step = 0; step < 80; ++step) {
      masks.compute(m, mask);
      std::vector<TokenId> allowed;
      for (TokenId t = 0; t < trie->vocab_size(); ++t) {
        GrammarMatcher probe = m;
        bool ok;
        switch (v.classes[static_cast<size_t>(t)]) {
          case TokenClass::Never: ok = false; break;
          case TokenClass::EndOfGeneration: ok = m.is_accepting(); break;
          default: ok = probe.accept_bytes(v.bytes[static_cast<size_t>(t)]);
        }
        if (ok != mask_allows(mask, t))
          qFatal("trial %d step %d token %d '%s': mask says %d, per-token check %d", trial, step, t,
                 v.bytes[static_cast<size_t>(t)].c_str(), static_cast<int>(mask_allows(mask, t)), static_cast<int>(ok));
        QCOMPARE(masks.allows(m, t), ok);
        if (ok) allowed.push_back(t);
      }
      ++num_steps;
      if (allowed.empty()) qFatal("trial %d step %d: no token allowed in state %s", trial, step, m.describe().c_str());  // every atom is a token, so the grammar never dead-ends here
      num_forced += allowed.size() == 1;
      // Prefer not to end early: pick EOS only when nothing else is allowed or by chance.
      TokenId next = allowed[rng() % allowed.size()];
      if (next == 0 && allowed.size() > 1 && rng() % 20 != 0) next = allowed[1 + rng() % (allowed.size() - 1)];
      if (next == 0) {
        ++num_finished;
        break;
      }
      QVERIFY(masks.accept_token(m, next));
    }
  }
  qInfo("%d steps, %d generations ended, %d forced", num_steps, num_finished, num_forced);
  QVERIFY(num_steps > 300);
  QVERIFY(num_finished > 0);  // some generations reached the end of the grammar
}

// A grammar ambiguous enough that building the first mask hits a limit of the
// space (found by fuzz_gbnf's exploration): the space reports why, the mask
// allows nothing (the part built before the failure is dropped, as every
// transition after it is dead), and every per-token check agrees.
GB_TEST(token_masks_of_a_failed_space_allow_nothing) {
  auto grammar = compile_gbnf(R"(root ::= ( "br" | [b]* ){489})");
  QVERIFY(grammar.ok());
  const std::vector<std::string> bytes = {"", "a", "b", "ab", "ba", "bb", "br", "r"};
  std::vector<TokenClass> classes(bytes.size(), TokenClass::Text);
  classes[0] = TokenClass::EndOfGeneration;
  auto trie = std::make_shared<TokenTrie>(bytes, classes);
  auto space = std::make_shared<GrammarSpace>(*grammar);
  TokenMasks masks(space, trie);
  GrammarMatcher m(space);
  TokenBitmask mask;
  masks.compute(m, mask);
  QVERIFY(!space->status().ok());
  QVERIFY2(space->status().error().message.find("ambiguous") != std::string::npos ||
               space->status().error().message.find("more than") != std::string::npos,
           space->status().error().message.c_str());
  for (TokenId t = 0; t < trie->vocab_size(); ++t) {
    QVERIFY(!mask_allows(mask, t));
    QVERIFY(!masks.allows(m, t));
  }
  // The same grammar with a small count stays within the limits and allows "b".
  auto small = compile_gbnf(R"(root ::= ( "br" | [b]* ){5})");
  QVERIFY(small.ok());
  auto small_space = std::make_shared<GrammarSpace>(*small);
  TokenMasks small_masks(small_space, trie);
  GrammarMatcher sm(small_space);
  small_masks.compute(sm, mask);
  QVERIFY(small_space->status().ok());
  QVERIFY(mask_allows(mask, 2) && small_masks.allows(sm, 2));
}
