// `glassbox-cli trace ...`: work with recorded JSON Lines traces
// (docs/trace-format.md) without a model:
//   trace summary FILE.jsonl [--json]      latency, throughput, entropy, stage removals
//   trace export-chrome IN.jsonl OUT.json  Chrome Trace Event JSON for Perfetto / chrome://tracing
//   trace validate FILE.jsonl              every line against the documented schema
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "core/atomic_file.h"
#include "trace/chrome_trace.h"
#include "trace/trace_jsonl.h"
#include "trace/trace_schema.h"
#include "trace/trace_summary.h"

namespace gb::cli {
namespace {

struct TraceArgs {
  std::string input;
  std::string output;
  bool json = false;
  CLI::App* summary = nullptr;
  CLI::App* export_chrome = nullptr;
  CLI::App* validate = nullptr;
};

// Reads the trace; what the reader skipped (a last line cut short by a killed
// writer) is said on stderr.
Result<TraceFile> read_trace_warning(const std::string& path) {
  auto file = read_trace_jsonl(path);
  if (file)
    for (const std::string& w : file->warnings) std::fprintf(stderr, "glassbox-cli: warning: %s\n", w.c_str());
  return file;
}

int run_summary(const TraceArgs& a) {
  auto file = read_trace_warning(a.input);
  if (!file) return fail(file.error().message);
  const TraceSummary summary = summarize(file->events);
  if (a.json) {
    nlohmann::json j = trace_summary_to_json(summary);
    j["file"] = a.input;
    j["model"] = file->header.model.name;
    std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  const TraceHeader& h = file->header;
  std::printf("trace           %s (schema %d, engine %s, created %s)\n", a.input.c_str(), h.schema_version,
              h.engine_version.c_str(), h.created.c_str());
  std::printf("model           %s (%s)%s%s\n", h.model.name.c_str(), h.model.format.c_str(),
              h.model.sha256.empty() ? "" : " sha256 ", h.model.sha256.c_str());
  std::fputs(format_trace_summary(summary).c_str(), stdout);
  return 0;
}

int run_export_chrome(const TraceArgs& a) {
  auto file = read_trace_warning(a.input);
  if (!file) return fail(file.error().message);
  const Status s = write_chrome_trace(a.output, file->header, file->events);
  if (!s) return fail(s.error().message);
  std::printf("wrote %s from %zu events (open in https://ui.perfetto.dev or chrome://tracing)\n", a.output.c_str(),
              file->events.size());
  return 0;
}

// Strict check of each line (the importer ignores unknown fields; this does not).
int run_validate(const TraceArgs& a) {
  auto text = read_whole_file(a.input);
  if (!text) return fail(text.error().message);
  size_t line_number = 0, pos = 0;
  const std::string& t = text.value();
  while (pos < t.size()) {
    ++line_number;
    size_t end = t.find('\n', pos);
    if (end == std::string::npos) end = t.size();
    const nlohmann::json j = nlohmann::json::parse(t.substr(pos, end - pos), nullptr, false);
    pos = end + 1;
    if (j.is_discarded()) return fail(a.input + ":" + std::to_string(line_number) + ": not valid JSON");
    const Status s = validate_trace_json_line(j);
    if (!s) return fail(a.input + ":" + std::to_string(line_number) + ": " + s.error().message);
  }
  auto file = parse_trace_jsonl(t, a.input);  // order, header and version rules
  if (!file) return fail(file.error().message);
  std::printf("%s: %zu lines valid (schema version %d)\n", a.input.c_str(), line_number, file->header.schema_version);
  return 0;
}

const CommandRegistrar trace_command(
    "trace", "Summarize, convert or validate a recorded JSON Lines trace", [](CLI::App& sub) -> CommandRunner {
      auto a = std::make_shared<TraceArgs>();
      sub.require_subcommand(1);
      a->summary = sub.add_subcommand("summary", "Per-request and overall TTFT, TPOT, tokens/s, entropy, stage removals");
      a->summary->add_option("file", a->input, "Trace file (.jsonl)")->required();
      a->summary->add_flag("--json", a->json, "Print the summary as JSON");
      a->export_chrome = sub.add_subcommand("export-chrome", "Convert to Chrome Trace Event JSON (Perfetto)");
      a->export_chrome->add_option("input", a->input, "Trace file (.jsonl)")->required();
      a->export_chrome->add_option("output", a->output, "Chrome trace to write (.json)")->required();
      a->validate = sub.add_subcommand("validate", "Check every line against the documented trace schema");
      a->validate->add_option("file", a->input, "Trace file (.jsonl)")->required();
      return [a] {
        if (a->summary->parsed()) return run_summary(*a);
        if (a->export_chrome->parsed()) return run_export_chrome(*a);
        if (a->validate->parsed()) return run_validate(*a);
        return fail("trace: choose summary, export-chrome or validate");
      };
    });

}  // namespace
}  // namespace gb::cli
