// Formats compiled for the engine (see grammar_constraint.h).
#include "runtime/grammar_constraint.h"

#include <algorithm>
#include <bit>

#include "grammar/gbnf.h"
#include "grammar/grammar_space.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "tokenizer/tokenizer.h"

namespace gb {

Result<std::string> format_to_gbnf(const FormatSettings& format) {
  switch (format.kind) {
    case FormatKind::None: return make_error("format: none set");
    case FormatKind::Gbnf: return format.text;
    case FormatKind::Json: return json_any_value_gbnf();
    case FormatKind::JsonSchema: return json_schema_text_to_gbnf(format.text);
    case FormatKind::Regex: return regex_to_gbnf(format.text, true);
  }
  return make_error("format: unknown kind");
}

std::shared_ptr<const TokenTrie> make_token_trie(const Tokenizer& tokenizer) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<TokenClass> classes(static_cast<size_t>(n), TokenClass::Text);
  for (TokenId t = 0; t < n; ++t) {
    const auto i = static_cast<size_t>(t);
    if (tokenizer.is_end_of_generation(t)) {
      classes[i] = TokenClass::EndOfGeneration;
    } else if (t == tokenizer.bos_id() || tokenizer.special_kind(t) != SpecialKind::None) {
      classes[i] = TokenClass::Never;  // control and user-defined special tokens are never text
    } else {
      bytes[i] = tokenizer.token_bytes(t);
    }
  }
  return std::make_shared<TokenTrie>(std::move(bytes), std::move(classes));
}

Result<std::shared_ptr<CompiledFormat>> compile_format(const FormatSettings& format,
                                                       std::shared_ptr<const TokenTrie> trie) {
  const std::string what = "format \"" + std::string(format_kind_name(format.kind)) + "\": ";
  auto gbnf = format_to_gbnf(format);
  if (!gbnf) return make_error(what + gbnf.error().message);
  auto grammar = compile_gbnf(*gbnf);
  if (!grammar) return make_error(what + grammar.error().message);
  auto out = std::make_shared<CompiledFormat>();
  out->format = format;
  out->gbnf = std::move(*gbnf);
  out->space = std::make_shared<GrammarSpace>(std::move(*grammar));
  if (!out->space->status().ok()) return make_error(what + out->space->status().error().message);
  out->masks = std::make_unique<TokenMasks>(out->space, std::move(trie));
  return out;
}

Result<std::shared_ptr<CompiledFormat>> FormatCache::get(const FormatSettings& format) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if ((*it)->format == format) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front();
    }
  }
  if (!trie_) trie_ = make_token_trie(*tokenizer_);
  auto compiled = compile_format(format, trie_);
  if (!compiled) return compiled.error();
  entries_.push_front(*compiled);
  if (entries_.size() > kMaxEntries) entries_.pop_back();  // requests using it keep their shared_ptr
  return entries_.front();
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<CompiledFormat> format)
    : format_(std::move(format)), matcher_(format_->space) {}

std::span<const uint64_t> GrammarConstraint::mask() {
  if (mask_state_ != matcher_.state() || mask_.empty()) {
    format_->masks->compute(matcher_, mask_);
    mask_state_ = matcher_.state();
  }
  return mask_;
}

bool GrammarConstraint::dead_end() {
  const auto m = mask();
  return std::all_of(m.begin(), m.end(), [](uint64_t w) { return w == 0; });
}

bool GrammarConstraint::one_text(std::span<const uint64_t> mask) const {
  const TokenTrie& trie = format_->masks->trie();
  const std::string* first = nullptr;
  int seen = 0;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const auto id = static_cast<TokenId>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
      if (++seen > kMaxForcedCheck) return false;
      if (trie.token_class(id) != TokenClass::Text) return false;  // end of generation is a choice too
      const std::string& b = trie.token_bytes(id);
      if (first == nullptr) first = &b;
      else if (b != *first) return false;
    }
  }
  return first != nullptr;
}

bool GrammarConstraint::accept(TokenId token) { return format_->masks->accept_token(matcher_, token); }

}  // namespace gb
