// Trace JSON Lines import, as `glassbox-cli trace` and the workbench's replay
// read a file: parse_trace_jsonl (header, version and order rules, a cut-off last
// line), then what is done with the events: the summary (text and JSON), the
// Chrome trace export, and the strict per-line schema check of `trace validate`.
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz_support.h"
#include "trace/chrome_trace.h"
#include "trace/trace_jsonl.h"
#include "trace/trace_schema.h"
#include "trace/trace_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const nlohmann::json j = nlohmann::json::parse(text.substr(pos, end - pos), nullptr, false);
    if (!j.is_discarded()) (void)gb::validate_trace_json_line(j);
    pos = end + 1;
  }
  auto file = gb::parse_trace_jsonl(text, "fuzz.jsonl");
  if (!file.ok()) return 0;
  const gb::TraceSummary summary = gb::summarize(file->events);
  (void)gb::trace_summary_to_json(summary).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)gb::format_trace_summary(summary);
  (void)gb::chrome_trace_json(file->header, file->events).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // What was read writes back as lines the reader accepts again.
  auto again = gb::parse_trace_jsonl(gb::format_trace_jsonl(file->header, file->events), "rewritten.jsonl");
  if (!again.ok()) gbfuzz::fuzz_fail("a trace read back from its own rewrite failed: " + again.error().message);
  if (again->events.size() != file->events.size()) gbfuzz::fuzz_fail("the rewritten trace has a different event count");
  return 0;
}
