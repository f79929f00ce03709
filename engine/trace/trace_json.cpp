// TraceEvent -> JSON, generated from the field lists in trace_fields.h: one
// generic writer walks an event's list and writes each member by its C++ type
// and form. The key names are the documented schema (docs/trace-format.md).
#include "trace/trace_json.h"

#include <cstdio>
#include <optional>
#include <vector>

#include "trace/json_fields.h"
#include "trace/trace_fields.h"

namespace gb {
namespace {

using nlohmann::json;
using trace_fields::Form;
using trace_json::put_text;
using trace_json::real;


std::string hash_hex(uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

template <class T>
void write_fields(json& j, const T& value);

template <class M>
json value_json(const M& m, Form form) {
  if constexpr (std::is_same_v<M, double>) {
    return real(m);
  } else if constexpr (std::is_same_v<M, float>) {
    return real(m);
  } else if constexpr (std::is_same_v<M, RequestId>) {
    return form == Form::NoRequestIsNull && m == kNoRequest ? json(nullptr) : json(m.value);
  } else if constexpr (std::is_same_v<M, BlockId>) {
    return m.value;
  } else if constexpr (std::is_same_v<M, uint64_t>) {
    return form == Form::Hash ? json(hash_hex(m)) : json(m);
  } else if constexpr (std::is_enum_v<M>) {
    return std::string(trace_fields::EnumInfo<M>::name(m));
  } else if constexpr (is_optional<M>) {
    return m ? value_json(*m, form) : json(nullptr);
  } else if constexpr (is_vector<M>) {
    json a = json::array();
    for (const auto& x : m) a.push_back(value_json(x, form));
    return a;
  } else if constexpr (trace_fields::HasFields<M>) {
    json o = json::object();
    write_fields(o, m);
    return o;
  } else {
    static_assert(std::is_arithmetic_v<M> || std::is_same_v<M, std::string>, "no JSON form for this member type");
    return m;
  }
}

template <class T>
void write_fields(json& j, const T& value) {
  trace_fields::for_each_field<T>([&](const auto& entry) {
    using Entry = std::remove_cvref_t<decltype(entry)>;
    const auto& member = value.*entry.ptr;
    if constexpr (trace_fields::is_inline<Entry>) {
      write_fields(j, member);
    } else if constexpr (std::is_same_v<typename Entry::member_type, std::string>) {
      if (entry.form == Form::Text) put_text(j, std::string(entry.name), member);
      else j[std::string(entry.name)] = member;
    } else {
      if constexpr (is_optional<typename Entry::member_type>)
        if (entry.form == Form::OmitWhenAbsent && !member) return;
      j[std::string(entry.name)] = value_json(member, entry.form);
    }
  });
}

}  // namespace

json token_record_to_json(const TokenRecord& r) { return value_json(r, Form::Plain); }

json to_json(const TraceEvent& event) {
  json j = json::object();
  j["type"] = trace_event_type(event.body);
  j["seq"] = event.seq;
  j["t_us"] = event.t_us;
  std::visit([&j](const auto& body) { write_fields(j, body); }, event.body);
  return j;
}

std::optional<TokenOrigin> parse_token_origin(std::string_view name) { return trace_fields::parse_enum<TokenOrigin>(name); }
std::optional<KvEventKind> parse_kv_event_kind(std::string_view name) { return trace_fields::parse_enum<KvEventKind>(name); }

}  // namespace gb
