// GBNF text -> compile_gbnf -> a matcher and token masks over a small fixed
// vocabulary. Errors are fine (they must carry a position inside the text);
// for a grammar that compiles, each mask along a short walk must equal the
// per-token check (TokenMasks::allows), and nothing may crash or hang (the
// grammar and matcher limits bound the work).
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_space.h"
#include "grammar/token_masks.h"

namespace {

std::shared_ptr<const gb::TokenTrie> fuzz_vocabulary() {
  static const std::shared_ptr<const gb::TokenTrie> trie = [] {
    std::vector<std::string> bytes = {"", "a", "b", "ab", "ba", "abc", " ", "  ", "\n", "\"", "{", "}", "[", "]", ":",
                                      ",", "0", "1", "12", "-", ".", "x", "xy", "root", "::=", "(", ")", "|", "*",
                                      "\xC3\xA9", "\xC3", "\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\x80", "\\",
                                      "true", "null", "\t", "#"};
    std::vector<gb::TokenClass> classes(bytes.size(), gb::TokenClass::Text);
    classes[0] = gb::TokenClass::EndOfGeneration;
    return std::make_shared<gb::TokenTrie>(bytes, classes);
  }();
  return trie;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gb::GbnfError error;
  auto grammar = gb::compile_gbnf(text, "root", &error);
  if (!grammar.ok()) {
    if (error.offset > text.size() || error.line < 1 || error.column < 1 || error.message.empty())
      gbfuzz::fuzz_fail("a GBNF error without a position inside the text: " + error.to_string());
    return 0;
  }
  auto space = std::make_shared<gb::GrammarSpace>(grammar.value());
  auto trie = fuzz_vocabulary();
  gb::TokenMasks masks(space, trie);
  gb::GrammarMatcher m(space);
  gb::TokenBitmask mask;
  for (int step = 0; step < 12 && space->status().ok(); ++step) {
    masks.compute(m, mask);
    if (!space->status().ok()) {
      // A limit of the space was hit while the mask was built: nothing may be allowed.
      for (gb::TokenId t = 0; t < trie->vocab_size(); ++t)
        if (gb::mask_allows(mask, t)) gbfuzz::fuzz_fail("a mask allows a token after its space failed");
      break;
    }
    std::vector<gb::TokenId> allowed;
    for (gb::TokenId t = 0; t < trie->vocab_size(); ++t) {
      const bool ok = masks.allows(m, t);
      if (!space->status().ok()) return 0;  // a limit hit by this check's own walk: every later check is dead
      if (ok != gb::mask_allows(mask, t))
        gbfuzz::fuzz_fail("mask and per-token check disagree on token " + std::to_string(t) + " at step " +
                          std::to_string(step));
      if (ok) allowed.push_back(t);
    }
    if (allowed.empty() || (allowed.size() == 1 && allowed[0] == 0)) break;
    const gb::TokenId pick = allowed[(static_cast<size_t>(step) * 7 + size) % allowed.size()];
    if (pick == 0) break;
    if (!masks.accept_token(m, pick)) gbfuzz::fuzz_fail("an allowed token was not accepted");
  }
  return 0;
}
