// Jinja tests (`x is defined`, ...) and the globals of the sandbox (range,
// namespace, dict, raise_exception, strftime_now); see jinja_builtins.h.
#include <ctime>
#include <unordered_map>

#include "template/jinja_builtins.h"

namespace gb::jinja {

// --- tests ---------------------------------------------------------------------

namespace {
Value arg0(const CallArgs& a, const char* test) {
  if (a.positional.empty()) throw ValueError(std::string("test '") + test + "' needs an argument");
  return a.positional[0];
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool; }},
      {"false", [](Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && !v.boolean; }},
      {"true", [](Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Bool && v.boolean; }},
      {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Int; }},
      {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Float; }},
      {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }},
      {"iterable", [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"sequence", [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"callable", [](Interpreter&, const Value& v, CallArgs&) { return v.kind == Kind::Callable; }},
      {"sameas", [](Interpreter&, const Value& v, CallArgs& a) {
         const Value o = arg0(a, "sameas");
         if (v.kind != o.kind) return false;
         if (v.is_none() || v.is_undefined()) return true;
         if (v.kind == Kind::Bool) return v.boolean == o.boolean;
         if (v.is_list()) return v.list == o.list;
         if (v.is_dict() || v.kind == Kind::Namespace) return v.dict == o.dict;
         return equals(v, o);
       }},
      {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg0(a, "eq")); }},
      {"equalto", [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg0(a, "equalto")); }},
      {"ne", [](Interpreter&, const Value& v, CallArgs& a) { return !equals(v, arg0(a, "ne")); }},
      {"lt", [](Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "lt")) < 0; }},
      {"lessthan", [](Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "lessthan")) < 0; }},
      {"le", [](Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "le")) <= 0; }},
      {"gt", [](Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "gt")) > 0; }},
      {"greaterthan", [](Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "greaterthan")) > 0; }},
      {"ge", [](Interpreter&, const Value& v, CallArgs& a) { return compare(v, arg0(a, "ge")) >= 0; }},
      {"in", [](Interpreter&, const Value& v, CallArgs& a) { return contains(arg0(a, "in"), v); }},
      {"odd", [](Interpreter&, const Value& v, CallArgs&) {
         if (!v.is_integral()) throw ValueError("test 'odd' needs an integer");
         return v.as_int() % 2 != 0;
       }},
      {"even", [](Interpreter&, const Value& v, CallArgs&) {
         if (!v.is_integral()) throw ValueError("test 'even' needs an integer");
         return v.as_int() % 2 == 0;
       }},
      {"divisibleby", [](Interpreter&, const Value& v, CallArgs& a) {
         const Value d = arg0(a, "divisibleby");
         if (!v.is_integral() || !d.is_integral() || d.as_int() == 0) throw ValueError("test 'divisibleby' needs non-zero integers");
         return v.as_int() % d.as_int() == 0;
       }},
      {"lower", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && py_lower(v.text) == v.text; }},
      {"upper", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && py_upper(v.text) == v.text; }},
  };
  return table;
}
}  // namespace

TestFn find_test(const std::string& name) {
  auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

// --- globals -------------------------------------------------------------------

void install_globals(Scope& globals) {
  globals.set("range", Value::function("range", [](Interpreter& in, CallArgs& a) {
                ArgReader r(a, "range");
                int64_t start = 0, stop = 0, step = 1;
                if (a.positional.size() == 1) {
                  stop = r.get_int(0, "stop", 0);
                } else {
                  start = r.get_int(0, "start", 0);
                  stop = r.get_int(1, "stop", 0);
                  step = r.get_int(2, "step", 1);
                }
                if (step == 0) throw ValueError("range() arg 3 must not be zero");
                const int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                           : (start > stop ? (start - stop - step - 1) / -step : 0);
                if (n > in.limits().max_loop_iterations)
                  throw TemplateError(ErrorKind::Limit, "range too big: " + std::to_string(n) + " items", {});
                List out;
                for (int64_t i = 0; i < n; ++i) out.push_back(Value::from_int(start + i * step));
                return Value::from_list(std::move(out));
              }));
  globals.set("namespace", Value::function("namespace", [](Interpreter&, CallArgs& a) {
                Value ns = Value::new_namespace();
                for (const auto& p : a.positional) {
                  if (!p.is_dict()) throw ValueError("namespace() takes a mapping or keyword arguments");
                  for (const auto& [k, v] : p.dict->entries) ns.dict->set(k, v);
                }
                for (const auto& [k, v] : a.keyword) ns.dict->set(Value::from_string(k), v);
                return ns;
              }));
  globals.set("dict", Value::function("dict", [](Interpreter&, CallArgs& a) {
                Value d = Value::new_dict();
                for (const auto& p : a.positional)
                  if (p.is_dict())
                    for (const auto& [k, v] : p.dict->entries) d.dict->set(k, v);
                for (const auto& [k, v] : a.keyword) d.dict->set(Value::from_string(k), v);
                return d;
              }));
  globals.set("raise_exception", Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
                throw TemplateError(ErrorKind::Raised, to_str(ArgReader(a, "raise_exception").get(0, "message")), {});
              }));
  globals.set("strftime_now", Value::function("strftime_now", [](Interpreter& in, CallArgs& a) {
                const std::string fmt = to_str(ArgReader(a, "strftime_now").get(0, "format"));
                if (fmt.empty()) return Value::from_string("");
                std::string buf(fmt.size() * 8 + 64, '\0');
                const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &in.now());
                buf.resize(n);
                return Value::from_string(std::move(buf));
              }));
}

}  // namespace gb::jinja
