// Jinja parser: tokens -> Template (jinja_ast.h). Recursive descent over Jinja2's
// grammar and operator precedence (or < and < not < comparisons < + - < ~ <
// * / // % < ** < unary - + < postfix . [] () < | filter, `is` test).
// Statements: if/elif/else, for (tuple targets, `if` filter, else, recursive is
// rejected), set (names, tuples, ns.attr, block set), macro, call, filter, with,
// break, continue, generation (transformers' AssistantTracker tag: its body is
// rendered as is). include/import/extends/block are rejected: the sandbox reads
// no files. Nesting is limited (kMaxNesting) so hostile input cannot exhaust the
// stack. Throws TemplateError(Syntax) with the position of the offending token.
#pragma once

#include <string_view>

#include "template/jinja_ast.h"

namespace gb::jinja {

inline constexpr int kMaxNesting = 200;

Template parse_template(std::string_view source);

}  // namespace gb::jinja
