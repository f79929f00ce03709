// Benchmark (not a test): grammar-mask cost on a real vocabulary. Loads only
// the vocabulary of a GGUF (GLASSBOX_BENCH_GGUF, default: Gemma 3 270M from
// the fixture cache), builds the token trie, compiles a format and walks
// random paths through it, timing each mask: the first visit of a grammar
// position (a full-vocabulary frame walk) and the steady state (cached frames).
//   build/test/tests/engine/runtime/glassbox_tests_engine_runtime grammar_masks_bench
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "gb_test.h"
#include "grammar/token_masks.h"
#include "model/gguf_vocabulary.h"
#include "runtime/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

using namespace gb;

namespace {

double bench_ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void bench_format(const std::shared_ptr<const TokenTrie>& trie, const char* name, const FormatSettings& format) {
  auto compiled = compile_format(format, trie);
  if (!compiled) {
    std::printf("%-12s compile failed: %s\n", name, compiled.error().message.c_str());
    return;
  }
  std::mt19937 rng(11);
  double first_ms = 0, total_ms = 0, max_ms = 0;
  int num_masks = 0;
  for (int run = 0; run < 8; ++run) {
    GrammarConstraint g(*compiled);
    for (int step = 0; step < 200; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto mask = g.mask();
      const double ms = bench_ms_since(t0);
      if (run == 0) first_ms += ms;
      total_ms += ms;
      max_ms = std::max(max_ms, ms);
      ++num_masks;
      std::vector<TokenId> allowed;
      for (size_t w = 0; w < mask.size(); ++w)
        for (uint64_t b = mask[w]; b; b &= b - 1) allowed.push_back(static_cast<TokenId>(w * 64 + std::countr_zero(b)));
      if (allowed.empty()) break;
      const TokenId t = allowed[rng() % allowed.size()];
      if (trie->token_class(t) == TokenClass::EndOfGeneration) break;
      g.accept(t);
    }
  }
  const TokenMaskStats& st = (*compiled)->masks->stats();
  std::printf("%-12s %5d masks: mean %.3f ms, first run %.1f ms in all, max %.2f ms; %llu frame walks, "
              "%llu dependent walks, %llu state-cache hits\n",
              name, num_masks, total_ms / num_masks, first_ms, max_ms,
              static_cast<unsigned long long>(st.num_frames_computed),
              static_cast<unsigned long long>(st.num_dependent_walks),
              static_cast<unsigned long long>(st.num_state_cache_hits));
}

}  // namespace

GB_TEST(grammar_masks_bench) {
  std::string path = std::getenv("GLASSBOX_BENCH_GGUF") ? std::getenv("GLASSBOX_BENCH_GGUF") : "";
  if (path.empty()) path = std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/glassbox/models/gemma-3-270m-q4_k_m.gguf";
  auto vocab = read_gguf_vocabulary(path);
  if (!vocab) QSKIP("no vocabulary (set GLASSBOX_BENCH_GGUF)");
  auto tok = create_gguf_tokenizer(std::move(*vocab), path);
  QVERIFY(tok.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto trie = make_token_trie(**tok);
  std::printf("%s: vocabulary %d, trie %zu nodes, built in %.1f ms\n", path.c_str(), trie->vocab_size(),
              trie->num_nodes(), bench_ms_since(t0));
  bench_format(trie, "list", {FormatKind::Gbnf, "root ::= \"Items:\" ( \"\\n- \" item ){2,4} \"\\n\"\nitem ::= [a-z ]{1,20}\n"});
  bench_format(trie, "json-ish", {FormatKind::Gbnf, R"(root ::= object
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n]{0,20}
)"});
}
