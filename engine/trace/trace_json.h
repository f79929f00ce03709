// JSON form of TraceEvent: one JSON object per event, loss-free. Every field of
// every event type is written, and trace_event_from_json(to_json(e)) == e for any
// event e, bit for bit (floats included, see json_fields.h for the encoding of
// real numbers and of text that is not UTF-8). docs/trace-format.md documents the
// fields, their units and the compatibility rules.
//
// Common keys: "type" (trace_event_type), "seq", "t_us". Optional ids are null
// when absent. Readers ignore keys they do not know (a newer writer of the same
// schema version may add fields); validate_trace_json_line (trace_schema.h) is
// the strict check that a writer emits exactly the documented fields.
// Threads: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "trace/trace_event.h"

namespace gb {

nlohmann::json to_json(const TraceEvent& event);
// Errors name the offending field ("token_sampled: record.top[2].logit: expected
// a number"); the caller adds the file and line.
Result<TraceEvent> trace_event_from_json(const nlohmann::json& j);

nlohmann::json token_record_to_json(const TokenRecord& record);
Result<TokenRecord> token_record_from_json(const nlohmann::json& j);

// Field-by-field equality (floats compared by bits, so NaN == NaN), for tests and
// for checking a round trip.
bool trace_events_equal(const TraceEvent& a, const TraceEvent& b);

// TokenOrigin from its name ("plain", "accepted", ...).
std::optional<TokenOrigin> parse_token_origin(std::string_view name);
std::optional<KvEventKind> parse_kv_event_kind(std::string_view name);

}  // namespace gb
