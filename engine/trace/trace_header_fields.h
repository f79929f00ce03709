// The trace header's "model" and "tokenizer" objects, listed once: each entry is
// (JSON key, member pointer, form), the same Field entries trace_fields.h uses
// for the events. The header writer and reader (trace_header.cpp), the schema
// (trace_schema.cpp) and same_recorded_header() walk these lists, so a field
// added here is written, read, validated and compared; docs/trace-format.md
// documents it.
//
//   "model":     kModelInfoFields (TraceModelInfo's own members), then
//                kModelConfigFields (the ModelConfig members a trace records,
//                flattened into the same object)
//   "tokenizer": kTokenizerFields
//
// ModelConfig members not listed (rope style, activation, ...) are not recorded
// by schema version 1: a reader gets their defaults.
//
// Member types and their JSON (docs/trace-format.md, "Encoding rules"):
// std::string -> string (Form::Text: UTF-8 guarded with `<key>_hex`), int32_t ->
// i32, float -> real, bool -> bool.
// Threads: compile-time data only.
#pragma once

#include <tuple>

#include "trace/trace_fields.h"
#include "trace/trace_header.h"

namespace gb::trace_header_fields {

using trace_fields::field;
using trace_fields::Form;

inline constexpr auto kModelInfoFields = std::tuple{
    field("path", &TraceModelInfo::path, Form::Text), field("name", &TraceModelInfo::name, Form::Text),
    field("sha256", &TraceModelInfo::sha256),         field("format", &TraceModelInfo::format),
    field("architecture", &TraceModelInfo::architecture)};

inline constexpr auto kModelConfigFields = std::tuple{
    field("dim", &ModelConfig::dim),
    field("hidden_dim", &ModelConfig::hidden_dim),
    field("num_layers", &ModelConfig::num_layers),
    field("num_heads", &ModelConfig::num_heads),
    field("num_kv_heads", &ModelConfig::num_kv_heads),
    field("head_dim", &ModelConfig::head_dim),
    field("rope_dim", &ModelConfig::rope_dim),
    field("vocab_size", &ModelConfig::vocab_size),
    field("context_length", &ModelConfig::context_length),
    field("rope_freq_base", &ModelConfig::rope_freq_base),
    field("rms_eps", &ModelConfig::rms_eps),
    field("tied_classifier", &ModelConfig::tied_classifier)};

inline constexpr auto kTokenizerFields = std::tuple{
    field("kind", &TraceTokenizerInfo::kind),       field("path", &TraceTokenizerInfo::path, Form::Text),
    field("vocab_size", &TraceTokenizerInfo::vocab_size), field("bos_id", &TraceTokenizerInfo::bos_id),
    field("eos_id", &TraceTokenizerInfo::eos_id)};

// Calls fn(entry) for each entry of a list, in order.
template <class List, class Fn>
constexpr void for_each(const List& list, Fn&& fn) {
  std::apply([&](const auto&... entry) { (fn(entry), ...); }, list);
}

// Every member of TraceModelInfo except `config` and every member of
// TraceTokenizerInfo is listed (a struct member without an entry fails to
// compile here); config is the ModelConfig subset above.
inline constexpr auto checked = std::tuple{
    &trace_fields::tie_members<std::tuple_size_v<decltype(kModelInfoFields)> + 1, TraceModelInfo>,
    &trace_fields::tie_members<std::tuple_size_v<decltype(kTokenizerFields)>, TraceTokenizerInfo>};

}  // namespace gb::trace_header_fields
