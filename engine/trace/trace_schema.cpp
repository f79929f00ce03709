// The documented schema as data: one FieldSpec list per line type. Keep these
// tables and docs/trace-format.md in step; a change to either is a schema change.
#include "trace/trace_schema.h"

#include <algorithm>
#include <string>
#include <vector>

namespace gb {
namespace {

using nlohmann::json;

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

const std::vector<std::string> kStageNames = {"penalties", "dry",   "logit_bias", "top_k",      "typical_p",
                                              "top_p",     "min_p", "xtc",        "temperature"};

const std::vector<FieldSpec> kCandidate = {{"id", Kind::Int32},
                                           {"logit", Kind::Real},
                                           {"prob_before", Kind::Real},
                                           {"prob_after_stage", Kind::RealArray},
                                           {"removed_by_stage", Kind::Int32}};

const std::vector<FieldSpec> kRecord = {
    {"stages", Kind::NameArray, kStageNames},
    {"stage_active", Kind::UInt8Array},
    {"num_candidates_after_stage", Kind::Int32Array},
    {"num_candidates_before", Kind::Int32},
    {"top", Kind::ObjectArray, {}, &kCandidate},
    {"entropy_before", Kind::Real},
    {"entropy_after", Kind::Real},
    {"chosen", Kind::Int32},
    {"chosen_logit", Kind::Real},
    {"chosen_prob_before", Kind::Real},
    {"chosen_prob", Kind::Real},
    {"chosen_rank", Kind::Int32},
    {"rng_counter", Kind::UInt},
    {"draw", Kind::Real},
    {"xtc_draw", Kind::Real},
    {"xtc_fired", Kind::Bool},
    {"forward_ms", Kind::Real},
    {"sample_ms", Kind::Real}};

const std::vector<FieldSpec> kModel = {
    {"path", Kind::Text},           {"name", Kind::Text},           {"sha256", Kind::String},
    {"format", Kind::String},       {"architecture", Kind::String}, {"dim", Kind::Int32},
    {"hidden_dim", Kind::Int32},    {"num_layers", Kind::Int32},    {"num_heads", Kind::Int32},
    {"num_kv_heads", Kind::Int32},  {"head_dim", Kind::Int32},      {"rope_dim", Kind::Int32},
    {"vocab_size", Kind::Int32},    {"context_length", Kind::Int32}, {"rope_freq_base", Kind::Real},
    {"rms_eps", Kind::Real},        {"tied_classifier", Kind::Bool}};

const std::vector<FieldSpec> kTokenizer = {{"kind", Kind::String},
                                           {"path", Kind::Text},
                                           {"vocab_size", Kind::Int32},
                                           {"bos_id", Kind::Int32},
                                           {"eos_id", Kind::Int32}};

// The workbench's branch tree (header "branches"; ui/branch_tree.h writes it).
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
        {"model", Kind::Object, {}, &kModel},
        {"tokenizer", Kind::Object, {}, &kTokenizer},
        {"sampler_settings", Kind::NullOrObjectOrString},
        {"branches", Kind::Object, {}, &kBranches, true}}},
      {"request_submitted",
       {{"request", Kind::UInt},
        {"prompt_ids", Kind::Int32Array},
        {"max_tokens", Kind::Int32},
        {"priority", Kind::String, {"interactive", "batch"}},
        {"sampler_settings", Kind::Text},
        {"parent", Kind::NullOrUInt},
        {"fork_position", Kind::Int32}}},
      {"request_admitted", {{"request", Kind::UInt}, {"num_cached_tokens", Kind::Int32}, {"queue_ms", Kind::Real}}},
      {"prefill_chunk",
       {{"request", Kind::UInt}, {"step", Kind::Int}, {"start_position", Kind::Int32}, {"num_tokens", Kind::Int32}}},
      {"token_sampled",
       {{"request", Kind::UInt},
        {"step", Kind::Int},
        {"position", Kind::Int32},
        {"index", Kind::Int32},
        {"token", Kind::Int32},
        {"text", Kind::Text},
        {"origin", Kind::String, {"plain", "accepted", "resampled", "bonus", "forced"}},
        {"record", Kind::Object, {}, &kRecord}}},
      {"request_preempted", {{"request", Kind::UInt}, {"step", Kind::Int}}},
      {"request_finished",
       {{"request", Kind::UInt},
        {"reason", Kind::String, {"stop", "max_tokens", "length", "cancelled", "error"}},
        {"num_prompt_tokens", Kind::Int32},
        {"num_generated", Kind::Int32},
        {"num_cached_tokens", Kind::Int32},
        {"ttft_ms", Kind::Real},
        {"tpot_ms", Kind::Real},
        {"e2e_ms", Kind::Real},
        {"text", Kind::Text}}},
      {"step",
       {{"step", Kind::Int},
        {"start_ms", Kind::Real},
        {"schedule_ms", Kind::Real},
        {"forward_ms", Kind::Real},
        {"sample_ms", Kind::Real},
        {"num_seqs", Kind::Int32},
        {"num_prefill_tokens", Kind::Int32},
        {"num_decode_tokens", Kind::Int32},
        {"num_running", Kind::Int32},
        {"num_waiting", Kind::Int32},
        {"num_blocks_owned", Kind::Int32},
        {"num_blocks_free", Kind::Int32},
        {"num_blocks_cached", Kind::Int32},
        {"num_blocks_total", Kind::Int32},
        {"num_prefix_hit_tokens", Kind::Int32},
        {"num_preemptions", Kind::Int32}}},
      {"kv",
       {{"step", Kind::Int},
        {"kind", Kind::String,
         {"allocated", "evicted", "cached", "prefix_hit", "shared", "copied", "released", "freed", "uncached"}},
        {"block", Kind::Int32},
        {"request", Kind::NullOrUInt},
        {"other_block", Kind::Int32},
        {"ref_count", Kind::Int32},
        {"hash", Kind::Hash}}},
      {"speculative",
       {{"request", Kind::UInt},
        {"step", Kind::Int},
        {"drafter", Kind::String},
        {"drafted", Kind::Int32Array},
        {"q", Kind::RealArray},
        {"p", Kind::RealArray},
        {"num_accepted", Kind::Int32},
        {"rejected", Kind::NullOrInt32},
        {"next", Kind::Int32},
        {"bonus", Kind::Bool},
        {"draft_ms", Kind::Real},
        {"verify_ms", Kind::Real}}},
      {"error", {{"request", Kind::NullOrUInt}, {"message", Kind::Text}}},
  };
  return specs;
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
  for (const auto& [key, value] : j.items()) {
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
