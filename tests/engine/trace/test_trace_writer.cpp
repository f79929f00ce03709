// TraceWriter: a streamed trace is byte-identical to write_trace_jsonl of the
// same events; events reach the file once flush_interval has passed (a fake
// clock, no timing) or the buffer is full, the header at once; a writer killed
// with SIGKILL while streaming leaves a file that reopens, a cut last line
// skipped with a warning naming it; errors name the path.
// BackgroundTraceWriter (the writer on its own thread): the same bytes in the
// same order, whatever the batching; flush() makes every appended event
// visible; buffered events reach the file without a flush or a further event;
// a full queue makes append wait, not grow; a failed write is reported by the
// calls after it.
#include <csignal>
#include <cstdio>
#include <chrono>
#include <random>
#include <sys/resource.h>
#include <thread>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gb_test.h"
#include "trace/trace_jsonl.h"
#include "trace/trace_schema.h"
#include "trace/background_trace_writer.h"
#include "trace/trace_writer.h"
#include "trace_test_events.h"

namespace {

gb::TraceHeader header() {
  gb::TraceHeader h;
  h.schema_version = gb::kTraceSchemaVersion;
  h.engine_version = "0.1.0";
  h.created = "2025-01-02T03:04:05Z";
  h.model.path = "/models/stories260K.bin";
  h.model.name = "stories260K";
  h.model.sha256 = std::string(64, 'a');
  h.model.format = "llama2.c (legacy)";
  h.model.architecture = "llama";
  h.tokenizer = {"llama2c", "/models/tok512.bin", 512, 1, 2};
  h.sampler_settings = R"({"seed":42})";
  return h;
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

}  // namespace

GB_TEST(streamed_trace_equals_the_whole_file_writer_and_flushes_by_the_clock) {
  const std::string path = gbtest::temp_dir() + "/streamed.jsonl";
  double clock = 100.0;
  gb::TraceWriterOptions options;
  options.clock_s = [&] { return clock; };
  auto w = gb::TraceWriter::open(path, header(), options);
  QVERIFY2(w.ok(), w.ok() ? "" : w.error().message.c_str());
  const std::string header_line = gb::trace_header_line(header()) + "\n";
  QCOMPARE(gbtest::read_text(path), header_line);  // the header at once
  const auto events = gbtest::every_event_type();
  QVERIFY(events.size() >= 4);
  QVERIFY((*w)->append(events[0]).ok());
  QVERIFY((*w)->append(events[1]).ok());
  clock += 0.999;
  QVERIFY((*w)->append(events[2]).ok());
  QCOMPARE(gbtest::read_text(path), header_line);  // under a second: still buffered
  clock += 0.001;
  QVERIFY((*w)->append(events[3]).ok());  // a second since the last write: out
  QCOMPARE(gbtest::read_text(path), gb::format_trace_jsonl(header(), {events.begin(), events.begin() + 4}));
  for (size_t i = 4; i < events.size(); ++i) QVERIFY((*w)->append(events[i]).ok());
  QVERIFY((*w)->close().ok());
  QCOMPARE(gbtest::read_text(path), gb::format_trace_jsonl(header(), events));
  QCOMPARE((*w)->num_events(), static_cast<int64_t>(events.size()));
  QVERIFY(!(*w)->append(events[0]).ok());  // closed
}

GB_TEST(a_full_buffer_is_written_without_waiting_for_the_clock) {
  const std::string path = gbtest::temp_dir() + "/buffered.jsonl";
  gb::TraceWriterOptions options;
  options.clock_s = [] { return 0.0; };  // time stands still
  options.max_buffer_bytes = 1;
  auto w = gb::TraceWriter::open(path, header(), options);
  QVERIFY(w.ok());
  const auto events = gbtest::every_event_type();
  QVERIFY((*w)->append(events[0]).ok());
  QCOMPARE(gbtest::read_text(path), gb::format_trace_jsonl(header(), {events[0]}));
}

GB_TEST(a_cut_last_line_is_skipped_and_reported) {
  const auto events = gbtest::every_event_type();
  const std::string whole = gb::format_trace_jsonl(header(), events);
  const std::string last = gb::trace_event_line(events.back()) + "\n";
  const std::string cut = whole.substr(0, whole.size() - last.size() / 2);
  auto file = gb::parse_trace_jsonl(cut, "t.jsonl");
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  QCOMPARE(file->events.size(), events.size() - 1);
  QCOMPARE(file->warnings.size(), size_t{1});
  const std::string where = "t.jsonl:" + std::to_string(events.size() + 1) + ": the last line is incomplete";
  QVERIFY2(file->warnings[0].find(where) == 0, file->warnings[0].c_str());
  // A whole file has no warning; a cut line that is not the last is still an error.
  auto ok = gb::parse_trace_jsonl(whole, "t.jsonl");
  QVERIFY(ok.ok() && ok->warnings.empty());
  auto bad = gb::parse_trace_jsonl(cut + "\n" + last, "t.jsonl");
  QVERIFY(!bad.ok());
  QVERIFY2(bad.error().message.find("not valid JSON") != std::string::npos, bad.error().message.c_str());
  // A cut header is no trace at all.
  QVERIFY(!gb::parse_trace_jsonl(whole.substr(0, 20), "t.jsonl").ok());
}

GB_TEST(a_writer_killed_while_streaming_leaves_a_file_that_reopens) {
  const std::string path = gbtest::temp_dir() + "/killed.jsonl";
  ::unlink(path.c_str());
  const pid_t child = ::fork();
  QVERIFY(child >= 0);
  if (child == 0) {
    // Every append is written (interval 0) in many small writes, for ever.
    gb::TraceWriterOptions options;
    options.flush_interval_s = 0.0;
    auto w = gb::TraceWriter::open(path, header(), options);
    if (!w) ::_exit(2);
    const auto events = gbtest::every_event_type();
    for (uint64_t seq = 0;; ++seq) {
      gb::TraceEvent e = events[seq % events.size()];
      e.seq = seq;
      if (!(*w)->append(e)) ::_exit(3);
    }
  }
  while (file_size(path) < 200 * 1024) ::usleep(1000);
  QVERIFY(::kill(child, SIGKILL) == 0);
  int status = 0;
  QVERIFY(::waitpid(child, &status, 0) == child);
  QVERIFY(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  auto file = gb::read_trace_jsonl(path);
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  QVERIFY(file->events.size() > 100);
  QVERIFY(file->warnings.size() <= 1);  // a last line cut short, or none
  for (size_t i = 0; i < file->events.size(); ++i) QCOMPARE(file->events[i].seq, static_cast<uint64_t>(i));
}

GB_TEST(trace_writer_errors_name_the_path) {
  auto w = gb::TraceWriter::open("/nonexistent-dir/t.jsonl", header());
  QVERIFY(!w.ok());
  QVERIFY2(w.error().message.find("/nonexistent-dir/t.jsonl: cannot create the trace file") == 0,
           w.error().message.c_str());
}

namespace {

// `n` events cycling through every type, numbered 0.. by seq.
std::vector<gb::TraceEvent> numbered_events(size_t n) {
  const auto kinds = gbtest::every_event_type();
  std::vector<gb::TraceEvent> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kinds[i % kinds.size()]);
    out.back().seq = i;
  }
  return out;
}

}  // namespace

GB_TEST(background_writer_writes_the_same_bytes_in_any_batching_and_flush_shows_them_all) {
  const std::string path = gbtest::temp_dir() + "/background.jsonl";
  const auto events = numbered_events(3000);
  gb::BackgroundTraceWriterOptions options;
  options.flush_interval_s = 3600.0;  // only flush() and close() write here
  auto w = gb::BackgroundTraceWriter::open(path, header(), options);
  QVERIFY2(w.ok(), w.ok() ? "" : w.error().message.c_str());
  const std::string header_line = gb::trace_header_line(header()) + "\n";
  QCOMPARE(gbtest::read_text(path), header_line);  // the header at once, on the caller's thread
  std::mt19937 rng(7);
  size_t next = 0;
  for (int round = 0; next < events.size(); ++round) {
    // A batch of 0-40 events, or single ones.
    const size_t n = std::min<size_t>(std::uniform_int_distribution<size_t>(0, 40)(rng), events.size() - next);
    if (round % 3 == 0) {
      for (size_t i = 0; i < n; ++i) QVERIFY((*w)->append(events[next + i]).ok());
    } else {
      QVERIFY((*w)->append(std::vector<gb::TraceEvent>(events.begin() + next, events.begin() + next + n)).ok());
    }
    next += n;
    if (round % 7 == 0) {
      QVERIFY((*w)->flush().ok());
      QCOMPARE(gbtest::read_text(path), gb::format_trace_jsonl(header(), {events.begin(), events.begin() + next}));
    }
  }
  QCOMPARE((*w)->num_events(), static_cast<int64_t>(events.size()));
  QVERIFY((*w)->close().ok());
  QCOMPARE(gbtest::read_text(path), gb::format_trace_jsonl(header(), events));
  QVERIFY((*w)->flush().ok());               // closed: nothing left to write
  QVERIFY(!(*w)->append(events[0]).ok());    // but nothing more is taken
  QCOMPARE(gbtest::read_text(path), gb::format_trace_jsonl(header(), events));
}

GB_TEST(background_writer_writes_buffered_events_without_a_flush_or_another_event) {
  // One event, then silence: the writer thread wakes up by itself. (The wait
  // is an upper bound for a loaded machine, not a speed being measured.)
  const std::string path = gbtest::temp_dir() + "/background-idle.jsonl";
  const auto events = numbered_events(1);
  gb::BackgroundTraceWriterOptions options;
  options.flush_interval_s = 0.05;
  auto w = gb::BackgroundTraceWriter::open(path, header(), options);
  QVERIFY(w.ok());
  QVERIFY((*w)->append(events[0]).ok());
  const std::string want = gb::format_trace_jsonl(header(), events);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (gbtest::read_text(path) != want && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  QCOMPARE(gbtest::read_text(path), want);
}

GB_TEST(background_writer_with_a_full_queue_waits_and_loses_nothing) {
  const std::string path = gbtest::temp_dir() + "/background-queue.jsonl";
  const auto events = numbered_events(500);
  gb::BackgroundTraceWriterOptions options;
  options.max_queued_events = 3;
  {
    auto w = gb::BackgroundTraceWriter::open(path, header(), options);
    QVERIFY(w.ok());
    for (const gb::TraceEvent& e : events) QVERIFY((*w)->append(e).ok());
    QVERIFY((*w)->append(std::vector<gb::TraceEvent>{}).ok());  // an empty batch is no event
    QCOMPARE((*w)->num_events(), static_cast<int64_t>(events.size()));
  }  // the destructor writes the rest
  QCOMPARE(gbtest::read_text(path), gb::format_trace_jsonl(header(), events));
}

GB_TEST(background_writer_reports_a_failed_write_on_the_calls_after_it) {
  // A file size limit makes write(2) fail (EFBIG) once the file reaches it; in
  // a child process, so the limit is not this one's.
  const std::string path = gbtest::temp_dir() + "/background-full.jsonl";
  ::unlink(path.c_str());
  std::fflush(nullptr);  // the child must not print the runner's buffered output again
  const pid_t child = ::fork();
  QVERIFY(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 * 1024, 64 * 1024};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(2);
    auto w = gb::BackgroundTraceWriter::open(path, header());
    if (!w) ::_exit(3);
    const auto events = numbered_events(2000);  // several hundred KB
    gb::Status appended;
    for (const gb::TraceEvent& e : events) {
      appended = (*w)->append(e);
      if (!appended) break;
    }
    const gb::Status flushed = (*w)->flush();
    if (flushed) ::_exit(4);  // the limit must be reported
    if (flushed.error().message.find(path + ": writing the trace failed") != 0) ::_exit(5);
    if ((*w)->append(events[0])) ::_exit(6);  // and stays reported
    if ((*w)->close()) ::_exit(7);
    ::_exit(0);
  }
  int status = 0;
  QVERIFY(::waitpid(child, &status, 0) == child);
  QVERIFY2(WIFEXITED(status), "the child died");
  QCOMPARE(WEXITSTATUS(status), 0);
  // What did reach the file reopens as a trace (a cut last line at most).
  auto file = gb::read_trace_jsonl(path);
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  QVERIFY(!file->events.empty());
  for (size_t i = 0; i < file->events.size(); ++i) QCOMPARE(file->events[i].seq, static_cast<uint64_t>(i));
}
