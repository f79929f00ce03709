// ServeHub: where HTTP handler threads meet the thread that owns the Engine.
// Handlers submit and cancel through its command queue (any thread); the
// engine's thread -- an EngineWorker's own thread in `glassbox-cli serve`, the
// workbench's engine thread in the GUI -- takes the commands between steps
// (run_commands), hands every trace event to on_event, which routes tokens and
// finishes to each request's RequestChannel and keeps the ServerMetrics.
//
//   handler threads ──submit/cancel──► command queue ──► engine thread: run_commands(), Engine::step()
//         ▲                                                   │ TraceEvents → on_event()
//         └──────────── RequestChannel (tokens, finish) ◄─────┘
//
// The hub never steps the engine and never drains its events: its driver does
// both, so the same events also reach the workbench's views and traces.
// Threads: submit(), cancel(), metrics(), info(), healthy() from any thread;
// run_commands(), on_event(), update_gauges(), fail_all() on the engine's thread.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
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
  KvTypes kv_types;  // what the pool stores; echo scoring uses the same
};
EngineInfo engine_info(const Engine& engine);

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
  std::string message;         // why, when not Ok
  std::vector<RequestId> ids;  // one per submission, when Ok
};

struct HubConfig {
  int32_t max_queue = 256;  // requests waiting for admission; more get QueueFull
  // Handlers wait this long for the engine thread to take a submission, then
  // answer Unavailable (and the submission is dropped, never run).
  std::chrono::milliseconds submit_timeout{30000};
};

class ServeHub {
 public:
  ServeHub(EngineInfo info, HubConfig config);
  ServeHub(const ServeHub&) = delete;
  ServeHub& operator=(const ServeHub&) = delete;
  int32_t max_queue() const { return config_.max_queue; }

  // Called after a command is queued, from the queuing thread: the driver wakes
  // its engine thread (set before the hub is used).
  void set_wake(std::function<void()> wake) { wake_ = std::move(wake); }
  // Stops taking submissions (Unavailable) -- the driver is stopping.
  void close();

  // All submissions of one HTTP request, all or none: blocks until the engine
  // thread has taken them. Events for them go to `channel`.
  SubmitOutcome submit(std::vector<ChoiceSubmission> items, std::shared_ptr<RequestChannel> channel);
  // Cancels the requests that are still live; their blocks are freed at once.
  void cancel(std::vector<RequestId> ids);
  // Engine::inspect on the engine thread (docs/inside.md): the report's JSON,
  // or why not. Blocks until the engine thread answered (or did not take it
  // within submit_timeout).
  Result<std::string> inspect(std::vector<TokenId> tokens, int32_t position, InsideOptions options);

  const EngineInfo& info() const { return info_; }
  ServerMetrics& metrics() { return metrics_; }
  bool healthy() const;

  // Engine thread.
  bool has_commands() const;
  void run_commands(Engine& engine);
  void on_event(const TraceEvent& event, const Tokenizer& tokenizer);
  void update_gauges(const Engine& engine);
  // Every live request's channel gets `message` as an error and the request is
  // cancelled; with `unhealthy` the hub refuses submissions from now on.
  void fail_all(Engine& engine, const std::string& message, bool unhealthy);

 private:
  // A submission's hand-over: the handler may give up waiting (abandoned) only
  // before the engine thread took it (taken); both under `mutex`.
  struct Handover {
    std::mutex mutex;
    bool taken = false;
    bool abandoned = false;
  };
  struct SubmitCommand {
    std::vector<ChoiceSubmission> items;
    std::shared_ptr<RequestChannel> channel;
    std::shared_ptr<Handover> handover;
    std::promise<SubmitOutcome> done;
  };
  struct CancelCommand {
    std::vector<RequestId> ids;
  };
  struct InspectCommand {
    std::vector<TokenId> tokens;
    int32_t position = 0;
    InsideOptions options;
    std::shared_ptr<Handover> handover;
    std::promise<Result<std::string>> done;
  };
  using Command = std::variant<SubmitCommand, CancelCommand, InspectCommand>;
  struct Live {  // engine thread only
    std::shared_ptr<RequestChannel> channel;
    int choice = 0;
    bool logprobs = false;
    int top_logprobs = 0;
    bool admitted = false;
    size_t num_text_bytes = 0;  // text already pushed as tokens
  };

  void post(Command command);
  SubmitOutcome handle_submit(Engine& engine, SubmitCommand& command);
  void on_token(const TokenSampledEvent& token, Live& live, const Tokenizer& tokenizer);
  void on_finished(const RequestFinishedEvent& finished, Live& live);

  EngineInfo info_;
  HubConfig config_;
  ServerMetrics metrics_;
  std::function<void()> wake_;
  mutable std::mutex mutex_;
  std::vector<Command> commands_;  // guarded by mutex_
  bool closed_ = false;            // guarded by mutex_
  bool healthy_ = true;            // guarded by mutex_
  std::unordered_map<RequestId, Live> live_;  // engine thread only
};

}  // namespace gb::server
