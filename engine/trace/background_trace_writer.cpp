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
  bool wake = false;
  {
    std::unique_lock lock(mutex_);
    if (Status st = first_error_locked(); !st) return st;
    if (queue_.size() >= max_queued()) {
      wake_writer_.notify_one();
      wake_producer_.wait(lock, [&] { return queue_.size() < max_queued() || !error_.ok(); });
    }
    if (!error_.ok()) return error_;
    const size_t before = queue_.size();
    if (queue_.empty()) {
      queue_ = std::move(events);
    } else {
      queue_.insert(queue_.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
    }
    wake = (before < wake_at() && queue_.size() >= wake_at()) || parked_;
    parked_ = false;
  }
  num_appended_ += static_cast<int64_t>(n);
  // Waking the writer is a futex call and a reschedule (about 25 us on a VM,
  // 1.2% of a stories15M step when it was done every step): while events come
  // it wakes itself every poll interval, and is woken only when it sleeps with
  // nothing to do or the queue has grown large.
  if (wake) wake_writer_.notify_one();
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
  const auto interval = std::chrono::duration<double>(std::min(options_.poll_interval_s, options_.flush_interval_s));
  std::vector<TraceEvent> batch;
  std::unique_lock lock(mutex_);
  for (;;) {
    // Woken by a long queue, a flush request or stop; otherwise every poll
    // interval, when it formats what came and writes it if a flush interval
    // has passed (also when no further event comes).
    if (parked_) {
      wake_writer_.wait(lock, [&] { return stop_ || !queue_.empty() || flush_requested_ > flush_done_; });
    } else {
      wake_writer_.wait_for(lock, interval,
                            [&] { return stop_ || queue_.size() >= wake_at() || flush_requested_ > flush_done_; });
    }
    parked_ = false;
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
      if (st) st = (stopping || ticket > flush_done_) ? writer_->flush() : writer_->flush_if_due();
    }
    batch.clear();

    lock.lock();
    if (!st && error_.ok()) error_ = st;
    flush_done_ = ticket;
    // Nothing queued and nothing left to write: sleep until an event comes
    // (append wakes a parked writer) instead of polling.
    parked_ = queue_.empty() && (!error_.ok() || !writer_->has_buffered());
    lock.unlock();
    wake_producer_.notify_all();
    if (stopping) return;
    lock.lock();
  }
}

}  // namespace gb
