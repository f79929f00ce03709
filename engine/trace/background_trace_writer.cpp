#include "trace/background_trace_writer.h"

#include <algorithm>
#include <chrono>
#include <iterator>

namespace gb {

Result<std::unique_ptr<BackgroundTraceWriter>> BackgroundTraceWriter::open(const std::string& path,
                                                                           const TraceHeader& header,
                                                                           BackgroundTraceWriterOptions options) {
  TraceWriterOptions inner;
  inner.flush_interval_s = options.flush_interval_s;
  auto writer = TraceWriter::open(path, header, std::move(inner));
  if (!writer) return writer.error();
  return std::unique_ptr<BackgroundTraceWriter>(new BackgroundTraceWriter(std::move(*writer), options));
}

BackgroundTraceWriter::BackgroundTraceWriter(std::unique_ptr<TraceWriter> writer, BackgroundTraceWriterOptions options)
    : path_(writer->path()), options_(options), writer_(std::move(writer)) {
  thread_ = std::thread([this] { run(); });
}

BackgroundTraceWriter::~BackgroundTraceWriter() { (void)close(); }

Status BackgroundTraceWriter::first_error_locked() const {
  if (!error_.ok()) return error_;
  if (closed_) return make_error(path_ + ": the trace file is closed");
  return {};
}

Status BackgroundTraceWriter::append(std::vector<TraceEvent> events) {
  if (events.empty()) {
    std::lock_guard lock(mutex_);
    return first_error_locked();
  }
  const size_t n = events.size();
  {
    std::unique_lock lock(mutex_);
    if (Status st = first_error_locked(); !st) return st;
    const size_t limit = std::max<size_t>(options_.max_queued_events, 1);
    wake_producer_.wait(lock, [&] { return queue_.size() < limit || !error_.ok(); });
    if (!error_.ok()) return error_;
    if (queue_.empty()) {
      queue_ = std::move(events);
    } else {
      queue_.insert(queue_.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
    }
  }
  num_appended_ += static_cast<int64_t>(n);
  wake_writer_.notify_one();
  return {};
}

Status BackgroundTraceWriter::append(TraceEvent event) {
  std::vector<TraceEvent> one;
  one.push_back(std::move(event));
  return append(std::move(one));
}

Status BackgroundTraceWriter::flush() {
  std::unique_lock lock(mutex_);
  if (closed_ || !error_.ok()) return error_;  // closed: everything was written
  const uint64_t ticket = ++flush_requested_;
  wake_writer_.notify_one();
  wake_producer_.wait(lock, [&] { return flush_done_ >= ticket; });
  return error_;
}

Status BackgroundTraceWriter::close() {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return error_;
    closed_ = true;
    stop_ = true;
  }
  wake_writer_.notify_one();
  thread_.join();  // the writer thread wrote what was queued and flushed
  Status st = writer_->close();  // fsync
  std::lock_guard lock(mutex_);
  if (!st && error_.ok()) error_ = st;
  return error_;
}

void BackgroundTraceWriter::run() {
  const auto interval = std::chrono::duration<double>(options_.flush_interval_s);
  std::vector<TraceEvent> batch;
  std::unique_lock lock(mutex_);
  for (;;) {
    // Woken by events, a flush request or stop; or by the interval, so events
    // already buffered reach the file even when no further event comes.
    wake_writer_.wait_for(lock, interval, [&] { return stop_ || !queue_.empty() || flush_requested_ > flush_done_; });
    batch.swap(queue_);
    const uint64_t ticket = flush_requested_;
    const bool stopping = stop_;
    const bool failed = !error_.ok();
    lock.unlock();
    wake_producer_.notify_all();  // room in the queue

    Status st;
    if (!failed) {
      for (const TraceEvent& e : batch) {
        st = writer_->append(e);
        if (!st) break;
      }
      const bool timed_out = batch.empty();
      if (st && (timed_out || stopping || ticket > flush_done_)) st = writer_->flush();
    }
    batch.clear();

    lock.lock();
    if (!st && error_.ok()) error_ = st;
    flush_done_ = ticket;
    lock.unlock();
    wake_producer_.notify_all();
    if (stopping) return;
    lock.lock();
  }
}

}  // namespace gb
