// Jinja lexer: template text -> tokens, with transformers' whitespace settings
// (trim_blocks and lstrip_blocks on) and the '-' / '+' whitespace-control marks.
//
//   text {{ expr }} text {% stmt %} {# comment #} {% raw %}...{% endraw %}
//   -> Data, VarBegin, <expression tokens>, VarEnd, Data, BlockBegin, ..., BlockEnd, Data
//
// Rules, as Jinja2's lexer applies them:
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`, `-#}` after it.
//   - trim_blocks: one newline right after `%}` or `#}` is dropped (not after `}}`).
//   - lstrip_blocks: spaces and tabs between a line start and `{%` / `{#` are dropped,
//     unless the tag opens with `{%+`.
//   - Inside a tag, an end marker is only recognised when no bracket is open, so
//     `{{ {'a': {'b': 1}} }}` works.
//   - Comments are dropped; a raw block becomes one Data token.
// Comments, raw blocks and unterminated tags report errors with line and column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_error.h"

namespace gb::jinja {

enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type = Tok::Eof;
  std::string text;       // Data text, name, operator, or the unescaped string literal
  int64_t int_value = 0;  // Int
  double float_value = 0; // Float
  SourcePos pos;
};

// Maps byte offsets to 1-based line and code-point column.
class SourceMap {
 public:
  explicit SourceMap(std::string_view source);
  SourcePos at(size_t offset) const;

 private:
  std::string_view source_;
  std::vector<size_t> line_starts_;
};

// Throws TemplateError(Syntax) on malformed input.
std::vector<Token> lex_template(std::string_view source);

}  // namespace gb::jinja
