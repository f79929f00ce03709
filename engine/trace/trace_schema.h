// validate_trace_json_line: the strict check that one JSON Lines trace line (a
// header or an event object) has exactly the fields docs/trace-format.md lists,
// with the documented JSON types and enumerated values. The header's table is
// written by hand; the events' tables are generated from trace_fields.h (the
// lists the writer and reader walk), and tests hold them to a frozen trace file
// (tests/data/trace/every_event_v1.jsonl) that the hand-written code produced.
//
// Stricter than the importer on purpose: unknown fields are errors here (a
// writer must document what it adds), while readers ignore them.
// Threads: pure function.
#pragma once

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace gb {

Status validate_trace_json_line(const nlohmann::json& line);

}  // namespace gb
