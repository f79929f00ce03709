// validate_trace_json_line: the strict check that one JSON Lines trace line (a
// header or an event object) has exactly the fields docs/trace-format.md lists,
// with the documented JSON types and enumerated values. It is written from the
// documented schema as a table, independently of the reader in
// trace_json_parse.cpp, so tests can hold the writer to the document.
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
