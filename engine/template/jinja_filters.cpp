// Jinja filters (see jinja_builtins.h): Jinja2 3.1's behaviour for the arguments
// chat templates use, with transformers' tojson.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "template/jinja_builtins.h"

namespace gb::jinja {
namespace {

// getattr-or-item along a dotted path ("a.b.0"), as Jinja's attribute= arguments.
Value attribute_path(Interpreter& in, Value v, const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = in.get_item(v, numeric ? Value::from_int(std::stoll(part)) : Value::from_string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

Value attr_arg(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_undefined() || attribute.is_none()) return item;
  if (attribute.is_integral()) return in.get_item(item, attribute);
  return attribute_path(in, item, to_str(attribute));
}

// select/reject/selectattr/rejectattr: keep items whose test result == `keep`.
Value select_items(Interpreter& in, Value& input, CallArgs& a, bool keep, bool by_attr) {
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (a.positional.empty()) throw ValueError("selectattr/rejectattr need an attribute name");
    attribute = a.positional[next++];
  }
  std::string test;
  if (next < a.positional.size()) test = to_str(a.positional[next++]);
  CallArgs test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end());
  test_args.keyword = a.keyword;
  List out;
  for (auto& item : iterate(input)) {
    in.count_iteration();
    Value subject = by_attr ? attr_arg(in, item, attribute) : item;
    const bool ok = test.empty() ? truthy(subject) : in.apply_test(test, subject, test_args);
    if (ok == keep) out.push_back(item);
  }
  return Value::from_list(std::move(out));
}

Value do_map(Interpreter& in, Value& input, CallArgs& a) {
  ArgReader r(a, "map");
  List out;
  if (r.has(SIZE_MAX, "attribute")) {
    const Value attribute = r.get(SIZE_MAX, "attribute");
    const Value fallback = r.get(SIZE_MAX, "default");
    for (auto& item : iterate(input)) {
      in.count_iteration();
      Value v = attr_arg(in, item, attribute);
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value::from_list(std::move(out));
  }
  if (a.positional.empty()) throw ValueError("map() needs a filter name or attribute=");
  const std::string filter = to_str(a.positional[0]);
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (auto& item : iterate(input)) {
    in.count_iteration();
    CallArgs args = rest;
    out.push_back(in.apply_filter(filter, item, args));
  }
  return Value::from_list(std::move(out));
}

Value do_tojson(Interpreter& in, Value& input, CallArgs& a) {
  ArgReader r(a, "tojson");
  JsonOptions o;
  o.indent = static_cast<int>(r.get_int(0, "indent", -1));
  o.ensure_ascii = r.get_bool(SIZE_MAX, "ensure_ascii", false);
  o.sort_keys = r.get_bool(SIZE_MAX, "sort_keys", false);
  const Value seps = r.get(SIZE_MAX, "separators");
  if (seps.is_list() && seps.list->size() == 2) {
    o.item_separator = to_str((*seps.list)[0]);
    o.key_separator = to_str((*seps.list)[1]);
  }
  std::string s = to_json(input, o);
  in.check_size(s.size());
  return Value::from_string(std::move(s));
}

Value do_join(Interpreter& in, Value& input, CallArgs& a) {
  ArgReader r(a, "join");
  const std::string sep = to_str(r.get(0, "d", Value::from_string("")));
  const Value attribute = r.get(1, "attribute");
  std::string out;
  bool first = true;
  for (auto& item : iterate(input)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr_arg(in, item, attribute));
    in.check_size(out.size());
  }
  return Value::from_string(std::move(out));
}

Value do_int(Interpreter&, Value& v, CallArgs& a) {
  ArgReader r(a, "int");
  const Value fallback = r.get(0, "default", Value::from_int(0));
  const int base = static_cast<int>(r.get_int(1, "base", 10));
  if (v.is_integral()) return Value::from_int(v.as_int());
  if (v.kind == Kind::Float) return std::isfinite(v.real) ? Value::from_int(static_cast<int64_t>(v.real)) : fallback;
  if (!v.is_string()) return fallback;
  std::string s = py_strip(v.text, Value::none(), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  try {
    size_t used = 0;
    const long long n = std::stoll(s, &used, base);
    if (used == s.size()) return Value::from_int(n);
    size_t fused = 0;
    const double d = std::stod(s, &fused);
    if (fused == s.size() && std::isfinite(d)) return Value::from_int(static_cast<int64_t>(d));
  } catch (const std::exception&) {
  }
  return fallback;
}

Value do_float(Interpreter&, Value& v, CallArgs& a) {
  const Value fallback = ArgReader(a, "float").get(0, "default", Value::from_float(0.0));
  if (v.is_number()) return Value::from_float(v.as_double());
  if (!v.is_string()) return fallback;
  const std::string s = py_strip(v.text, Value::none(), true, true);
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return Value::from_float(d);
  } catch (const std::exception&) {
  }
  return fallback;
}

Value do_items(Interpreter&, Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::from_list({});
  if (!v.is_dict()) throw ValueError("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, val] : v.dict->entries) out.push_back(Value::from_list({k, val}, true));
  return Value::from_list(std::move(out));
}

// Sort key: the attribute, lower-cased strings unless case-sensitive.
Value sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  Value k = attr_arg(in, item, attribute);
  if (!case_sensitive && k.is_string()) k.text = ascii_lower(k.text);
  return k;
}

Value do_sort(Interpreter& in, Value& v, CallArgs& a) {
  ArgReader r(a, "sort");
  const bool reverse = r.get_bool(0, "reverse", false);
  const bool case_sensitive = r.get_bool(1, "case_sensitive", false);
  const Value attribute = r.get(2, "attribute");
  List items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) keyed.emplace_back(sort_key(in, item, attribute, case_sensitive), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  List out;
  for (auto& [k, item] : keyed) out.push_back(item);
  return Value::from_list(std::move(out));
}

Value do_dictsort(Interpreter&, Value& v, CallArgs& a) {
  ArgReader r(a, "dictsort");
  const bool case_sensitive = r.get_bool(0, "case_sensitive", false);
  const bool by_value = to_str(r.get(1, "by", Value::from_string("key"))) == "value";
  const bool reverse = r.get_bool(2, "reverse", false);
  if (!v.is_dict()) throw ValueError("dictsort needs a mapping");
  List out;
  for (const auto& [k, val] : v.dict->entries) out.push_back(Value::from_list({k, val}, true));
  auto key = [&](const Value& pair) {
    Value k = (*pair.list)[by_value ? 1 : 0];
    if (!case_sensitive && k.is_string()) k.text = ascii_lower(k.text);
    return k;
  };
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    return reverse ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
  });
  return Value::from_list(std::move(out));
}

Value do_unique(Interpreter& in, Value& v, CallArgs& a) {
  ArgReader r(a, "unique");
  const bool case_sensitive = r.get_bool(0, "case_sensitive", false);
  const Value attribute = r.get(1, "attribute");
  List out, seen;
  for (auto& item : iterate(v)) {
    Value k = sort_key(in, item, attribute, case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return Value::from_list(std::move(out));
}

Value min_max(Interpreter& in, Value& v, CallArgs& a, bool want_max) {
  ArgReader r(a, want_max ? "max" : "min");
  const bool case_sensitive = r.get_bool(0, "case_sensitive", false);
  const Value attribute = r.get(1, "attribute");
  List items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const int c = compare(sort_key(in, items[i], attribute, case_sensitive),
                          sort_key(in, items[best], attribute, case_sensitive));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Value do_sum(Interpreter& in, Value& v, CallArgs& a) {
  ArgReader r(a, "sum");
  const Value attribute = r.get(0, "attribute");
  Value total = r.get(1, "start", Value::from_int(0));
  for (auto& item : iterate(v)) total = binary_op("+", total, attr_arg(in, item, attribute), in.limits().max_output_bytes);
  return total;
}

Value do_round(Interpreter&, Value& v, CallArgs& a) {
  ArgReader r(a, "round");
  const int64_t precision = r.get_int(0, "precision", 0);
  const std::string method = to_str(r.get(1, "method", Value::from_string("common")));
  if (!v.is_number()) throw ValueError("round needs a number, not " + type_name(v));
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double y;
  if (method == "ceil") y = std::ceil(x);
  else if (method == "floor") y = std::floor(x);
  else if (method == "common") y = std::nearbyint(x);  // Python's round(): half to even
  else throw ValueError("method must be common, ceil or floor");
  return Value::from_float(y / scale);
}

Value do_indent(Interpreter&, Value& v, CallArgs& a) {
  ArgReader r(a, "indent");
  const Value width = r.get(0, "width", Value::from_int(4));
  const std::string pad = width.is_string() ? width.text : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  const bool first = r.get_bool(1, "first", false);
  const bool blank = r.get_bool(2, "blank", false);
  std::vector<std::string> lines;
  std::string s = to_str(v) + "\n", line;
  for (char c : s) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i)
    out += "\n" + ((blank || !lines[i].empty()) ? pad + lines[i] : lines[i]);
  return Value::from_string(first ? pad + out : out);
}

Value do_escape(Interpreter&, Value& v, CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::from_string(std::move(out));
}

Value do_first(Interpreter&, Value& v, CallArgs&) {
  if (v.is_list()) return v.list->empty() ? Value::undefined("No first item, sequence was empty.") : v.list->front();
  List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value do_last(Interpreter&, Value& v, CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value do_reverse(Interpreter&, Value& v, CallArgs&) {
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (!v.is_string()) return Value::from_list(std::move(items));
  std::string out;
  for (auto& c : items) out += c.text;
  return Value::from_string(std::move(out));
}

Value do_default(Interpreter&, Value& v, CallArgs& a) {
  ArgReader r(a, "default");
  const Value fallback = r.get(0, "default_value", Value::from_string(""));
  const bool boolean = r.get_bool(1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return fallback;
  return v;
}

Value do_center(Interpreter&, Value& v, CallArgs& a) {
  const int64_t width = ArgReader(a, "center").get_int(0, "width", 80);
  std::string s = to_str(v);
  const int64_t n = num_code_points(s);
  if (width <= n) return Value::from_string(s);
  // CPython's str.center: the odd space goes left when both margin and width are odd.
  const int64_t total = width - n;
  const int64_t left = total / 2 + (total & width & 1);
  return Value::from_string(std::string(static_cast<size_t>(left), ' ') + s +
                            std::string(static_cast<size_t>(total - left), ' '));
}

Value do_wordcount(Interpreter&, Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : to_str(v)) {
    const bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::from_int(n);
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", [](Interpreter&, Value& v, CallArgs&) {
         if (!v.is_number()) throw ValueError("bad operand type for abs(): '" + type_name(v) + "'");
         return v.kind == Kind::Float ? Value::from_float(std::fabs(v.real)) : Value::from_int(std::llabs(v.as_int()));
       }},
      {"attr", [](Interpreter& in, Value& v, CallArgs& a) { return in.get_attr(v, to_str(ArgReader(a, "attr").get(0, "name"))); }},
      {"capitalize", [](Interpreter&, Value& v, CallArgs&) { return Value::from_string(py_capitalize(to_str(v))); }},
      {"center", do_center},
      {"count", [](Interpreter&, Value& v, CallArgs&) { return Value::from_int(length(v)); }},
      {"d", do_default},
      {"default", do_default},
      {"dictsort", do_dictsort},
      {"e", do_escape},
      {"escape", do_escape},
      {"first", do_first},
      {"float", do_float},
      {"indent", do_indent},
      {"int", do_int},
      {"items", do_items},
      {"join", do_join},
      {"last", do_last},
      {"length", [](Interpreter&, Value& v, CallArgs&) { return Value::from_int(length(v)); }},
      {"list", [](Interpreter&, Value& v, CallArgs&) { return Value::from_list(iterate(v)); }},
      {"lower", [](Interpreter&, Value& v, CallArgs&) { return Value::from_string(ascii_lower(to_str(v))); }},
      {"map", do_map},
      {"max", [](Interpreter& in, Value& v, CallArgs& a) { return min_max(in, v, a, true); }},
      {"min", [](Interpreter& in, Value& v, CallArgs& a) { return min_max(in, v, a, false); }},
      {"pprint", [](Interpreter&, Value& v, CallArgs&) { return Value::from_string(repr(v)); }},
      {"reject", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, false, false); }},
      {"rejectattr", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, false, true); }},
      {"replace", [](Interpreter& in, Value& v, CallArgs& a) {
         ArgReader r(a, "replace");
         std::string s = py_replace(to_str(v), to_str(r.get(0, "old")), to_str(r.get(1, "new")), r.get_int(2, "count", -1));
         in.check_size(s.size());
         return Value::from_string(std::move(s));
       }},
      {"reverse", do_reverse},
      {"round", do_round},
      {"safe", [](Interpreter&, Value& v, CallArgs&) { return Value::from_string(to_str(v)); }},
      {"select", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, true, false); }},
      {"selectattr", [](Interpreter& in, Value& v, CallArgs& a) { return select_items(in, v, a, true, true); }},
      {"sort", do_sort},
      {"string", [](Interpreter&, Value& v, CallArgs&) { return Value::from_string(to_str(v)); }},
      {"sum", do_sum},
      {"title", [](Interpreter&, Value& v, CallArgs&) { return Value::from_string(py_title(to_str(v))); }},
      {"tojson", do_tojson},
      {"trim", [](Interpreter&, Value& v, CallArgs& a) {
         return Value::from_string(py_strip(to_str(v), ArgReader(a, "trim").get(0, "chars"), true, true));
       }},
      {"unique", do_unique},
      {"upper", [](Interpreter&, Value& v, CallArgs&) { return Value::from_string(ascii_upper(to_str(v))); }},
      {"wordcount", do_wordcount},
  };
  return table;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

}  // namespace gb::jinja
