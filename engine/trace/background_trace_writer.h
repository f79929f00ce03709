// BackgroundTraceWriter: a TraceWriter on a thread of its own, so the thread
// that produces events (the engine thread) only hands them over: formatting a
// token's JSON line (15-20 us for a 20-candidate, 9-stage record) and the
// write(2) calls happen on the writer thread.
//
// The file is the one TraceWriter writes (trace_writer.h): the header at once,
// then every event line in append order, byte for byte format_trace_jsonl of the
// same events after close(). What reaches the file when:
//   - flush() returns once every event appended before it is in the file;
//   - otherwise the writer thread wakes up every poll_interval (or when a
//     quarter of max_queued_events are waiting), formats what came and writes
//     once flush_interval has passed since its last write, so events reach
//     the file within about one flush interval, also when no further event
//     comes, and a kill loses at most about that much. append() does not wake
//     it (a futex wake-up per engine step cost more than the formatting it
//     moved off the engine thread), except the first event after it went to
//     sleep with nothing to do (no wake-ups while no events come);
//   - close() (and the destructor) writes everything, fsyncs and joins.
// Backpressure: append() waits while more than max_queued_events are queued
// (a disk slower than generation cannot grow memory without bound).
// Errors: the first failed write stops the writing; append() and flush()
// return it from then on (an error is seen on the call after it happened, or
// by flush()). TraceWriterOptions::clock_s is not used (the writer thread
// waits on the steady clock).
//
// Threads: one producer thread calls append/flush/close; the writer thread is
// internal.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "trace/trace_writer.h"

namespace gb {

struct BackgroundTraceWriterOptions {
  double flush_interval_s = 1.0;
  // How often the writer thread takes the queued events and formats them (it
  // writes them per flush_interval). Small batches: the events' allocations,
  // made on the producer thread, are freed in small groups that its next
  // allocations reuse; freeing a second's worth at once let malloc give the
  // memory back to the system and the producer fault it in again (0.3% of a
  // stories15M step).
  double poll_interval_s = 0.05;
  // append() waits while this many events are queued; the writer thread is
  // woken early when a quarter of it is.
  size_t max_queued_events = 8192;
};

class BackgroundTraceWriter {
 public:
  // Creates the file and writes the header on the calling thread (so an
  // unwritable path is an error here), then starts the writer thread.
  static Result<std::unique_ptr<BackgroundTraceWriter>> open(const std::string& path, const TraceHeader& header,
                                                             BackgroundTraceWriterOptions options = {});
  ~BackgroundTraceWriter();  // close(); an error there is lost (call close() to see it)
  BackgroundTraceWriter(const BackgroundTraceWriter&) = delete;
  BackgroundTraceWriter& operator=(const BackgroundTraceWriter&) = delete;

  // Hands the events over (moved: no copy of their candidate records).
  Status append(std::vector<TraceEvent> events);
  Status append(TraceEvent event);
  Status flush();
  Status close();

  const std::string& path() const { return path_; }
  int64_t num_events() const { return num_appended_; }  // appended so far

 private:
  BackgroundTraceWriter(std::unique_ptr<TraceWriter> writer, BackgroundTraceWriterOptions options);
  void run();
  Status first_error_locked() const;
  size_t max_queued() const { return std::max<size_t>(options_.max_queued_events, 1); }
  size_t wake_at() const { return std::max<size_t>(options_.max_queued_events / 4, 1); }

  const std::string path_;
  const BackgroundTraceWriterOptions options_;
  std::unique_ptr<TraceWriter> writer_;  // used by the writer thread only (until it is joined)
  int64_t num_appended_ = 0;             // producer thread only

  mutable std::mutex mutex_;
  std::condition_variable wake_writer_;    // events, a flush request or stop
  std::condition_variable wake_producer_;  // a flush done or room in the queue
  std::vector<TraceEvent> queue_;
  uint64_t flush_requested_ = 0;  // flush() tickets handed out
  uint64_t flush_done_ = 0;       // tickets whose events are all written
  bool stop_ = false;
  bool parked_ = false;  // the writer thread sleeps until woken: nothing queued or buffered
  bool closed_ = false;
  Status error_;  // the first failure
  std::thread thread_;
};

}  // namespace gb
