// EngineWorker: the one thread that owns an Engine while it serves HTTP. Handler
// threads never touch engine state: they hand submissions and cancellations in
// through a command queue, and receive tokens through their request's
// RequestChannel. The thread steps the engine while it has work (continuous
// batching: every live request joins the next step), routes each trace event to
// the channel of its request and keeps the ServerMetrics up to date.
//
//   handler threads ──submit/cancel──► command queue ──► engine thread: Engine::step()
//         ▲                                                   │ TraceEvents
//         └──────────── RequestChannel (tokens, finish) ◄─────┘
//
// Threads: submit(), cancel(), metrics(), info() from any thread; the observer
// runs on the engine thread and must not block.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "runtime/engine.h"
#include "server/request_channel.h"
#include "server/server_metrics.h"

namespace gb::server {

// What handler threads may know about the engine: fixed once it started.
struct EngineInfo {
  std::string model_path;
  int32_t vocab_size = 0;
  int32_t max_context = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
};

// One choice of an HTTP request: one engine request.
struct ChoiceSubmission {
  GenerationRequest request;
  int choice = 0;
  bool logprobs = false;
  int top_logprobs = 0;
};

enum class SubmitStatus { Ok, QueueFull, Rejected, Unavailable };

struct SubmitOutcome {
  SubmitStatus status = SubmitStatus::Ok;
  std::string message;           // why, when not Ok
  std::vector<RequestId> ids;    // one per submission, when Ok
};

struct WorkerConfig {
  int32_t max_queue = 256;  // requests waiting for admission; more get QueueFull
  // Slow motion: at least this long between the starts of two steps (0: none),
  // so batching, prefix sharing and preemption can be watched at human speed.
  std::chrono::milliseconds step_interval{0};
};

class EngineWorker {
 public:
  // `engine` must have been started.
  EngineWorker(std::unique_ptr<Engine> engine, WorkerConfig config);
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Sees every trace event on the engine thread (the workbench's views). Call
  // before start().
  void set_observer(std::function<void(const TraceEvent&)> observer) { observer_ = std::move(observer); }
  void start();
  // Cancels every live request (their channels get an error) and joins the thread.
  void stop();

  // All submissions of one HTTP request, all or none: blocks until the engine
  // thread has taken them. Events for them go to `channel`.
  SubmitOutcome submit(std::vector<ChoiceSubmission> items, std::shared_ptr<RequestChannel> channel);
  // Cancels the requests that are still live and frees their KV blocks at once.
  void cancel(std::vector<RequestId> ids);

  const EngineInfo& info() const { return info_; }
  ServerMetrics& metrics() { return metrics_; }
  bool healthy() const;

 private:
  struct SubmitCommand {
    std::vector<ChoiceSubmission> items;
    std::shared_ptr<RequestChannel> channel;
    std::promise<SubmitOutcome> done;
  };
  struct CancelCommand {
    std::vector<RequestId> ids;
  };
  using Command = std::variant<SubmitCommand, CancelCommand>;
  struct Live {  // engine thread only
    std::shared_ptr<RequestChannel> channel;
    int choice = 0;
    bool logprobs = false;
    int top_logprobs = 0;
    bool admitted = false;
    size_t num_text_bytes = 0;  // text already pushed as tokens
  };

  void run();
  void post(Command command);
  SubmitOutcome handle_submit(SubmitCommand& command);
  void handle_command(Command& command);
  void dispatch(const TraceEvent& event);
  void on_token(const TokenSampledEvent& token, Live& live);
  void on_finished(const RequestFinishedEvent& finished, Live& live);
  void fail_all(const std::string& message);
  void update_gauges();

  std::unique_ptr<Engine> engine_;
  WorkerConfig config_;
  EngineInfo info_;
  ServerMetrics metrics_;
  std::function<void(const TraceEvent&)> observer_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Command> commands_;  // guarded by mutex_
  bool stopping_ = false;         // guarded by mutex_
  bool healthy_ = true;           // guarded by mutex_
  std::chrono::steady_clock::time_point last_step_;  // engine thread only
  std::unordered_map<RequestId, Live> live_;  // engine thread only
};

}  // namespace gb::server
