// PreTokenizer: splits text into the words that byte-level BPE merges within, by
// the regex list that `tokenizer.ggml.pre` names. The lists are data (one row per
// name in pre_tokenizer.cpp); the regexes run on PCRE2 with its JIT compiler, in
// UTF mode with Unicode properties (\p{L}, \p{N}, look-ahead). Immutable after
// create(); any thread may call split() (each thread keeps its own match data).
//
// Splitting: the text starts as one fragment; each regex of the list in turn
// splits every fragment into its matches and the gaps between them (gaps are kept
// as fragments, so no byte is lost). A regex sees one fragment as its whole
// subject, so `$` means the fragment's end. Invalid UTF-8 never matches
// (PCRE2_MATCH_INVALID_UTF) and ends up in a gap.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gb {

// One row of the pre-tokenizer table.
struct PreTokenizerSpec {
  std::string_view name;                   // tokenizer.ggml.pre value(s), '|'-separated aliases
  std::vector<std::string_view> regexes;   // applied in order
  // Hugging Face's ignore_merges: a word that is itself a vocabulary token is
  // emitted whole before any merging (Llama 3 needs it: "Cửa Việt").
  bool ignore_merges = false;
};

class PreTokenizer {
 public:
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // The row for `pre` ("" or unknown names give the default row; `known` says
  // which). Fails only if a regex does not compile (a bug in the table).
  static Result<std::unique_ptr<const PreTokenizer>> create(std::string_view pre);
  static bool is_known(std::string_view pre);
  // Every name the table accepts, for messages and docs.
  static std::vector<std::string_view> known_names();

  // Words of `text` in order, covering it exactly; views into `text`.
  std::vector<std::string_view> split(std::string_view text) const;

  std::string_view name() const { return spec_->name; }
  bool ignore_merges() const { return spec_->ignore_merges; }
  bool jit() const { return jit_; }

 private:
  struct Compiled;
  PreTokenizer() = default;
  const PreTokenizerSpec* spec_ = nullptr;
  std::vector<Compiled*> compiled_;  // (num_regexes) pcre2_code*, owned
  bool jit_ = false;
};

}  // namespace gb
