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
#include "grammar/grammar_space.h"
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
  // GLASSBOX_BENCH_FORMAT: run only the format of that name (profiling).
  if (const char* only = std::getenv("GLASSBOX_BENCH_FORMAT"); only && std::string(only) != name) return;
  auto compiled = compile_format(format, trie);
  if (!compiled) {
    std::printf("%-12s compile failed: %s\n", name, compiled.error().message.c_str());
    return;
  }
  std::mt19937 rng(11);
  double first_ms = 0, total_ms = 0, max_ms = 0, steady_ms = 0;
  int num_masks = 0, num_first = 0;
  for (int run = 0; run < 8; ++run) {
    GrammarConstraint g(*compiled);
    for (int step = 0; step < 200; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto mask = g.mask();
      const double ms = bench_ms_since(t0);
      if (run == 0) {
        first_ms += ms;
        ++num_first;
      } else {
        steady_ms += ms;
      }
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
  std::printf("%-10s %5d masks: mean %6.1f us (first run %6.1f us over %d masks, later runs %5.1f us), max %.2f ms; "
              "%llu frame walks, %llu dependent walks, %llu state-cache hits, %llu expansion steps (limit %llu)\n",
              name, num_masks, 1000 * total_ms / num_masks, 1000 * first_ms / std::max(1, num_first), num_first,
              1000 * steady_ms / std::max(1, num_masks - num_first), max_ms,
              static_cast<unsigned long long>(st.num_frames_computed),
              static_cast<unsigned long long>(st.num_dependent_walks),
              static_cast<unsigned long long>(st.num_state_cache_hits),
              static_cast<unsigned long long>((*compiled)->space->work()),
              static_cast<unsigned long long>(GrammarSpace::kMaxWork));
}


// The schemas of tests/app/grammar_gemma_test.py, compact.
const char* const kBenchSchemas[][2] = {
    {"person", R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":24},"age":{"type":"integer","minimum":0,"maximum":120},"role":{"enum":["admin","user","guest"]},"email":{"type":"string","pattern":"^[a-z]{1,10}@[a-z]{1,10}\\.com$"}},"required":["name","age","role"],"additionalProperties":false})"},
    {"order", R"({"type":"object","properties":{"id":{"type":"integer","exclusiveMinimum":0,"maximum":99999},"items":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","properties":{"sku":{"type":"string","maxLength":12},"qty":{"type":"integer","minimum":1,"maximum":9},"price":{"type":"number","minimum":0,"maximum":1000}},"required":["sku","qty"],"additionalProperties":false}},"paid":{"type":"boolean"}},"required":["id","items","paid"],"additionalProperties":false})"},
    {"shape", R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number","minimum":0,"maximum":10}},"required":["kind","r"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"integer","minimum":1,"maximum":9},"h":{"type":"integer","minimum":1,"maximum":9}},"required":["kind","w","h"],"additionalProperties":false}]})"},
};

void bench_vocabulary(const std::string& path);

}  // namespace

// GLASSBOX_BENCH_GGUF: colon-separated GGUF paths whose vocabularies to use
// (default: Gemma 3 270M from the fixture cache, then tiny-llama3's 128,256
// Llama-3 tokens from the shared models).
GB_TEST(grammar_masks_bench) {
  std::string paths = std::getenv("GLASSBOX_BENCH_GGUF") ? std::getenv("GLASSBOX_BENCH_GGUF") : "";
  if (paths.empty())
    paths = std::string(std::getenv("HOME") ? std::getenv("HOME") : "") +
            "/.cache/glassbox/models/gemma-3-270m-q4_k_m.gguf:" + gbtest::shared_dir() + "/models/tiny-llama3/tiny-llama3-F16.gguf";
  size_t start = 0;
  while (start <= paths.size()) {
    const size_t end = std::min(paths.find(':', start), paths.size());
    bench_vocabulary(paths.substr(start, end - start));
    start = end + 1;
  }
}

namespace {

void bench_vocabulary(const std::string& path) {
  auto vocab = read_gguf_vocabulary(path);
  if (!vocab) {
    std::printf("%s: no vocabulary (%s)\n", path.c_str(), vocab.error().message.c_str());
    return;
  }
  auto tok = create_gguf_tokenizer(std::move(*vocab), path);
  if (!tok) return;
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
  for (const auto& [name, schema] : kBenchSchemas) bench_format(trie, name, {FormatKind::JsonSchema, schema});
  bench_format(trie, "json_object", {FormatKind::Json, ""});
}

}  // namespace
