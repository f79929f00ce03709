// TraceHeader: the first line of a JSON Lines trace — what produced the events
// (engine version, model file and its SHA-256, tokenizer, default sampler
// settings, seed, creation time), so a trace can be matched to its model and
// replayed. Format name "glassbox-trace", schema version kTraceSchemaVersion.
//
// JSON (keys of "model" flattened from ModelConfig; the model and tokenizer keys
// are listed once, in trace_header_fields.h):
//   {"type":"header","format":"glassbox-trace","schema_version":1,
//    "engine_version":"0.1.0","created":"2025-01-02T03:04:05Z","seed":42,
//    "model":{"path","name","sha256","format","architecture","dim",...,"tied_classifier"},
//    "tokenizer":{"kind","path","vocab_size","bos_id","eos_id"},
//    "sampler_settings":{...} | null,
//    "branches":{"nodes":[...],"conversation":{...}}}   (optional)
// Threads: plain values and pure functions. runtime/make_trace_header.h fills one
// from a loaded model and tokenizer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"
#include "model/model_config.h"

namespace gb {

struct SamplerSettings;

inline constexpr const char* kTraceFormatName = "glassbox-trace";

struct TraceModelInfo {
  std::string path;
  std::string name;
  std::string sha256;        // lowercase hex of the model file; "" when not computed
  std::string format;        // model_format_name: "GGUF", "llama2.c (version 1)", ...
  std::string architecture;  // e.g. "llama"
  ModelConfig config;        // shapes as loaded (context_length as asked for)
};

struct TraceTokenizerInfo {
  std::string kind;  // Tokenizer::kind(): "sentencepiece", "llama2c", "gguf-spm"; "" = none
  std::string path;  // tokenizer file, "" when embedded in the model
  int32_t vocab_size = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
};

struct TraceHeader {
  int schema_version = 1;        // kTraceSchemaVersion when written by this engine
  std::string engine_version;    // GLASSBOX_VERSION
  TraceModelInfo model;
  TraceTokenizerInfo tokenizer;
  std::string sampler_settings;  // JSON text of the default SamplerSettings, "" = none
  uint64_t seed = 0;
  std::string created;           // UTC, ISO 8601 "YYYY-MM-DDTHH:MM:SSZ"
  int32_t kv_block_size = 0;     // tokens per KV block of the run; 0 = not recorded
  int32_t kv_num_blocks = 0;     // blocks in the KV pool (lookahead reserve included); 0 = not recorded
  std::string kv_types;          // the pool's K/V types, "f16/f16" (kv_types_name); "" = not recorded (F32 then)
  // The workbench's branch tree and conversation at export time, as JSON
  // object text (docs/trace-format.md, "branches"); "" = none (absent in the
  // file). The engine keeps it verbatim; the workbench writes and reads it.
  std::string branches;
};

nlohmann::json trace_header_to_json(const TraceHeader& header);
// Checks "type" == "header", "format" and that schema_version is one this reader
// knows (newer versions are refused with a message saying so).
Result<TraceHeader> trace_header_from_json(const nlohmann::json& j);
// Whether two headers agree on everything a trace records (ModelConfig members
// outside trace_header_fields.h's list are not recorded, so not compared).
bool same_recorded_header(const TraceHeader& a, const TraceHeader& b);

// Current UTC time as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_timestamp_now();

}  // namespace gb
