// TraceWriter: a JSON Lines trace written as it happens (docs/trace-format.md).
// open() truncates the file and writes the header line at once; append() adds
// one event line to a buffer that goes to the file (write(2), so it survives a
// crash or kill of this process) as soon as flush_interval has passed since
// the last write, and whenever the buffer passes max_buffer_bytes; flush()
// writes it now (callers call it when they go idle); close() flushes and
// fsyncs. A process killed while writing therefore loses at most the last
// flush_interval of events, and may leave a last line cut short:
// parse_trace_jsonl skips such a line and says so (TraceFile::warnings).
//
// The lines are exactly those of format_trace_jsonl, so a closed streamed file
// equals write_trace_jsonl of the same events byte for byte.
//
// Thread: one thread at a time (the engine thread that owns it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/result.h"
#include "trace/trace_event.h"
#include "trace/trace_header.h"

namespace gb {

struct TraceWriterOptions {
  double flush_interval_s = 1.0;
  size_t max_buffer_bytes = size_t{1} << 20;
  // Seconds on a monotonic clock; empty: std::chrono::steady_clock (tests pass a fake).
  std::function<double()> clock_s;
};

class TraceWriter {
 public:
  // Errors name the path and the failing step.
  static Result<std::unique_ptr<TraceWriter>> open(const std::string& path, const TraceHeader& header,
                                                   TraceWriterOptions options = {});
  ~TraceWriter();  // close(); an error there is lost (call close() to see it)
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  Status append(const TraceEvent& event);
  Status flush();
  // flush() if flush_interval has passed since the last write, else nothing.
  Status flush_if_due();
  Status close();

  bool has_buffered() const { return !buffer_.empty(); }  // lines not yet written
  const std::string& path() const { return path_; }
  int64_t num_events() const { return num_events_; }
  int64_t num_bytes_written() const { return num_written_; }

 private:
  TraceWriter(std::string path, int fd, TraceWriterOptions options);
  double now() const;

  std::string path_;
  int fd_ = -1;
  TraceWriterOptions options_;
  std::string buffer_;
  double last_write_s_ = 0.0;
  int64_t num_events_ = 0;
  int64_t num_written_ = 0;
};

}  // namespace gb
