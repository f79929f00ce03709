// The builtins of the chat-template sandbox, as tables: filters, tests, methods of
// str/dict/list values, and the globals (range, namespace, dict, raise_exception,
// strftime_now). Each follows Jinja2 3.1 / Python 3 behaviour for the arguments
// chat templates pass; docs/chat-templates.md lists them. Mutating methods
// (list.append, dict.update, ...) are refused as in Jinja2's immutable sandbox.
// Threads: the tables are immutable; any thread.
#pragma once

#include <string>
#include <string_view>

#include "template/jinja_interpreter.h"
#include "template/jinja_value.h"

namespace gb::jinja {

using FilterFn = Value (*)(Interpreter&, Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

FilterFn find_filter(const std::string& name);  // nullptr if unknown
TestFn find_test(const std::string& name);      // nullptr if unknown

// obj.name as a bound method. Returns an Undefined with an empty hint when `obj`
// has no such method, and an Undefined whose hint explains the refusal for a
// method the sandbox forbids.
Value bound_method(const Value& obj, const std::string& name);

void install_globals(Scope& globals);

// Python's json.dumps, as transformers' tojson calls it.
struct JsonOptions {
  int indent = -1;               // -1 = None (one line)
  std::string item_separator;    // default ", " or "," with indent
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(const Value& v, const JsonOptions& options);

// Positional-or-keyword argument access for builtins.
class ArgReader {
 public:
  ArgReader(const CallArgs& args, std::string_view fn) : args_(args), fn_(fn) {}
  bool has(size_t index, std::string_view name) const;
  Value get(size_t index, std::string_view name, Value fallback = Value::undefined()) const;
  int64_t get_int(size_t index, std::string_view name, int64_t fallback) const;
  bool get_bool(size_t index, std::string_view name, bool fallback) const;

 private:
  const CallArgs& args_;
  std::string_view fn_;
};

// Python str methods shared by filters and methods.
std::string py_strip(std::string_view s, const Value& chars, bool left, bool right);
List py_split(const std::string& s, const Value& sep, int64_t max_split, bool from_right);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);
std::string ascii_lower(std::string s);
std::string ascii_upper(std::string s);
std::string py_capitalize(const std::string& s);
std::string py_title(const std::string& s);

}  // namespace gb::jinja
