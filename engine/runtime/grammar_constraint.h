// Formats in the engine: a request's FormatSettings (sampling/sampler_settings.h)
// compiled to a grammar over bytes (engine/grammar), and the per-request state
// the grammar sampler stage reads.
//
//   format_to_gbnf     the table of format kinds: GBNF as written, JSON Schema,
//                      any JSON value and regular expressions compiled to GBNF.
//   make_token_trie    the vocabulary as the grammar sees it: each token's bytes
//                      (tokenizer.token_bytes), end-of-generation tokens allowed
//                      when the grammar accepts, every other control token never.
//   FormatCache        one per engine: compiled formats by (kind, text), each with
//                      its GrammarSpace and TokenMasks, so requests with the same
//                      schema share the cached transitions and masks.
//   GrammarConstraint  one per request: a matcher over a shared CompiledFormat,
//                      the mask of its state, advanced with each chosen token.
// Threads: the engine thread (CompiledFormat's caches are not synchronized).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>

#include "core/ids.h"
#include "core/result.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_masks.h"
#include "sampling/sampler_settings.h"

namespace gb {

class Tokenizer;

Result<std::string> format_to_gbnf(const FormatSettings& format);
std::shared_ptr<const TokenTrie> make_token_trie(const Tokenizer& tokenizer);

struct CompiledFormat {
  FormatSettings format;
  std::string gbnf;  // what the format compiled to
  std::shared_ptr<GrammarSpace> space;
  std::unique_ptr<TokenMasks> masks;
};

// Compiles the format to a grammar and checks that it can accept something (a
// grammar whose start state cannot reach an accepting state within its
// expansion is refused at submit). Errors name the format kind.
Result<std::shared_ptr<CompiledFormat>> compile_format(const FormatSettings& format,
                                                       std::shared_ptr<const TokenTrie> trie);

class FormatCache {
 public:
  explicit FormatCache(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {}
  // Compiled once and kept (the kMaxEntries most recently used).
  Result<std::shared_ptr<CompiledFormat>> get(const FormatSettings& format);
  static constexpr size_t kMaxEntries = 16;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const TokenTrie> trie_;  // built on first use
  std::list<std::shared_ptr<CompiledFormat>> entries_;  // most recent first
};

class GrammarConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<CompiledFormat> format);

  // The allowed tokens now (bit t of word t / 64); recomputed after the state moved.
  std::span<const uint64_t> mask();
  // No token at all is allowed (not even end of generation): the request cannot go on.
  bool dead_end();
  // Advances over a chosen token; false (state unchanged) if the format forbids
  // it. End-of-generation tokens are allowed iff the grammar accepts.
  bool accept(TokenId token);
  bool allows(TokenId token) const { return format_->masks->allows(matcher_, token); }
  // Whether every token `mask` allows spells the same bytes (one choice of
  // text: the record's `forced`). Looks at most kMaxForcedCheck tokens.
  bool one_text(std::span<const uint64_t> mask) const;
  static constexpr int kMaxForcedCheck = 16;
  // The mask of another state of the same format (a verification's later rows).
  void mask_for(const GrammarMatcher& matcher, TokenBitmask& out) { format_->masks->compute(matcher, out); }
  bool is_accepting() const { return matcher_.is_accepting(); }
  std::string describe() const { return matcher_.describe(); }
  const CompiledFormat& format() const { return *format_; }
  const GrammarMatcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<CompiledFormat> format_;
  GrammarMatcher matcher_;
  TokenBitmask mask_;
  uint32_t mask_state_ = UINT32_MAX;  // the state mask_ belongs to
};

}  // namespace gb
