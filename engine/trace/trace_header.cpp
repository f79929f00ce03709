// TraceHeader <-> JSON (runtime/make_trace_header.cpp fills one from a loaded model).
#include "trace/trace_header.h"

#include <bit>
#include <ctime>
#include <type_traits>

#include "sampling/sampler_settings.h"
#include "sampling/sampler_settings_json.h"
#include "trace/json_fields.h"
#include "trace/trace_event.h"
#include "trace/trace_header_fields.h"

namespace gb {

using nlohmann::json;
using trace_fields::Form;
using trace_header_fields::kModelConfigFields;
using trace_header_fields::kModelInfoFields;
using trace_header_fields::kTokenizerFields;
using trace_json::FieldReader;
using trace_json::real;

namespace {

// The writer, reader and equality of one list (trace_header_fields.h), by
// member type: string (Form::Text guarded), int32, float (exact real), bool.
template <class M>
inline constexpr bool is_listed_type =
    std::is_same_v<M, std::string> || std::is_same_v<M, int32_t> || std::is_same_v<M, float> || std::is_same_v<M, bool>;

template <class T, class List>
void write_list(json& j, const T& value, const List& list) {
  trace_header_fields::for_each(list, [&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::member_type;
    static_assert(is_listed_type<M>, "trace_header_fields.h: no JSON form for this member type");
    const M& m = value.*f.ptr;
    const std::string key(f.name);
    if constexpr (std::is_same_v<M, std::string>) {
      if (f.form == Form::Text) trace_json::put_text(j, key, m);  // paths come from the file system
      else j[key] = m;
    } else if constexpr (std::is_same_v<M, float>) {
      j[key] = real(m);
    } else {
      j[key] = m;
    }
  });
}

// In list order, so the first problem reported is the first listed.
template <class T, class List>
void read_list(FieldReader& r, T& value, const List& list) {
  trace_header_fields::for_each(list, [&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::member_type;
    const std::string key(f.name);
    M& m = value.*f.ptr;
    if constexpr (std::is_same_v<M, std::string>) m = f.form == Form::Text ? r.text(key.c_str()) : r.str(key.c_str());
    else if constexpr (std::is_same_v<M, int32_t>) m = r.i32(key.c_str());
    else if constexpr (std::is_same_v<M, float>) m = r.f32(key.c_str());
    else m = r.boolean(key.c_str());
  });
}

// Floats compare by bits: a NaN read back equals the NaN written.
template <class T, class List>
bool same_list(const T& a, const T& b, const List& list) {
  bool same = true;
  trace_header_fields::for_each(list, [&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::member_type;
    if constexpr (std::is_same_v<M, float>) same = same && std::bit_cast<uint32_t>(a.*f.ptr) == std::bit_cast<uint32_t>(b.*f.ptr);
    else same = same && a.*f.ptr == b.*f.ptr;
  });
  return same;
}

}  // namespace

json trace_header_to_json(const TraceHeader& h) {
  json model = json::object();
  write_list(model, h.model, kModelInfoFields);
  write_list(model, h.model.config, kModelConfigFields);
  json tokenizer = json::object();
  write_list(tokenizer, h.tokenizer, kTokenizerFields);
  // The settings are embedded as an object so readers need not parse a string;
  // text that is not JSON (never written by the engine) is kept as a string.
  json settings = nullptr;
  if (!h.sampler_settings.empty()) {
    settings = json::parse(h.sampler_settings, nullptr, false);
    if (settings.is_discarded() || !settings.is_object()) settings = h.sampler_settings;
  }
  json out = {{"type", "header"},
          {"format", kTraceFormatName},
          {"schema_version", h.schema_version},
          {"engine_version", h.engine_version},
          {"created", h.created},
          {"seed", h.seed},
          {"kv_block_size", h.kv_block_size},
          {"kv_num_blocks", h.kv_num_blocks},
          {"model", model},
          {"tokenizer", tokenizer},
          {"sampler_settings", settings}};
  if (!h.kv_types.empty()) out["kv_types"] = h.kv_types;
  if (!h.branches.empty()) {
    json branches = json::parse(h.branches, nullptr, false);
    if (!branches.is_discarded() && branches.is_object()) out["branches"] = std::move(branches);
  }
  return out;
}

Result<TraceHeader> trace_header_from_json(const json& j) {
  FieldReader r(j, "header");
  TraceHeader h;
  if (r.str("type") != "header" && r.ok()) r.fail("type", "the first line must be the header");
  const std::string format = r.str("format");
  if (r.ok() && format != kTraceFormatName)
    r.fail("format", "expected \"" + std::string(kTraceFormatName) + "\", got \"" + format + "\"");
  h.schema_version = r.i32("schema_version");
  if (r.ok() && h.schema_version > kTraceSchemaVersion)
    return make_error("trace schema version " + std::to_string(h.schema_version) + " is newer than this reader (" +
                      std::to_string(kTraceSchemaVersion) + "); update glassbox");
  if (r.ok() && h.schema_version < 1) r.fail("schema_version", "must be >= 1");
  h.engine_version = r.str("engine_version");
  h.created = r.str("created");
  h.seed = r.u64("seed");
  // Added after the first traces were written: absent means "not recorded".
  h.kv_block_size = static_cast<int32_t>(r.optional_i64("kv_block_size", 0, 1 << 20).value_or(0));
  h.kv_num_blocks = static_cast<int32_t>(r.optional_i64("kv_num_blocks", 0, int64_t{1} << 30).value_or(0));
  if (j.contains("kv_types")) h.kv_types = r.str("kv_types");
  if (const json* m = r.object("model")) {
    FieldReader mr(*m, "header.model");
    read_list(mr, h.model, kModelInfoFields);
    read_list(mr, h.model.config, kModelConfigFields);
    h.model.config.architecture = h.model.architecture;
    r.absorb(mr);
  }
  if (const json* t = r.object("tokenizer")) {
    FieldReader tr(*t, "header.tokenizer");
    read_list(tr, h.tokenizer, kTokenizerFields);
    r.absorb(tr);
  }
  const auto it = j.is_object() ? j.find("sampler_settings") : j.end();
  if (it == j.end()) r.fail("sampler_settings", "missing field");
  else if (it->is_string()) h.sampler_settings = it->get<std::string>();
  else if (it->is_object()) h.sampler_settings = it->dump();
  else if (!it->is_null()) r.fail("sampler_settings", "expected an object, a string or null");
  // Optional (workbench exports): kept verbatim for the workbench to read.
  if (const auto b = j.is_object() ? j.find("branches") : j.end(); b != j.end()) {
    if (b->is_object()) h.branches = b->dump();
    else r.fail("branches", "expected an object");
  }
  if (!r.ok()) return make_error(r.error());
  return h;
}

bool same_recorded_header(const TraceHeader& a, const TraceHeader& b) {
  return a.schema_version == b.schema_version && a.engine_version == b.engine_version &&
         a.sampler_settings == b.sampler_settings && a.seed == b.seed && a.created == b.created &&
         a.kv_block_size == b.kv_block_size && a.kv_num_blocks == b.kv_num_blocks && a.kv_types == b.kv_types &&
         a.branches == b.branches &&
         same_list(a.model, b.model, kModelInfoFields) && same_list(a.model.config, b.model.config, kModelConfigFields) &&
         same_list(a.tokenizer, b.tokenizer, kTokenizerFields);
}

std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace gb
