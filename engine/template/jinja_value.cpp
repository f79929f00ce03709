// Python semantics of jinja::Value (see jinja_value.h).
#include "template/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace gb::jinja {

const Value* Dict::find(const Value& key) const {
  if (key.kind == Kind::String) return find(std::string_view(key.text));
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.kind == Kind::String && k.text == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.text = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::from_bool(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.boolean = b;
  return v;
}
Value Value::from_int(int64_t i) {
  Value v;
  v.kind = Kind::Int;
  v.integer = i;
  return v;
}
Value Value::from_float(double f) {
  Value v;
  v.kind = Kind::Float;
  v.real = f;
  return v;
}
Value Value::from_string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.text = std::move(s);
  return v;
}
Value Value::from_list(List items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.is_tuple = tuple;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::new_dict() {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<Dict>();
  return v;
}
Value Value::new_namespace() {
  Value v = new_dict();
  v.kind = Kind::Namespace;
  return v;
}
Value Value::function(std::string name, Callable::Fn fn, bool is_macro) {
  Value v;
  v.kind = Kind::Callable;
  v.callable = std::make_shared<Callable>(Callable{std::move(name), std::move(fn), is_macro});
  return v;
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return v.is_tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return v.callable->is_macro ? "Macro" : "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.boolean;
    case Kind::Int: return v.integer != 0;
    case Kind::Float: return v.real != 0.0;
    case Kind::String: return !v.text.empty();
    case Kind::List: return !v.list->empty();
    case Kind::Dict: return !v.dict->entries.empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form: [-]D[.DDD]e[+-]XX.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  // Python's repr: fixed notation for 1e-4 <= |d| < 1e16, else scientific.
  if (exponent < -4 || exponent >= 16) {
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) mant += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + mant + exp_buf;
  }
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
          digits.substr(static_cast<size_t>(exponent) + 1);
  }
  return sign + out;
}

std::string repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

namespace {
std::string repr_sequence(const Value& v) {
  std::string out = v.is_tuple ? "(" : "[";
  for (size_t i = 0; i < v.list->size(); ++i) {
    if (i) out += ", ";
    out += repr((*v.list)[i]);
  }
  if (v.is_tuple && v.list->size() == 1) out += ",";
  out += v.is_tuple ? ")" : "]";
  return out;
}

std::string repr_mapping(const Dict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, val] : d.entries) {
    if (!first) out += ", ";
    first = false;
    out += repr(k) + ": " + repr(val);
  }
  return out + "}";
}
}  // namespace

std::string repr(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::String: return repr_string(v.text);
    case Kind::List: return repr_sequence(v);
    case Kind::Dict: return repr_mapping(*v.dict);
    case Kind::Namespace: return "<Namespace " + repr_mapping(*v.dict) + ">";
    case Kind::Callable:
      return v.callable->is_macro ? "<Macro " + repr_string(v.callable->name) + ">"
                                  : "<built-in function " + v.callable->name + ">";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return v.boolean ? "True" : "False";
    case Kind::Int: return std::to_string(v.integer);
    case Kind::Float: return float_repr(v.real);
    case Kind::String: return v.text;
    default: return repr(v);
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.text == b.text;
    case Kind::List:
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i)
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case Kind::Dict:
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, v] : a.dict->entries) {
        const Value* other = b.dict->find(k);
        if (other == nullptr || !equals(v, *other)) return false;
      }
      return true;
    case Kind::Namespace: return a.dict == b.dict;
    case Kind::Callable: return a.callable == b.callable;
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return (a.as_int() > b.as_int()) - (a.as_int() < b.as_int());
    return (a.as_double() > b.as_double()) - (a.as_double() < b.as_double());
  }
  if (a.is_string() && b.is_string()) return a.text.compare(b.text) < 0 ? -1 : (a.text == b.text ? 0 : 1);
  if (a.is_list() && b.is_list() && a.is_tuple == b.is_tuple) {
    const size_t n = std::min(a.list->size(), b.list->size());
    for (size_t i = 0; i < n; ++i)
      if (!equals((*a.list)[i], (*b.list)[i])) return compare((*a.list)[i], (*b.list)[i]);
    return (a.list->size() > b.list->size()) - (a.list->size() < b.list->size());
  }
  throw ValueError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                   type_name(b) + "'");
}

std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    n = std::min(n, s.size() - i);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

int64_t num_code_points(std::string_view s) {
  int64_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

uint32_t decode_code_point(std::string_view cp) {
  if (cp.empty()) return 0;
  const auto lead = static_cast<unsigned char>(cp[0]);
  if (lead < 0x80 || cp.size() == 1) return lead;
  uint32_t v = lead & (0xFF >> (cp.size() + 1));
  for (size_t i = 1; i < cp.size(); ++i) v = (v << 6) | (static_cast<unsigned char>(cp[i]) & 0x3F);
  return v;
}


int64_t length(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return 0;
    case Kind::String: return num_code_points(v.text);
    case Kind::List: return static_cast<int64_t>(v.list->size());
    case Kind::Dict:
    case Kind::Namespace: return static_cast<int64_t>(v.dict->entries.size());
    default: throw ValueError("object of type '" + type_name(v) + "' has no len()");
  }
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return {};
    case Kind::String: {
      List out;
      for (auto& cp : code_points(v.text)) out.push_back(Value::from_string(std::move(cp)));
      return out;
    }
    case Kind::List: return *v.list;
    case Kind::Dict: {
      List out;
      for (const auto& entry : v.dict->entries) out.push_back(entry.first);
      return out;
    }
    default: throw ValueError("'" + type_name(v) + "' object is not iterable");
  }
}

bool contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string())
      throw ValueError("'in <string>' requires string as left operand, not " + type_name(needle));
    return haystack.text.find(needle.text) != std::string::npos;
  }
  if (haystack.is_dict()) return haystack.dict->find(needle) != nullptr;
  if (haystack.is_list()) {
    for (const auto& item : *haystack.list)
      if (equals(item, needle)) return true;
    return false;
  }
  if (haystack.is_undefined()) return false;
  throw ValueError("argument of type '" + type_name(haystack) + "' is not iterable");
}

void fail_undefined(const Value& v) {
  throw ValueError(v.text.empty() ? std::string("value is undefined") : v.text);
}

}  // namespace gb::jinja
