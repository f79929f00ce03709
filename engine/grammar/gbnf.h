// GBNF: llama.cpp's grammar notation (grammars/README.md in llama.cpp), parsed and
// compiled to a byte-level Grammar (grammar.h).
//
// Accepted syntax:
//   rule     ::= name "::=" alternates        one rule per line; a rule may span
//                                            lines after "::=", after "|" and
//                                            anywhere inside parentheses
//   name     [A-Za-z0-9_-]+
//   element  "literal" | [class] | [^class] | . | name | ( alternates )
//            followed by * + ? {m} {m,} {m,n} {,n}
//   literal / class escapes: \n \r \t \\ \" \' \[ \] \- \^ \/ \xHH \uHHHH \UHHHHHHHH;
//            everything else is the UTF-8 text itself (any code point)
//   .        any Unicode scalar value (not only ASCII); classes range over code points
//   comments # to the end of the line
// Not supported (an error names them): llama.cpp's token references <[id]> / <name>.
//
// Errors: a GbnfError with the byte offset, the 1-based line and column, and a
// message ("expected '::=' after rule name 'value'", "undefined rule 'strng'",
// "rule 'expr' is left-recursive (expr -> term -> expr) ...", limits of grammar.h).
// Threads: pure functions, any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"

namespace gb {

struct GbnfError {
  size_t offset = 0;  // byte offset into the text
  int line = 1;       // 1-based
  int column = 1;     // 1-based, in bytes
  std::string message;
  std::string to_string() const;  // "line 3, column 7: message"
};

// Parses and compiles `text`; `root` names the start rule ("root" in GBNF files).
// On failure `error` (optional) receives the position.
Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text, std::string_view root = "root",
                                                    GbnfError* error = nullptr);

// Quotes `bytes` as a GBNF string literal ("\"a\\\"b\""): printable ASCII as is,
// the rest escaped (\n \r \t \\ \" \xHH for control bytes; UTF-8 kept as text).
std::string gbnf_literal(std::string_view bytes);

}  // namespace gb
