// The parse tree of a Jinja template: expressions (Expr) and statements (Stmt).
// Every node keeps the source position that errors report. The tree is immutable
// after parsing and may be rendered any number of times (one render at a time per
// Interpreter, but several interpreters may share one tree).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_error.h"
#include "template/jinja_value.h"

namespace gb::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
  Literal,    // value
  Name,       // name
  GetAttr,    // a.name           operands[0], name
  GetItem,    // a[key]           operands[0..1]
  Slice,      // a[start:stop:step]  operands[0..3], absent parts null
  Call,       // f(args)          operands[0] = callee, args
  Filter,     // a | name(args)   operands[0] (null in a filter block), name, args
  Test,       // a is [not] name(args)  operands[0], name, args, negated
  Unary,      // op a             op "-" "+" "not"
  Binary,     // a op b           op + - * / // % ** ~ and or
  Compare,    // a op b op c ...  operands, ops (== != < <= > >= in notin)
  Conditional,// a if cond else b operands[0]=a, [1]=cond, [2]=else or null
  ListLit,    // [a, b]
  TupleLit,   // (a, b)
  DictLit,    // {k: v}           operands alternate key, value
};

struct CallArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star;       // *args
  ExprPtr star_star;  // **kwargs
};

struct Expr {
  ExprKind kind;
  SourcePos pos;
  Value literal;
  std::string name;  // Name, GetAttr, Filter, Test, Unary/Binary operator
  std::vector<ExprPtr> operands;
  std::vector<std::string> ops;  // Compare
  CallArgList args;              // Call, Filter, Test
  bool negated = false;          // Test
};

enum class StmtKind : uint8_t {
  Text,        // literal template text
  Print,       // {{ expr }}
  If,          // conditions[i] -> bodies[i]; bodies.back() is the else when larger
  For,         // targets in expr [if filter]: bodies[0]; else: bodies[1]
  Set,         // targets = expr; or target.attr = expr
  SetBlock,    // {% set name %}...{% endset %} with optional filter chain
  Macro,       // name(params=defaults): bodies[0]
  CallBlock,   // {% call(params) expr %}...{% endcall %}
  FilterBlock, // {% filter f %}...{% endfilter %}
  With,        // {% with a = 1 %}...{% endwith %}
  Break,
  Continue,
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null = required
};

struct Stmt {
  StmtKind kind;
  SourcePos pos;
  std::string text;                  // Text; Macro / SetBlock name; Set attribute
  ExprPtr expr;                      // Print, For iterable, Set value, CallBlock call, SetBlock/FilterBlock filter
  ExprPtr filter;                    // For's `if` filter
  std::vector<ExprPtr> conditions;   // If
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // For / Set names (tuple unpacking when > 1), With names
  std::vector<ExprPtr> values;       // With values
  std::vector<MacroParam> params;    // Macro, CallBlock
  bool unpack = false;               // For / Set target was written as a tuple
  bool recursive = false;            // For
};

struct Template {
  Body body;
};

}  // namespace gb::jinja
