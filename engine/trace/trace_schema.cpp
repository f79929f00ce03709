// The documented schema as data: one FieldSpec list per line type. The header's
// top level and the workbench's branch tree are written here by hand; its model
// and tokenizer objects come from trace_header_fields.h and the event lines' from
// the field lists in trace_fields.h, the same lists the writer and reader walk, so the
// independent guards on the events are docs/trace-format.md and the frozen trace
// in tests/engine/trace/data/ (old files must keep validating and reading). A
// change to any of them is a schema change.
#include "trace/trace_schema.h"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "trace/trace_fields.h"
#include "trace/trace_header_fields.h"

namespace gb {
namespace {

using nlohmann::json;
using trace_fields::Form;

enum class Kind {
  UInt,        // integer >= 0 (64-bit)
  Int,         // signed integer (64-bit)
  Int32,       // integer in int32 range
  Real,        // number, or "inf" / "-inf" / "nan"
  Bool,
  String,
  Text,        // string, plus an optional "<key>_hex" holding the exact bytes
  Hash,        // 16 lowercase hex digits
  Int32Array,
  NameArray,   // array of strings from `allowed`
  RealArray,
  UInt8Array,  // integers in [0, 255]
  NullOrUInt,
  NullOrInt32,
  NullOrObjectOrString,
  NullOrReal,
  AnyObject,   // an object whose keys are defined elsewhere (the workbench's conversation)
  Object,      // nested, see `nested`
  ObjectArray, // array of nested objects
};

struct FieldSpec {
  const char* name;
  Kind kind;
  std::vector<std::string> allowed = {};       // String / element names: allowed values
  const std::vector<FieldSpec>* nested = nullptr;
  bool optional = false;                        // may be absent
};

// The workbench's branch tree (header "branches"; ui/session/branch_tree.h writes it).
const std::vector<FieldSpec> kBranchNode = {{"request", Kind::UInt},
                                            {"parent", Kind::NullOrUInt},
                                            {"fork_position", Kind::Int32},
                                            {"fork_token", Kind::NullOrInt32},
                                            {"fork_prob", Kind::NullOrReal},
                                            {"prompt_ids", Kind::Int32Array},
                                            {"token_ids", Kind::Int32Array},
                                            {"token_texts", Kind::NameArray},
                                            {"token_probs", Kind::RealArray},
                                            {"text", Kind::Text},
                                            {"seed", Kind::Int},
                                            {"reason", Kind::String},
                                            {"current", Kind::Bool}};

const std::vector<FieldSpec> kBranches = {{"nodes", Kind::ObjectArray, {}, &kBranchNode},
                                          {"conversation", Kind::AnyObject}};

struct LineSpec {
  const char* type;
  std::vector<FieldSpec> fields;  // besides "type" (and "seq", "t_us" for events)
};

// ---- event lines, generated from the field lists (trace_fields.h) ----------


template <class T>
const std::vector<FieldSpec>& spec_of();

std::vector<std::string> to_strings(std::span<const std::string_view> values) {
  return {values.begin(), values.end()};
}

// The schema entry of one member, from its C++ type and form (the same mapping
// as the writer, trace_json.cpp).
template <class M>
FieldSpec spec_for(const char* name, Form form, std::span<const std::string_view> allowed) {
  if constexpr (std::is_same_v<M, int32_t> || std::is_same_v<M, BlockId>) return {name, Kind::Int32};
  else if constexpr (std::is_same_v<M, int64_t>) return {name, Kind::Int};
  else if constexpr (std::is_same_v<M, uint64_t>) return {name, form == Form::Hash ? Kind::Hash : Kind::UInt};
  else if constexpr (std::is_same_v<M, RequestId>)
    return {name, form == Form::NoRequestIsNull ? Kind::NullOrUInt : Kind::UInt};
  else if constexpr (std::is_same_v<M, std::optional<RequestId>>) return {name, Kind::NullOrUInt};
  // Form::OmitWhenAbsent: written only with a value, so it may be absent.
  else if constexpr (std::is_same_v<M, std::optional<int32_t>>)
    return {name, Kind::NullOrInt32, {}, nullptr, form == Form::OmitWhenAbsent};
  else if constexpr (std::is_same_v<M, std::optional<std::string>>)
    return {name, Kind::String, {}, nullptr, form == Form::OmitWhenAbsent};
  else if constexpr (is_optional<M>) {  // an optional object, written only with a value
    static_assert(trace_fields::HasFields<typename M::value_type>, "no schema kind for this optional member");
    return {name, Kind::Object, {}, &spec_of<typename M::value_type>(), form == Form::OmitWhenAbsent};
  } else if constexpr (std::is_same_v<M, float> || std::is_same_v<M, double>) return {name, Kind::Real};
  else if constexpr (std::is_same_v<M, bool>) return {name, Kind::Bool};
  else if constexpr (std::is_same_v<M, std::string>)
    return {name, form == Form::Text ? Kind::Text : Kind::String, to_strings(allowed)};
  else if constexpr (std::is_enum_v<M>) return {name, Kind::String, trace_fields::enum_names<M>()};
  else if constexpr (std::is_same_v<M, std::vector<int32_t>>) return {name, Kind::Int32Array};
  else if constexpr (std::is_same_v<M, std::vector<float>>) return {name, Kind::RealArray};
  else if constexpr (std::is_same_v<M, std::vector<uint8_t>>) return {name, Kind::UInt8Array};
  else if constexpr (is_enum_vector<M>)
    return {name, Kind::NameArray, trace_fields::enum_names<typename M::value_type>()};
  else if constexpr (is_vector<M>) return {name, Kind::ObjectArray, {}, &spec_of<typename M::value_type>()};
  else {
    static_assert(trace_fields::HasFields<M>, "no schema kind for this member type");
    return {name, Kind::Object, {}, &spec_of<M>()};
  }
}

template <class T>
void append_specs(std::vector<FieldSpec>& out) {
  trace_fields::for_each_field<T>([&](const auto& entry) {
    using Entry = std::remove_cvref_t<decltype(entry)>;
    if constexpr (trace_fields::is_inline<Entry>) append_specs<typename Entry::member_type>(out);
    else out.push_back(spec_for<typename Entry::member_type>(entry.name.data(), entry.form, entry.allowed));
  });
}

// Built once per type; nested specs point into these (static lifetime).
template <class T>
const std::vector<FieldSpec>& spec_of() {
  static const std::vector<FieldSpec> spec = [] {
    std::vector<FieldSpec> out;
    append_specs<T>(out);
    return out;
  }();
  return spec;
}

// ---- the header's model and tokenizer objects (trace_header_fields.h) -------

template <class List>
void append_list_specs(std::vector<FieldSpec>& out, const List& list) {
  trace_header_fields::for_each(list, [&](const auto& entry) {
    using M = typename std::remove_cvref_t<decltype(entry)>::member_type;
    out.push_back(spec_for<M>(entry.name.data(), entry.form, entry.allowed));
  });
}

const std::vector<FieldSpec>& model_spec() {
  static const std::vector<FieldSpec> spec = [] {
    std::vector<FieldSpec> out;
    append_list_specs(out, trace_header_fields::kModelInfoFields);
    append_list_specs(out, trace_header_fields::kModelConfigFields);
    return out;
  }();
  return spec;
}

const std::vector<FieldSpec>& tokenizer_spec() {
  static const std::vector<FieldSpec> spec = [] {
    std::vector<FieldSpec> out;
    append_list_specs(out, trace_header_fields::kTokenizerFields);
    return out;
  }();
  return spec;
}

const std::vector<LineSpec>& line_specs() {
  static const std::vector<LineSpec> specs = {
      {"header",
       {{"format", Kind::String, {"glassbox-trace"}},
        {"schema_version", Kind::Int32},
        {"engine_version", Kind::String},
        {"created", Kind::String},
        {"seed", Kind::UInt},
        {"kv_block_size", Kind::Int32},
        {"kv_num_blocks", Kind::Int32},
        {"kv_types", Kind::String, {}, nullptr, true},
        {"model", Kind::Object, {}, &model_spec()},
        {"tokenizer", Kind::Object, {}, &tokenizer_spec()},
        {"sampler_settings", Kind::NullOrObjectOrString},
        {"branches", Kind::Object, {}, &kBranches, true}}},
  };
  static const std::vector<LineSpec> with_events = [] {
    std::vector<LineSpec> out = specs;
    trace_fields::for_each_alternative<TraceEventBody>([&](size_t, auto alternative) {
      using Body = typename decltype(alternative)::type;
      out.push_back({trace_fields::FieldsOf<Body>::type.data(), spec_of<Body>()});
    });
    return out;
  }();
  return with_events;
}

bool is_real(const json& j) {
  return j.is_number() || (j.is_string() && (j == "inf" || j == "-inf" || j == "nan"));
}
bool is_int_in(const json& j, int64_t lo, int64_t hi) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    return hi >= 0 && v <= static_cast<uint64_t>(hi) && (lo <= 0 || v >= static_cast<uint64_t>(lo));
  }
  return j.is_number_integer() && j.get<int64_t>() >= lo && j.get<int64_t>() <= hi;
}
bool is_lower_hex(const std::string& s, size_t exact_size) {
  if (exact_size != 0 && s.size() != exact_size) return false;
  if (s.size() % 2 != 0) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
bool all_of_array(const json& j, bool (*pred)(const json&)) {
  return j.is_array() && std::all_of(j.begin(), j.end(), pred);
}

std::string check_object(const json& j, const std::vector<FieldSpec>& fields, const std::string& path,
                         std::vector<std::string> extra_known);

// "" when `value` matches `spec`, else the problem.
std::string check_field(const json& value, const FieldSpec& spec, const std::string& path) {
  auto allowed = [&](const std::string& s) {
    return spec.allowed.empty() || std::find(spec.allowed.begin(), spec.allowed.end(), s) != spec.allowed.end();
  };
  const std::string where = path + spec.name;
  switch (spec.kind) {
    case Kind::UInt:
      if (!value.is_number_unsigned() && !is_int_in(value, 0, INT64_MAX)) return where + ": expected an integer >= 0";
      return {};
    case Kind::Int:
      if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX))
        return where + ": expected an integer";
      return {};
    case Kind::Int32:
      if (!is_int_in(value, INT32_MIN, INT32_MAX)) return where + ": expected a 32-bit integer";
      return {};
    case Kind::Real:
      if (!is_real(value)) return where + ": expected a number or \"inf\"/\"-inf\"/\"nan\"";
      return {};
    case Kind::Bool:
      if (!value.is_boolean()) return where + ": expected true or false";
      return {};
    case Kind::String:
    case Kind::Text:
      if (!value.is_string()) return where + ": expected a string";
      if (!allowed(value.get<std::string>())) return where + ": unexpected value " + value.dump();
      return {};
    case Kind::Hash:
      if (!value.is_string() || !is_lower_hex(value.get<std::string>(), 16))
        return where + ": expected 16 lowercase hex digits";
      return {};
    case Kind::NameArray:
      if (!value.is_array()) return where + ": expected an array";
      for (const json& x : value)
        if (!x.is_string() || !allowed(x.get<std::string>())) return where + ": unexpected element " + x.dump();
      return {};
    case Kind::Int32Array:
      if (!all_of_array(value, [](const json& x) { return is_int_in(x, INT32_MIN, INT32_MAX); }))
        return where + ": expected an array of 32-bit integers";
      return {};
    case Kind::RealArray:
      if (!all_of_array(value, is_real)) return where + ": expected an array of numbers";
      return {};
    case Kind::UInt8Array:
      if (!all_of_array(value, [](const json& x) { return is_int_in(x, 0, 255); }))
        return where + ": expected an array of integers in [0, 255]";
      return {};
    case Kind::NullOrUInt:
      if (!value.is_null() && !is_int_in(value, 0, INT64_MAX) && !value.is_number_unsigned())
        return where + ": expected null or an integer >= 0";
      return {};
    case Kind::NullOrInt32:
      if (!value.is_null() && !is_int_in(value, INT32_MIN, INT32_MAX)) return where + ": expected null or an integer";
      return {};
    case Kind::NullOrObjectOrString:
      if (!value.is_null() && !value.is_object() && !value.is_string())
        return where + ": expected an object, a string or null";
      return {};
    case Kind::NullOrReal:
      if (!value.is_null() && !is_real(value)) return where + ": expected null or a number";
      return {};
    case Kind::AnyObject:
      if (!value.is_object()) return where + ": expected an object";
      return {};
    case Kind::Object:
      if (!value.is_object()) return where + ": expected an object";
      return check_object(value, *spec.nested, where + ".", {});
    case Kind::ObjectArray:
      if (!value.is_array()) return where + ": expected an array";
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_object()) return where + "[" + std::to_string(i) + "]: expected an object";
        std::string problem = check_object(value[i], *spec.nested, where + "[" + std::to_string(i) + "].", {});
        if (!problem.empty()) return problem;
      }
      return {};
  }
  return where + ": unhandled field kind";
}

std::string check_object(const json& j, const std::vector<FieldSpec>& fields, const std::string& path,
                         std::vector<std::string> extra_known) {
  for (const FieldSpec& f : fields) {
    const auto it = j.find(f.name);
    if (it == j.end() && f.optional) continue;
    if (it == j.end()) return path + f.name + ": missing field";
    std::string problem = check_field(*it, f, path);
    if (!problem.empty()) return problem;
    if (f.kind == Kind::Text) {
      const std::string hex_key = std::string(f.name) + "_hex";
      const auto h = j.find(hex_key);
      if (h != j.end() && (!h->is_string() || !is_lower_hex(h->get<std::string>(), 0)))
        return path + hex_key + ": expected lowercase hex digits in pairs";
      extra_known.push_back(hex_key);
    }
  }
  for (const auto& item : j.items()) {
    const std::string& key = item.key();  // not a structured binding: clang 14 cannot capture those
    const bool documented =
        std::any_of(fields.begin(), fields.end(), [&](const FieldSpec& f) { return key == f.name; }) ||
        std::find(extra_known.begin(), extra_known.end(), key) != extra_known.end();
    if (!documented) return path + key + ": field not in the documented schema";
  }
  return {};
}

}  // namespace

Status validate_trace_json_line(const json& line) {
  if (!line.is_object()) return make_error("trace line: expected a JSON object");
  const auto type = line.find("type");
  if (type == line.end() || !type->is_string()) return make_error("trace line: missing string field \"type\"");
  const std::string name = type->get<std::string>();
  for (const LineSpec& spec : line_specs()) {
    if (name != spec.type) continue;
    std::vector<FieldSpec> fields = spec.fields;
    if (name != "header") {
      fields.insert(fields.begin(), {{"seq", Kind::UInt}, {"t_us", Kind::Int}});
    }
    std::string problem = check_object(line, fields, "", {"type"});
    if (!problem.empty()) return make_error(name + ": " + problem);
    return Status::success();
  }
  return make_error("trace line: unknown type \"" + name + "\"");
}

}  // namespace gb
