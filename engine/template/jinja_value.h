// jinja::Value: the dynamic value of the chat-template interpreter, with Python's
// semantics where templates can observe them (truthiness, str(), repr(), ==, <,
// int/float promotion, code-point string length), because transformers renders
// templates with Python's Jinja2 and a prompt must match it byte for byte.
//
// Kinds: undefined (carries the hint Jinja2 would raise with), none, bool, int,
// float, string (UTF-8), list (or tuple), dict (insertion-ordered, any key),
// namespace (a mutable dict of attributes), callable (a builtin, a bound method or
// a macro). Lists and dicts are shared by reference, like Python objects; the
// sandbox never mutates them except namespaces through `set ns.attr = ...`.
//
// Errors from an operation (e.g. "'<' not supported between 'str' and 'int'")
// throw ValueError; the interpreter adds the line and column of the expression.
// Threads: values are not shared between threads; one render uses one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.h"  // append_utf8 (used throughout the interpreter)

namespace gb::jinja {

class Interpreter;
struct Value;

// An operation failed on its values; the interpreter adds the source position.
struct ValueError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

using List = std::vector<Value>;

// Insertion-ordered mapping (Python dict). Small: lookups are linear scans.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces in place or appends
};

// Positional and keyword arguments of a call, as evaluated.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  std::string name;
  Fn fn;
  bool is_macro = false;
};

struct Value {
  Kind kind = Kind::Undefined;
  bool is_tuple = false;                 // a List that prints as (a, b)
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;                      // String contents, or an Undefined's hint
  std::shared_ptr<List> list;            // List
  std::shared_ptr<Dict> dict;            // Dict and Namespace
  std::shared_ptr<Callable> callable;    // Callable

  static Value undefined(std::string hint = {});
  static Value none();
  static Value from_bool(bool b);
  static Value from_int(int64_t i);
  static Value from_float(double f);
  static Value from_string(std::string s);
  static Value from_list(List items, bool tuple = false);
  static Value new_dict();
  static Value new_namespace();
  static Value function(std::string name, Callable::Fn fn, bool is_macro = false);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_number() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  bool is_integral() const { return kind == Kind::Bool || kind == Kind::Int; }
  int64_t as_int() const { return kind == Kind::Bool ? (boolean ? 1 : 0) : integer; }
  double as_double() const { return kind == Kind::Float ? real : static_cast<double>(as_int()); }
};

// Python's type name for error messages: "str", "int", "NoneType", "dict", ...
std::string type_name(const Value& v);
bool truthy(const Value& v);
// Python str(): what {{ v }} prints (undefined prints nothing).
std::string to_str(const Value& v);
// Python repr(): how a value prints inside a list or dict.
std::string repr(const Value& v);
std::string repr_string(std::string_view s);
// Python float.__repr__ (shortest round-trip digits, "1.0", "1e+16").
std::string float_repr(double d);
bool equals(const Value& a, const Value& b);
// Python ordering: -1, 0, 1; throws ValueError for unorderable types.
int compare(const Value& a, const Value& b);
// len(): code points for strings; throws ValueError for values without a length.
int64_t length(const Value& v);
// iter(): strings yield code points, dicts their keys, undefined nothing.
List iterate(const Value& v);
// `needle in haystack`.
bool contains(const Value& haystack, const Value& needle);

// UTF-8 helpers on code points (Python string indexing).
std::vector<std::string> code_points(std::string_view s);
int64_t num_code_points(std::string_view s);
uint32_t decode_code_point(std::string_view one_code_point);

// Throws the error Jinja2 raises when an undefined value is used.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace gb::jinja
