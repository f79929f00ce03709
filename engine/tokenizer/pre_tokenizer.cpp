// PreTokenizer (see pre_tokenizer.h): the table of regex lists per
// tokenizer.ggml.pre name, and splitting with PCRE2.
//
// The regexes are the split patterns of the upstream tokenizer.json files (GPT-2,
// Llama 3, Qwen2, Tekken ...) and the lists llama.cpp uses for the older
// vocabularies (DeepSeek, Falcon, StarCoder, the default); they are data, written
// here in PCRE2 syntax. PCRE2 understands the original patterns directly
// (\p{Lu}, (?i:...), look-ahead), so no hand-adapted forms are needed.
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "core/check.h"

namespace gb {
namespace {

constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o; gpt-oss's o200k_harmony): the Split regex of openai/gpt-oss's
// tokenizer.json, which is tiktoken's o200k_base pat_str (tiktoken_ext/openai_public.py)
// and the "original regex from tokenizer.json" llama.cpp's llama-vocab.cpp quotes for
// LLAMA_VOCAB_PRE_TYPE_GPT4O. Against kTekken: a contraction suffix after either
// letter run, and digits in runs of up to three. The original (?i:'s|...) is kept:
// PCRE2 folds case as Hugging Face's Oniguruma does ("it'\u017f" is one word), where
// llama.cpp's adapted '[sS] list does not.
constexpr std::string_view kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2NoTail = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// DeepSeek LLM's letter class: the Latin, Greek, Cyrillic, Armenian, Georgian,
// Cherokee ... letter ranges of its tokenizer.json.
// Written with \x{...} escapes: several of these code points (U+1F7D, U+1FBE,
// U+2126, U+212A) have canonical equivalents that editors silently normalise.
constexpr std::string_view kDeepseekLetters =
    R"(\s?[A-Za-z\x{b5}\x{c0}-\x{d6}\x{d8}-\x{f6}\x{f8}-\x{1ba}\x{1bc}-\x{1bf}\x{1c4}-\x{293}\x{295}-\x{2af}\x{370}-\x{373}\x{376}\x{377}\x{37b}-\x{37d}\x{37f}\x{386}\x{388}-\x{38a}\x{38c}\x{38e}-\x{3a1}\x{3a3}-\x{3f5}\x{3f7}-\x{481}\x{48a}-\x{52f}\x{531}-\x{556}\x{10a0}-\x{10c5}\x{13a0}-\x{13f5}\x{13f8}-\x{13fd}\x{1c90}-\x{1cba}\x{1cbd}-\x{1cbf}\x{1d00}-\x{1d2b}\x{1d6b}-\x{1d77}\x{1d79}-\x{1d9a}\x{1e00}-\x{1f15}\x{1f18}-\x{1f1d}\x{1f20}-\x{1f45}\x{1f48}-\x{1f4d}\x{1f50}-\x{1f57}\x{1f59}\x{1f5b}\x{1f5d}\x{1f5f}-\x{1f7d}\x{1f80}-\x{1fb4}\x{1fb6}-\x{1fbc}\x{1fbe}\x{1fc2}-\x{1fc4}\x{1fc6}-\x{1fcc}\x{1fd0}-\x{1fd3}\x{1fd6}-\x{1fdb}\x{1fe0}-\x{1fec}\x{1ff2}-\x{1ff4}\x{1ff6}-\x{1ffc}\x{2102}\x{2107}\x{210a}-\x{2113}\x{2115}\x{2119}-\x{211d}\x{2124}\x{2126}\x{2128}\x{212a}-\x{212d}\x{212f}-\x{2134}\x{2139}\x{213c}-\x{213f}\x{2145}-\x{2149}\x{214e}\x{2183}\x{2184}\x{2c00}-\x{2c7b}\x{2c7e}-\x{2ce4}\x{2ceb}-\x{2cee}\x{2cf2}\x{2cf3}\x{a640}-\x{a66d}\x{a680}-\x{a69b}\x{a722}-\x{a76f}\x{a771}-\x{a787}\x{a78b}-\x{a78e}\x{ab70}-\x{abbf}\x{fb00}-\x{fb06}\x{fb13}-\x{fb17}\x{ff21}-\x{ff3a}\x{ff41}-\x{ff5a}\x{10400}-\x{1044f}\x{104b0}-\x{104d3}\x{104d8}-\x{104fb}\x{10c80}-\x{10cb2}\x{10cc0}-\x{10cf2}\x{118a0}-\x{118df}\x{1e900}-\x{1e943}]+)";
constexpr std::string_view kCjk = R"([\x{4e00}-\x{9fa5}\x{800}-\x{4e00}\x{ac00}-\x{d7ff}]+)";

// The table. The first row is the default, used for "" and for unknown names.
const std::vector<PreTokenizerSpec>& table() {
  static const std::vector<PreTokenizerSpec> rows = {
      {"default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2NoTail, R"(\p{N}+)", "[0-9][0-9][0-9]"}, false},
      {"llama-bpe|llama3|llama-v3|falcon3|pixtral", {kLlama3}, true},
      {"qwen2|deepseek-r1-qwen|stablelm2", {kQwen2}, false},
      {"gpt-2|gpt2|mpt|olmo|jais|phi-2", {kGpt2}, false},
      {"deepseek-llm", {R"([\r\n])", kDeepseekLetters, R"(\s?[!-/:-~\x{ff01}-\x{ff0f}\x{ff1a}-\x{ff5e}\x{2018}-\x{201f}\x{3000}-\x{3002}]+)", R"(\s+$)", kCjk, R"(\p{N}+)"},
       false},
      {"deepseek-coder", {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}, false},
      {"falcon", {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2NoTail, "[0-9][0-9][0-9]"}, false},
      {"starcoder|refact|smollm|command-r|codeshell|exaone|minerva-7b", {R"(\p{N})", kGpt2NoTail}, false},
      {"tekken", {kTekken}, true},
      // gpt-oss and GPT-4o GGUFs (llama.cpp's name; it has no "gpt-oss" pre name).
      // ignore_merges as tiktoken and the Hugging Face conversion of its ranks.
      {"gpt-4o", {kO200k}, true},
  };
  return rows;
}

bool row_has_name(const PreTokenizerSpec& row, std::string_view pre) {
  std::string_view names = row.name;
  while (!names.empty()) {
    const size_t bar = names.find('|');
    if (names.substr(0, bar) == pre) return true;
    if (bar == std::string_view::npos) break;
    names.remove_prefix(bar + 1);
  }
  return false;
}

const PreTokenizerSpec* find_row(std::string_view pre) {
  for (const PreTokenizerSpec& row : table())
    if (row_has_name(row, pre)) return &row;
  return nullptr;
}

// Per-thread PCRE2 scratch: match data for the whole-match offsets and a JIT
// stack large enough for long whitespace or letter runs.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
};

// Splits `fragment` by `code` into matches and gaps, appending them to `out`.
void split_fragment(const pcre2_code* code, std::string_view fragment, std::vector<std::string_view>& out) {
  thread_local MatchScratch scratch;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(fragment.data());
  size_t pos = 0;      // where the next search starts
  size_t emitted = 0;  // bytes of `fragment` already in `out`
  while (pos < fragment.size()) {
    const int rc = pcre2_match(code, subject, fragment.size(), pos, 0, scratch.data, scratch.context);
    if (rc < 0) break;  // no further match (or a match error): the rest is a gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
    const size_t begin = ov[0], end = ov[1];
    if (end == begin) {  // an empty match splits nothing; step over one byte
      pos = begin + 1;
      continue;
    }
    if (begin > emitted) out.push_back(fragment.substr(emitted, begin - emitted));
    out.push_back(fragment.substr(begin, end - begin));
    emitted = pos = end;
  }
  if (emitted < fragment.size()) out.push_back(fragment.substr(emitted));
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
};

PreTokenizer::~PreTokenizer() {
  for (Compiled* c : compiled_) {
    pcre2_code_free(c->code);
    delete c;
  }
}

bool PreTokenizer::is_known(std::string_view pre) { return find_row(pre) != nullptr; }

std::vector<std::string_view> PreTokenizer::known_names() {
  std::vector<std::string_view> names;
  for (const PreTokenizerSpec& row : table()) names.push_back(row.name);
  return names;
}

Result<std::unique_ptr<const PreTokenizer>> PreTokenizer::create(std::string_view pre) {
  const PreTokenizerSpec* row = find_row(pre);
  std::unique_ptr<PreTokenizer> p(new PreTokenizer());
  p->spec_ = row != nullptr ? row : &table().front();
  p->jit_ = true;
  for (const std::string_view pattern : p->spec_->regexes) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      return make_error("pre-tokenizer '" + std::string(p->spec_->name) + "': regex does not compile at offset " +
                        std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
    }
    // Without JIT (a platform PCRE2 lacks it for) matching is slower but the same.
    if (pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) p->jit_ = false;
    p->compiled_.push_back(new Compiled{code});
  }
  return std::unique_ptr<const PreTokenizer>(std::move(p));
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> fragments;
  if (text.empty()) return fragments;
  fragments.push_back(text);
  std::vector<std::string_view> next;
  for (const Compiled* c : compiled_) {
    next.clear();
    for (const std::string_view f : fragments) split_fragment(c->code, f, next);
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace gb
