// JSON -> TraceEvent, the mirror of trace_json.cpp, generated from the same field
// lists (trace_fields.h). Every field is checked for presence, type and range
// through FieldReader, so a damaged or hand-edited trace gives
// "<type>: <field>: <problem>" rather than an exception. Unknown keys are ignored
// (forward compatibility within one schema version).
#include <cstdlib>

#include "trace/json_fields.h"
#include "trace/trace_fields.h"
#include "trace/trace_json.h"

namespace gb {
namespace {

using nlohmann::json;
using trace_fields::Form;
using trace_json::FieldReader;

constexpr int64_t kI32Min = INT32_MIN;
constexpr int64_t kI32Max = INT32_MAX;


uint64_t parse_hash(FieldReader& r, const char* key) {
  const std::string s = r.str(key);
  if (!r.ok()) return 0;
  bool good = s.size() == 16;
  for (char c : s) good = good && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!good) {
    r.fail(key, "expected 16 lowercase hex digits, got \"" + s + "\"");
    return 0;
  }
  return std::strtoull(s.c_str(), nullptr, 16);
}

template <class T>
void read_fields(FieldReader& r, T& value);

// An array of enum names or of nested objects.
template <class X>
void read_vector(FieldReader& r, const char* key, std::vector<X>& out) {
  const json* items = r.array(key);
  if (items == nullptr) return;
  for (size_t i = 0; i < items->size() && r.ok(); ++i) {
    const json& item = (*items)[i];
    const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    if constexpr (std::is_enum_v<X>) {
      auto v = item.is_string() ? trace_fields::parse_enum<X>(item.get<std::string>()) : std::nullopt;
      if (v) out.push_back(*v);
      else r.fail(where, "expected a " + std::string(trace_fields::EnumInfo<X>::what) + " name, got " + item.dump());
    } else {
      FieldReader c(item, r.field_path(where));
      X x{};
      read_fields(c, x);
      r.absorb(c);
      out.push_back(std::move(x));
    }
  }
}

template <class M>
void read_member(FieldReader& r, const char* key, M& m, Form form) {
  if constexpr (std::is_same_v<M, double>) m = r.f64(key);
  else if constexpr (std::is_same_v<M, float>) m = r.f32(key);
  else if constexpr (std::is_same_v<M, int32_t>) m = r.i32(key);
  else if constexpr (std::is_same_v<M, int64_t>) m = r.i64(key);
  else if constexpr (std::is_same_v<M, bool>) m = r.boolean(key);
  else if constexpr (std::is_same_v<M, uint64_t>) m = form == Form::Hash ? parse_hash(r, key) : r.u64(key);
  else if constexpr (std::is_same_v<M, std::string>) m = form == Form::Text ? r.text(key) : r.str(key);
  else if constexpr (std::is_same_v<M, BlockId>) m = BlockId{r.i32(key)};
  else if constexpr (std::is_same_v<M, RequestId>) {
    if (form == Form::NoRequestIsNull) m = RequestId{r.optional_u64(key).value_or(kNoRequest.value)};
    else m = RequestId{r.u64(key)};
  } else if constexpr (std::is_same_v<M, std::optional<RequestId>>) {
    if (auto v = r.optional_u64(key)) m = RequestId{*v};
  } else if constexpr (std::is_same_v<M, std::optional<int32_t>>) {
    if (auto v = r.optional_i64(key, kI32Min, kI32Max)) m = static_cast<int32_t>(*v);
  } else if constexpr (std::is_same_v<M, std::optional<std::string>>) {  // Form::OmitWhenAbsent: absent = none
    if (r.has(key)) m = r.str(key);
  } else if constexpr (is_optional<M>) {  // an optional object (Form::OmitWhenAbsent): absent or null = none
    static_assert(trace_fields::HasFields<typename M::value_type>, "no JSON form for this optional member");
    if (r.has(key)) {
      if (const json* o = r.object(key)) {
        FieldReader c(*o, r.field_path(key));
        typename M::value_type v{};
        read_fields(c, v);
        r.absorb(c);
        m = std::move(v);
      }
    }
  } else if constexpr (std::is_enum_v<M>) {
    const std::string name = r.str(key);
    if (auto v = trace_fields::parse_enum<M>(name)) m = *v;
    else if (r.ok()) r.fail(key, "unknown " + std::string(trace_fields::EnumInfo<M>::what) + " \"" + name + "\"");
  } else if constexpr (std::is_same_v<M, std::vector<int32_t>>) m = r.i32_array(key);
  else if constexpr (std::is_same_v<M, std::vector<float>>) m = r.f32_array(key);
  else if constexpr (std::is_same_v<M, std::vector<uint8_t>>) {
    for (int32_t a : r.i32_array(key)) {
      if (a < 0 || a > 255) r.fail(key, "expected values in [0, 255]");
      m.push_back(static_cast<uint8_t>(a));
    }
  } else if constexpr (is_vector<M>) read_vector(r, key, m);
  else {
    static_assert(trace_fields::HasFields<M>, "no JSON form for this member type");
    if (const json* o = r.object(key)) {
      FieldReader c(*o, r.field_path(key));
      read_fields(c, m);
      r.absorb(c);
    }
  }
}

template <class T>
void read_fields(FieldReader& r, T& value) {
  trace_fields::for_each_field<T>([&](const auto& entry) {
    using Entry = std::remove_cvref_t<decltype(entry)>;
    if constexpr (trace_fields::is_inline<Entry>) {
      read_fields(r, value.*entry.ptr);
    } else {
      const std::string key(entry.name);
      read_member(r, key.c_str(), value.*entry.ptr, entry.form);
    }
  });
}

template <class Body>
Result<TraceEvent> read_event(const json& j, const std::string& type) {
  FieldReader r(j, "");
  TraceEvent event;
  event.seq = r.u64("seq");
  event.t_us = r.i64("t_us");
  Body body;
  read_fields(r, body);
  if (!r.ok()) return make_error(type + ": " + r.error());
  event.body = std::move(body);
  return event;
}

}  // namespace

Result<TokenRecord> token_record_from_json(const json& j) {
  FieldReader r(j, "record");
  TokenRecord rec;
  read_fields(r, rec);
  if (!r.ok()) return make_error(r.error());
  return rec;
}

Result<TraceEvent> trace_event_from_json(const json& j) {
  if (!j.is_object()) return make_error("expected a JSON object, got " + std::string(j.type_name()));
  const auto it = j.find("type");
  if (it == j.end() || !it->is_string()) return make_error("missing string field \"type\"");
  const std::string type = it->get<std::string>();
  std::optional<Result<TraceEvent>> out;
  trace_fields::for_each_alternative<TraceEventBody>([&](size_t, auto alternative) {
    using Body = typename decltype(alternative)::type;
    if (!out && type == trace_fields::FieldsOf<Body>::type) out = read_event<Body>(j, type);
  });
  if (out) return std::move(*out);
  return make_error("unknown event type \"" + type + "\"");
}

}  // namespace gb
