// TraceHeader <-> JSON (runtime/make_trace_header.cpp fills one from a loaded model).
#include "trace/trace_header.h"

#include <ctime>

#include "sampling/sampler_settings.h"
#include "sampling/sampler_settings_json.h"
#include "trace/json_fields.h"
#include "trace/trace_event.h"

namespace gb {

using nlohmann::json;
using trace_json::FieldReader;
using trace_json::real;

json trace_header_to_json(const TraceHeader& h) {
  const ModelConfig& c = h.model.config;
  json model = {{"path", h.model.path},
                {"name", h.model.name},
                {"sha256", h.model.sha256},
                {"format", h.model.format},
                {"architecture", h.model.architecture},
                {"dim", c.dim},
                {"hidden_dim", c.hidden_dim},
                {"num_layers", c.num_layers},
                {"num_heads", c.num_heads},
                {"num_kv_heads", c.num_kv_heads},
                {"head_dim", c.head_dim},
                {"rope_dim", c.rope_dim},
                {"vocab_size", c.vocab_size},
                {"context_length", c.context_length},
                {"rope_freq_base", real(static_cast<double>(c.rope_freq_base))},
                {"rms_eps", real(static_cast<double>(c.rms_eps))},
                {"tied_classifier", c.tied_classifier}};
  // model.path / name come from the file system and the file: guard them too.
  trace_json::put_text(model, "path", h.model.path);
  trace_json::put_text(model, "name", h.model.name);
  json tokenizer = {{"kind", h.tokenizer.kind},
                    {"vocab_size", h.tokenizer.vocab_size},
                    {"bos_id", h.tokenizer.bos_id},
                    {"eos_id", h.tokenizer.eos_id}};
  trace_json::put_text(tokenizer, "path", h.tokenizer.path);
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
  if (const json* m = r.object("model")) {
    FieldReader mr(*m, "header.model");
    ModelConfig& c = h.model.config;
    h.model.path = mr.text("path");
    h.model.name = mr.text("name");
    h.model.sha256 = mr.str("sha256");
    h.model.format = mr.str("format");
    h.model.architecture = mr.str("architecture");
    c.architecture = h.model.architecture;
    c.dim = mr.i32("dim");
    c.hidden_dim = mr.i32("hidden_dim");
    c.num_layers = mr.i32("num_layers");
    c.num_heads = mr.i32("num_heads");
    c.num_kv_heads = mr.i32("num_kv_heads");
    c.head_dim = mr.i32("head_dim");
    c.rope_dim = mr.i32("rope_dim");
    c.vocab_size = mr.i32("vocab_size");
    c.context_length = mr.i32("context_length");
    c.rope_freq_base = mr.f32("rope_freq_base");
    c.rms_eps = mr.f32("rms_eps");
    c.tied_classifier = mr.boolean("tied_classifier");
    r.absorb(mr);
  }
  if (const json* t = r.object("tokenizer")) {
    FieldReader tr(*t, "header.tokenizer");
    h.tokenizer.kind = tr.str("kind");
    h.tokenizer.path = tr.text("path");
    h.tokenizer.vocab_size = tr.i32("vocab_size");
    h.tokenizer.bos_id = tr.i32("bos_id");
    h.tokenizer.eos_id = tr.i32("eos_id");
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

std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace gb
