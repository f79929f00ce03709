#include "trace/trace_writer.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "trace/trace_jsonl.h"

namespace gb {

Result<std::unique_ptr<TraceWriter>> TraceWriter::open(const std::string& path, const TraceHeader& header,
                                                      TraceWriterOptions options) {
  if (path.empty()) return make_error("cannot write a trace to an empty path");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(path + ": cannot create the trace file: " + std::strerror(errno));
  std::unique_ptr<TraceWriter> w(new TraceWriter(path, fd, std::move(options)));
  w->buffer_ = trace_header_line(header) + "\n";
  GB_TRY(w->flush());  // the header is there at once: even an empty session reopens
  return w;
}

TraceWriter::TraceWriter(std::string path, int fd, TraceWriterOptions options)
    : path_(std::move(path)), fd_(fd), options_(std::move(options)) {
  last_write_s_ = now();
}

TraceWriter::~TraceWriter() { (void)close(); }

double TraceWriter::now() const {
  if (options_.clock_s) return options_.clock_s();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Status TraceWriter::append(const TraceEvent& event) {
  if (fd_ < 0) return make_error(path_ + ": the trace file is closed");
  append_trace_event_line(buffer_, event);
  buffer_ += '\n';
  ++num_events_;
  if (buffer_.size() >= options_.max_buffer_bytes) return flush();
  return flush_if_due();
}

Status TraceWriter::flush_if_due() {
  if (buffer_.empty() || now() - last_write_s_ < options_.flush_interval_s) return {};
  return flush();
}

Status TraceWriter::flush() {
  if (fd_ < 0) return buffer_.empty() ? Status{} : make_error(path_ + ": the trace file is closed");
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      buffer_.erase(0, done);
      return make_error(path_ + ": writing the trace failed: " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  num_written_ += static_cast<int64_t>(done);
  buffer_.clear();
  last_write_s_ = now();
  return {};
}

Status TraceWriter::close() {
  if (fd_ < 0) return {};
  Status st = flush();
  if (st && ::fsync(fd_) != 0) st = make_error(path_ + ": fsync of the trace failed: " + std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  return st;
}

}  // namespace gb
