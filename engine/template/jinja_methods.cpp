// Methods of str/dict/list values, Jinja tests, the globals, and the Python
// string helpers they share (see jinja_builtins.h).
#include <algorithm>
#include <cctype>
#include <ctime>
#include <unordered_map>

#include "template/jinja_builtins.h"

namespace gb::jinja {

// --- arguments ---------------------------------------------------------------

bool ArgReader::has(size_t index, std::string_view name) const {
  if (index < args_.positional.size()) return true;
  for (const auto& [k, v] : args_.keyword)
    if (k == name) return true;
  return false;
}

Value ArgReader::get(size_t index, std::string_view name, Value fallback) const {
  if (index < args_.positional.size()) return args_.positional[index];
  for (const auto& [k, v] : args_.keyword)
    if (k == name) return v;
  return fallback;
}

int64_t ArgReader::get_int(size_t index, std::string_view name, int64_t fallback) const {
  Value v = get(index, name);
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_integral())
    throw ValueError(std::string(fn_) + "(): argument '" + std::string(name) + "' must be an integer, not " +
                     type_name(v));
  return v.as_int();
}

bool ArgReader::get_bool(size_t index, std::string_view name, bool fallback) const {
  Value v = get(index, name);
  return v.is_undefined() ? fallback : truthy(v);
}

// --- Python string helpers -----------------------------------------------------

namespace {
bool is_py_space(std::string_view cp) {
  static const std::string_view kSpaces[] = {"\t", "\n", "\v", "\f", "\r", "\x1c", "\x1d", "\x1e", "\x1f", " ",
                                             "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9",
                                             "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (auto s : kSpaces)
    if (cp == s) return true;
  // U+2000..U+200A
  return cp.size() == 3 && cp[0] == '\xe2' && cp[1] == '\x80' && static_cast<unsigned char>(cp[2]) >= 0x80 &&
         static_cast<unsigned char>(cp[2]) <= 0x8a;
}
}  // namespace

std::string py_strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::vector<std::string> cps = code_points(s);
  std::vector<std::string> set;
  const bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace) {
    if (!chars.is_string()) throw ValueError("strip arg must be None or str");
    set = code_points(chars.text);
  }
  auto strip_it = [&](const std::string& cp) {
    return whitespace ? is_py_space(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

List py_split(const std::string& s, const Value& sep, int64_t max_split, bool from_right) {
  std::vector<std::string> parts;
  if (sep.is_undefined() || sep.is_none()) {
    // Runs of whitespace; no empty strings.
    std::vector<std::string> cps = code_points(s);
    if (from_right) std::reverse(cps.begin(), cps.end());
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      std::string word;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        // The rest, with its trailing whitespace trimmed.
        size_t end = cps.size();
        while (end > i && is_py_space(cps[end - 1])) --end;
        for (size_t k = i; k < end; ++k) word += cps[k];
        parts.push_back(word);
        break;
      }
      while (i < cps.size() && !is_py_space(cps[i])) word += cps[i++];
      parts.push_back(word);
    }
    if (from_right) {
      for (auto& p : parts) {
        std::vector<std::string> c = code_points(p);
        std::reverse(c.begin(), c.end());
        p.clear();
        for (auto& x : c) p += x;
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    if (!sep.is_string()) throw ValueError("must be str or None, not " + type_name(sep));
    if (sep.text.empty()) throw ValueError("empty separator");
    const std::string& d = sep.text;
    if (!from_right) {
      size_t start = 0;
      while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
        const size_t at = s.find(d, start);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(start, at - start));
        start = at + d.size();
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (max_split < 0 || static_cast<int64_t>(rev.size()) < max_split) {
        if (end < d.size()) break;
        const size_t at = s.rfind(d, end - d.size());
        if (at == std::string::npos) break;
        rev.push_back(s.substr(at + d.size(), end - at - d.size()));
        end = at;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  List out;
  for (auto& p : parts) out.push_back(Value::from_string(std::move(p)));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    std::vector<std::string> cps = code_points(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += with;
    start = at + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string py_capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}
std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    const bool letter = std::isalpha(u) != 0;
    c = static_cast<char>(letter ? (prev_letter ? std::tolower(u) : std::toupper(u)) : c);
    prev_letter = letter || u >= 0x80;
  }
  return out;
}

// --- methods -------------------------------------------------------------------

namespace {

using MethodFn = Value (*)(const Value& self, const CallArgs& args);

bool matches_affix(const Value& self, const Value& affix, bool at_start) {
  auto one = [&](const std::string& a) {
    if (a.size() > self.text.size()) return false;
    return at_start ? self.text.compare(0, a.size(), a) == 0
                    : self.text.compare(self.text.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.text);
  if (affix.is_list()) {
    for (const auto& a : *affix.list) {
      if (!a.is_string()) throw ValueError("tuple for startswith/endswith must only contain str");
      if (one(a.text)) return true;
    }
    return false;
  }
  throw ValueError("startswith/endswith first arg must be str or a tuple of str, not " + type_name(affix));
}

Value str_format(const Value& self, const CallArgs& args) {
  const std::string& f = self.text;
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') throw ValueError("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) throw ValueError("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    bool use_repr = false;
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      use_repr = field.back() == 'r';
      field.resize(field.size() - 2);
    }
    if (field.find(':') != std::string::npos) throw ValueError("format specs are not supported in str.format");
    Value v;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) throw ValueError("Replacement index out of range for positional args");
      v = args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t k = std::stoul(field);
      if (k >= args.positional.size()) throw ValueError("Replacement index out of range for positional args");
      v = args.positional[k];
    } else {
      bool found = false;
      for (const auto& [k, val] : args.keyword)
        if (k == field) {
          v = val;
          found = true;
        }
      if (!found) throw ValueError("KeyError: '" + field + "'");
    }
    out += use_repr ? repr(v) : to_str(v);
    i = close;
  }
  return Value::from_string(std::move(out));
}

int64_t find_in(const std::string& s, const std::string& sub, bool from_right) {
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return num_code_points(std::string_view(s).substr(0, at));
}

template <int (*Pred)(int)>
Value all_chars(const Value& self, const CallArgs&) {
  if (self.text.empty()) return Value::from_bool(false);
  for (char c : self.text)
    if (!Pred(static_cast<unsigned char>(c))) return Value::from_bool(false);
  return Value::from_bool(true);
}

const std::unordered_map<std::string, MethodFn>& string_methods() {
  static const std::unordered_map<std::string, MethodFn> table = {
      {"strip", [](const Value& s, const CallArgs& a) { return Value::from_string(py_strip(s.text, ArgReader(a, "strip").get(0, "chars"), true, true)); }},
      {"lstrip", [](const Value& s, const CallArgs& a) { return Value::from_string(py_strip(s.text, ArgReader(a, "lstrip").get(0, "chars"), true, false)); }},
      {"rstrip", [](const Value& s, const CallArgs& a) { return Value::from_string(py_strip(s.text, ArgReader(a, "rstrip").get(0, "chars"), false, true)); }},
      {"split", [](const Value& s, const CallArgs& a) { ArgReader r(a, "split"); return Value::from_list(py_split(s.text, r.get(0, "sep"), r.get_int(1, "maxsplit", -1), false)); }},
      {"rsplit", [](const Value& s, const CallArgs& a) { ArgReader r(a, "rsplit"); return Value::from_list(py_split(s.text, r.get(0, "sep"), r.get_int(1, "maxsplit", -1), true)); }},
      {"startswith", [](const Value& s, const CallArgs& a) { return Value::from_bool(matches_affix(s, ArgReader(a, "startswith").get(0, "prefix"), true)); }},
      {"endswith", [](const Value& s, const CallArgs& a) { return Value::from_bool(matches_affix(s, ArgReader(a, "endswith").get(0, "suffix"), false)); }},
      {"upper", [](const Value& s, const CallArgs&) { return Value::from_string(ascii_upper(s.text)); }},
      {"lower", [](const Value& s, const CallArgs&) { return Value::from_string(ascii_lower(s.text)); }},
      {"title", [](const Value& s, const CallArgs&) { return Value::from_string(py_title(s.text)); }},
      {"capitalize", [](const Value& s, const CallArgs&) { return Value::from_string(py_capitalize(s.text)); }},
      {"replace", [](const Value& s, const CallArgs& a) {
         ArgReader r(a, "replace");
         return Value::from_string(py_replace(s.text, to_str(r.get(0, "old")), to_str(r.get(1, "new")), r.get_int(2, "count", -1)));
       }},
      {"find", [](const Value& s, const CallArgs& a) { return Value::from_int(find_in(s.text, to_str(ArgReader(a, "find").get(0, "sub")), false)); }},
      {"rfind", [](const Value& s, const CallArgs& a) { return Value::from_int(find_in(s.text, to_str(ArgReader(a, "rfind").get(0, "sub")), true)); }},
      {"index", [](const Value& s, const CallArgs& a) {
         const int64_t i = find_in(s.text, to_str(ArgReader(a, "index").get(0, "sub")), false);
         if (i < 0) throw ValueError("substring not found");
         return Value::from_int(i);
       }},
      {"count", [](const Value& s, const CallArgs& a) {
         const std::string sub = to_str(ArgReader(a, "count").get(0, "sub"));
         if (sub.empty()) return Value::from_int(num_code_points(s.text) + 1);
         int64_t n = 0;
         for (size_t at = s.text.find(sub); at != std::string::npos; at = s.text.find(sub, at + sub.size())) ++n;
         return Value::from_int(n);
       }},
      {"join", [](const Value& s, const CallArgs& a) {
         std::string out;
         bool first = true;
         for (const auto& v : iterate(ArgReader(a, "join").get(0, "iterable"))) {
           if (!v.is_string()) throw ValueError("sequence item: expected str instance, " + type_name(v) + " found");
           if (!first) out += s.text;
           first = false;
           out += v.text;
         }
         return Value::from_string(std::move(out));
       }},
      {"splitlines", [](const Value& s, const CallArgs&) {
         List out;
         std::string line;
         for (size_t i = 0; i < s.text.size(); ++i) {
           const char c = s.text[i];
           if (c == '\n' || c == '\r') {
             if (c == '\r' && i + 1 < s.text.size() && s.text[i + 1] == '\n') ++i;
             out.push_back(Value::from_string(line));
             line.clear();
           } else {
             line += c;
           }
         }
         if (!line.empty()) out.push_back(Value::from_string(line));
         return Value::from_list(std::move(out));
       }},
      {"isdigit", all_chars<::isdigit>},
      {"isalpha", all_chars<::isalpha>},
      {"isalnum", all_chars<::isalnum>},
      {"isspace", all_chars<::isspace>},
      {"islower", [](const Value& s, const CallArgs&) { return Value::from_bool(std::any_of(s.text.begin(), s.text.end(), ::islower) && ascii_lower(s.text) == s.text); }},
      {"isupper", [](const Value& s, const CallArgs&) { return Value::from_bool(std::any_of(s.text.begin(), s.text.end(), ::isupper) && ascii_upper(s.text) == s.text); }},
      {"format", str_format},
  };
  return table;
}

Value dict_items(const Value& d) {
  List out;
  for (const auto& [k, v] : d.dict->entries) out.push_back(Value::from_list({k, v}, true));
  return Value::from_list(std::move(out));
}

const std::unordered_map<std::string, MethodFn>& dict_methods() {
  static const std::unordered_map<std::string, MethodFn> table = {
      {"items", [](const Value& d, const CallArgs&) { return dict_items(d); }},
      {"keys", [](const Value& d, const CallArgs&) {
         List out;
         for (const auto& e : d.dict->entries) out.push_back(e.first);
         return Value::from_list(std::move(out));
       }},
      {"values", [](const Value& d, const CallArgs&) {
         List out;
         for (const auto& e : d.dict->entries) out.push_back(e.second);
         return Value::from_list(std::move(out));
       }},
      {"get", [](const Value& d, const CallArgs& a) {
         ArgReader r(a, "get");
         const Value* v = d.dict->find(r.get(0, "key"));
         return v ? *v : r.get(1, "default", Value::none());
       }},
  };
  return table;
}

const std::unordered_map<std::string, MethodFn>& list_methods() {
  static const std::unordered_map<std::string, MethodFn> table = {
      {"index", [](const Value& l, const CallArgs& a) {
         const Value x = ArgReader(a, "index").get(0, "value");
         for (size_t i = 0; i < l.list->size(); ++i)
           if (equals((*l.list)[i], x)) return Value::from_int(static_cast<int64_t>(i));
         throw ValueError(repr(x) + " is not in list");
       }},
      {"count", [](const Value& l, const CallArgs& a) {
         const Value x = ArgReader(a, "count").get(0, "value");
         int64_t n = 0;
         for (const auto& v : *l.list) n += equals(v, x) ? 1 : 0;
         return Value::from_int(n);
       }},
  };
  return table;
}

bool is_mutator(Kind kind, const std::string& name) {
  static const char* const kList[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
  static const char* const kDict[] = {"update", "pop", "popitem", "clear", "setdefault"};
  if (kind == Kind::List)
    return std::any_of(std::begin(kList), std::end(kList), [&](const char* m) { return name == m; });
  if (kind == Kind::Dict)
    return std::any_of(std::begin(kDict), std::end(kDict), [&](const char* m) { return name == m; });
  return false;
}

}  // namespace

Value bound_method(const Value& obj, const std::string& name) {
  const std::unordered_map<std::string, MethodFn>* table = nullptr;
  if (obj.is_string()) table = &string_methods();
  else if (obj.is_dict()) table = &dict_methods();
  else if (obj.is_list()) table = &list_methods();
  if (table == nullptr) return Value::undefined();
  auto it = table->find(name);
  if (it == table->end()) {
    if (is_mutator(obj.kind, name))
      return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                              "' object is unsafe (the template sandbox is immutable)");
    return Value::undefined();
  }
  const MethodFn fn = it->second;
  return Value::function(name, [fn, obj](Interpreter&, CallArgs& args) { return fn(obj, args); });
}

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
      {"lower", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && ascii_lower(v.text) == v.text; }},
      {"upper", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && ascii_upper(v.text) == v.text; }},
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
