// JSON Lines writer and reader. The fixed leading keys are spliced in front of
// nlohmann's (sorted) dump of the rest so that a person reading the file sees
// what each line is first, while the output stays canonical.
#include "trace/trace_jsonl.h"

#include "core/exception_text.h"
#include "trace/trace_json.h"

namespace gb {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  // Strings are valid UTF-8 by construction (json_fields.h); replace is the guard
  // for a string field that escaped that rule, so writing never throws.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// `j` as one line with `first` keys (those present) leading, in that order.
std::string line_with_leading_keys(json j, std::initializer_list<const char*> first) {
  std::string out = "{";
  for (const char* key : first) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    if (out.size() > 1) out += ',';
    out += dump(json(key)) + ":" + dump(*it);
    j.erase(key);
  }
  if (!j.empty()) {
    const std::string rest = dump(j);  // "{...}"
    if (out.size() > 1) out += ',';
    out.append(rest, 1, rest.size() - 2);
  }
  out += '}';
  return out;
}

std::string at(const std::string& source, size_t line) { return source + ":" + std::to_string(line) + ": "; }

}  // namespace

std::string trace_header_line(const TraceHeader& header) {
  return line_with_leading_keys(trace_header_to_json(header), {"type", "format", "schema_version"});
}

std::string trace_event_line_from_tree(const TraceEvent& event) {
  return line_with_leading_keys(to_json(event), {"type", "seq", "t_us"});
}

std::string format_trace_jsonl(const TraceHeader& header, const std::vector<TraceEvent>& events) {
  std::string out = trace_header_line(header);
  out += '\n';
  for (const TraceEvent& e : events) {
    append_trace_event_line(out, e);
    out += '\n';
  }
  return out;
}

Status write_trace_jsonl(const std::string& path, const TraceHeader& header, const std::vector<TraceEvent>& events,
                         const AtomicWriteFailHook& hook) {
  return write_file_atomically(path, format_trace_jsonl(header, events), hook);
}

Result<TraceFile> parse_trace_jsonl(std::string_view text, const std::string& source) {
  TraceFile file;
  bool have_header = false;
  size_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_number;
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    // A last line without its newline may be cut short by a killed writer.
    const bool unterminated = end == text.size();
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return make_error(at(source, line_number) + "empty line (every line must be one JSON object)");

    json j;
    try {  // nlohmann reports syntax errors (parse_error) and numbers out of range (out_of_range) by exception
      j = json::parse(line);
    } catch (const json::exception& e) {
      if (unterminated && have_header) {
        file.warnings.push_back(at(source, line_number) + "the last line is incomplete (" + std::to_string(line.size()) +
                                " bytes without a newline: the writer was interrupted); skipped");
        break;
      }
      return make_error(at(source, line_number) + "not valid JSON: " + exception_sentence(e.what()));
    }
    if (!j.is_object()) return make_error(at(source, line_number) + "expected a JSON object");

    if (!have_header) {
      const auto type = j.find("type");
      if (type == j.end() || *type != "header")
        return make_error(at(source, line_number) + "expected the header line {\"type\":\"header\",\"format\":\"" +
                          kTraceFormatName + "\",...} first");
      auto header = trace_header_from_json(j);
      if (!header.ok()) return make_error(at(source, line_number) + header.error().message);
      file.header = std::move(header.value());
      have_header = true;
      continue;
    }
    auto event = trace_event_from_json(j);
    if (!event.ok()) return make_error(at(source, line_number) + event.error().message);
    if (!file.events.empty() && event.value().seq <= file.events.back().seq)
      return make_error(at(source, line_number) + "seq " + std::to_string(event.value().seq) + " after seq " +
                        std::to_string(file.events.back().seq) + ": events out of order");
    file.events.push_back(std::move(event.value()));
  }
  if (!have_header) return make_error(source + ": empty trace (no header line)");
  return file;
}

Result<TraceFile> read_trace_jsonl(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text.ok()) return text.error();
  return parse_trace_jsonl(text.value(), path);
}

}  // namespace gb
