// JSON Lines trace files: line 1 is the TraceHeader, then one line per event in
// stream order (docs/trace-format.md). Each line is one JSON object whose first
// keys are "type", then "seq" and "t_us" for events ("format", "schema_version"
// for the header), then the remaining keys in byte order — so the same events
// always give the same bytes, and export -> import -> export is byte-identical.
//
// write_trace_jsonl is atomic (atomic_file.h): a failed write leaves an existing
// file untouched; TraceWriter (trace_writer.h) writes the same lines as events
// happen. Reading reports the first problem as "FILE:LINE: problem" (bad JSON,
// missing header, newer schema version, unknown event type, bad field, seq out
// of order), except a last line without its newline that does not parse -- what
// a killed streaming writer leaves -- which is skipped with a warning.
// Threads: pure functions plus file I/O; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/result.h"
#include "trace/trace_event.h"
#include "trace/trace_header.h"

namespace gb {

struct TraceFile {
  TraceHeader header;
  std::vector<TraceEvent> events;
  // Problems that did not stop the reading, as "FILE:LINE: ..." (a last line
  // cut short by a writer that was killed: skipped).
  std::vector<std::string> warnings;
};

// One line without the trailing newline.
std::string trace_header_line(const TraceHeader& header);
// Event lines are written straight from the field lists (trace_json_line.cpp),
// the same bytes as nlohmann's sorted dump of to_json(event) with the leading
// keys first, in about 40% of the time (the engine thread writes one per token).
std::string trace_event_line(const TraceEvent& event);
void append_trace_event_line(std::string& out, const TraceEvent& event);
// The reference form of trace_event_line: to_json(event) dumped by nlohmann
// (tests compare the two).
std::string trace_event_line_from_tree(const TraceEvent& event);

// The whole file: header line, event lines, each ending in "\n".
std::string format_trace_jsonl(const TraceHeader& header, const std::vector<TraceEvent>& events);

Status write_trace_jsonl(const std::string& path, const TraceHeader& header, const std::vector<TraceEvent>& events,
                         const AtomicWriteFailHook& hook = {});

// `source` names the text in messages (normally the file path).
Result<TraceFile> parse_trace_jsonl(std::string_view text, const std::string& source);
Result<TraceFile> read_trace_jsonl(const std::string& path);

}  // namespace gb
