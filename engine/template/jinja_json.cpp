// tojson: Python's json.dumps(obj, ensure_ascii, indent, separators, sort_keys),
// which transformers installs as the `tojson` filter. Key order is insertion order
// unless sort_keys; floats print as Python's repr; NaN/Infinity as json.dumps does.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/json_string.h"
#include "template/jinja_builtins.h"

namespace gb::jinja {
namespace {

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

std::string key_string(const Value& k) {
  switch (k.kind) {
    case Kind::String: return k.text;
    case Kind::None: return "null";
    case Kind::Bool: return k.boolean ? "true" : "false";
    case Kind::Int: return std::to_string(k.integer);
    case Kind::Float: return float_json(k.real);
    default: throw ValueError("keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& o) : o_(o) {
    item_sep_ = !o.item_separator.empty() ? o.item_separator : (o.indent >= 0 ? "," : ", ");
  }
  void write(const Value& v, int level);
  std::string out;

 private:
  void newline(int level) {
    if (o_.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(o_.indent * level), ' ');
  }
  const JsonOptions& o_;
  std::string item_sep_;
};

void JsonWriter::write(const Value& v, int level) {
  if (level > 200) throw ValueError("tojson: value nested too deeply");
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.boolean ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.integer); return;
    case Kind::Float: out += float_json(v.real); return;
    case Kind::String: append_json_string(out, v.text, o_.ensure_ascii); return;
    case Kind::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += item_sep_;
        newline(level + 1);
        write((*v.list)[i], level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict->entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, val] : v.dict->entries) items.emplace_back(key_string(k), &val);
      if (o_.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep_;
        newline(level + 1);
        append_json_string(out, items[i].first, o_.ensure_ascii);
        out += o_.key_separator;
        write(*items[i].second, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    default: throw ValueError("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  JsonWriter w(options);
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace gb::jinja
