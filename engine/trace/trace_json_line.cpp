// The canonical event line written straight into a string, generated from the
// same field lists as to_json (trace_fields.h). It gives the bytes of
// line_with_leading_keys(to_json(event)) -- keys sorted by byte value at every
// level, numbers in nlohmann's own shortest round-trip form -- without building
// a JSON tree: a token event with a 20-candidate, 9-stage record took 38-58 us
// through the tree (a map node and a string key per value) and takes 14-21 us
// here, most of it printing the floats; the engine thread pays it per token
// for the streamed trace. The tree writer stays
// the reference: trace_json_line_test compares the two on every event type and
// on random records.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_string.h"
#include "core/utf8.h"
#include "trace/json_fields.h"
#include "trace/trace_fields.h"
#include "trace/trace_jsonl.h"

namespace gb {
namespace {

using nlohmann::json;
using trace_fields::Form;

// A JSON string as nlohmann's dump writes it (UTF-8 kept, the two-character
// escapes, other control characters as \u00xx). Text that is not UTF-8 (a
// plain string field that escaped json_fields.h's rule) goes through nlohmann
// itself, so even that case gives its bytes.
void put_string(std::string& out, std::string_view s) {
  if (!trace_json::is_valid_utf8(s)) {
    out += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  append_json_string(out, s);
}

template <class I>
void put_integer(std::string& out, I value) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

// trace_json::real's encoding: finite values as numbers, the others as strings.
void put_real(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "\"nan\"";
  } else if (std::isinf(value)) {
    out += value > 0 ? "\"inf\"" : "\"-inf\"";
  } else {
    char buf[64];
    const char* end = nlohmann::detail::to_chars(buf, buf + sizeof buf, value);  // what dump() calls
    out.append(buf, static_cast<size_t>(end - buf));
  }
}

template <class T>
void put_object(std::string& out, const T& value);

// value_json of trace_json.cpp, written instead of built.
template <class M>
void put_value(std::string& out, const M& m, Form form) {
  if constexpr (std::is_same_v<M, double>) {
    put_real(out, m);
  } else if constexpr (std::is_same_v<M, float>) {
    if (!std::isfinite(m)) {
      put_real(out, static_cast<double>(m));
    } else {
      char buf[trace_json::kMaxFloatChars];
      out.append(buf, static_cast<size_t>(trace_json::write_float(buf, m) - buf));
    }
  } else if constexpr (std::is_same_v<M, RequestId>) {
    if (form == Form::NoRequestIsNull && m == kNoRequest) out += "null";
    else put_integer(out, m.value);
  } else if constexpr (std::is_same_v<M, BlockId>) {
    put_integer(out, m.value);
  } else if constexpr (std::is_same_v<M, uint64_t>) {
    if (form == Form::Hash) {
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(m));
      put_string(out, buf);
    } else {
      put_integer(out, m);
    }
  } else if constexpr (std::is_enum_v<M>) {
    put_string(out, trace_fields::EnumInfo<M>::name(m));
  } else if constexpr (is_optional<M>) {
    if (m) put_value(out, *m, form);
    else out += "null";
  } else if constexpr (is_vector<M>) {
    out += '[';
    for (size_t i = 0; i < m.size(); ++i) {
      if (i > 0) out += ',';
      put_value(out, m[i], form);
    }
    out += ']';
  } else if constexpr (trace_fields::HasFields<M>) {
    put_object(out, m);
  } else if constexpr (std::is_same_v<M, std::string>) {
    put_string(out, m);
  } else if constexpr (std::is_same_v<M, bool>) {
    out += m ? "true" : "false";
  } else {
    static_assert(std::is_integral_v<M>, "no JSON form for this member type");
    put_integer(out, m);
  }
}

// One key of T's object: `"key":` and a writer of its value, which returns false
// when the key is absent for this value (a text's `_hex` twin when it is UTF-8).
template <class T>
struct KeyWriter {
  std::string key;     // the quoted key and colon
  std::string sort_key;
  std::function<bool(std::string&, const T&)> write;
};

template <class T>
const std::vector<KeyWriter<T>>& key_writers();

// Appends T's keys (an Inline member's own keys at this level) as `Owner`'s,
// reading the member through `get`.
template <class Owner, class T, class Get>
void add_keys(std::vector<KeyWriter<Owner>>& keys, Get get) {
  trace_fields::for_each_field<T>([&](const auto& entry) {
    using Entry = std::remove_cvref_t<decltype(entry)>;
    using M = typename Entry::member_type;
    const auto ptr = entry.ptr;
    const auto member = [get, ptr](const Owner& o) -> const M& { return get(o).*ptr; };
    if constexpr (trace_fields::is_inline<Entry>) {
      add_keys<Owner, M>(keys, member);
    } else {
      const std::string name(entry.name);
      const Form form = entry.form;
      if constexpr (std::is_same_v<M, std::string>) {
        if (form == Form::Text) {  // put_text: sanitized text, and the exact bytes as hex when not UTF-8
          keys.push_back({"", name, [member](std::string& out, const Owner& o) {
                            const std::string& text = member(o);
                            if (trace_json::is_valid_utf8(text)) put_string(out, text);
                            else put_string(out, utf8_sanitize(text));
                            return true;
                          }});
          keys.push_back({"", name + "_hex", [member](std::string& out, const Owner& o) {
                            const std::string& text = member(o);
                            if (trace_json::is_valid_utf8(text)) return false;
                            put_string(out, trace_json::to_hex(text));
                            return true;
                          }});
          return;
        }
      }
      keys.push_back({"", name, [member, form](std::string& out, const Owner& o) {
                        if constexpr (is_optional<M>)
                          if (form == Form::OmitWhenAbsent && !member(o)) return false;  // no key at all
                        put_value(out, member(o), form);
                        return true;
                      }});
    }
  });
}

template <class T>
const std::vector<KeyWriter<T>>& key_writers() {
  static const std::vector<KeyWriter<T>> keys = [] {
    std::vector<KeyWriter<T>> k;
    add_keys<T, T>(k, [](const T& t) -> const T& { return t; });
    // nlohmann's objects are std::maps: keys in byte order.
    std::sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.sort_key < b.sort_key; });
    for (auto& w : k) {
      put_string(w.key, w.sort_key);
      w.key += ':';
    }
    return k;
  }();
  return keys;
}

// T's keys after `out`'s last character; `first` says whether a comma is due.
template <class T>
void put_keys(std::string& out, const T& value, bool first) {
  for (const KeyWriter<T>& w : key_writers<T>()) {
    const size_t mark = out.size();
    if (!first) out += ',';
    out += w.key;
    if (!w.write(out, value)) {
      out.resize(mark);
      continue;
    }
    first = false;
  }
}

template <class T>
void put_object(std::string& out, const T& value) {
  out += '{';
  put_keys(out, value, true);
  out += '}';
}

}  // namespace

void append_trace_event_line(std::string& out, const TraceEvent& event) {
  out += "{\"type\":";
  put_string(out, trace_event_type(event.body));
  out += ",\"seq\":";
  put_integer(out, event.seq);
  out += ",\"t_us\":";
  put_integer(out, event.t_us);
  std::visit([&out](const auto& body) { put_keys(out, body, false); }, event.body);
  out += '}';
}

std::string trace_event_line(const TraceEvent& event) {
  std::string out;
  append_trace_event_line(out, event);
  return out;
}

}  // namespace gb
