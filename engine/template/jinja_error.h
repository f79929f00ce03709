// TemplateError: why a chat template could not be parsed or rendered, with the
// 1-based line and column of the construct at fault. Thrown inside the template
// interpreter only; the public API (chat_template.h) returns it as a value.
#pragma once

#include <stdexcept>
#include <string>

namespace gb::jinja {

enum class ErrorKind {
  Syntax,   // the template text does not parse
  Runtime,  // an operation failed while rendering (undefined value, type error)
  Raised,   // the template called raise_exception(message)
  Limit,    // a sandbox limit was reached (iterations, recursion, output size)
};

struct SourcePos {
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based, in code points
};

struct TemplateError : std::runtime_error {
  TemplateError(ErrorKind kind_, std::string message_, SourcePos pos_)
      : std::runtime_error(message_), kind(kind_), message(std::move(message_)), pos(pos_) {}
  ErrorKind kind;
  std::string message;  // without the position; a raised message verbatim
  SourcePos pos;
};

}  // namespace gb::jinja
