// EngineWorker: a thread that owns an Engine and serves a ServeHub with it --
// the driver `glassbox-cli serve` uses (the workbench drives a hub from its own
// engine thread instead). The thread takes the hub's commands, steps the engine
// while it has work (continuous batching: every live request joins the next
// step), hands every trace event to the hub (and to an optional observer), and
// sleeps while there is nothing to do.
// Threads: start()/stop() from the owning thread; the hub's any-thread methods
// from anywhere; the observer runs on the worker's thread and must not block.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/engine.h"
#include "server/serve_hub.h"

namespace gb::server {

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

  // Sees every trace event on the worker's thread. Call before start().
  void set_observer(std::function<void(const TraceEvent&)> observer) { observer_ = std::move(observer); }
  void start();
  // Refuses new submissions, cancels every live request (their channels get an
  // error) and joins the thread. Idempotent.
  void stop();

  ServeHub& hub() { return hub_; }
  const EngineInfo& info() const { return hub_.info(); }

 private:
  void run();
  void wake();
  void deliver_events();

  std::unique_ptr<Engine> engine_;
  WorkerConfig config_;
  ServeHub hub_;
  std::function<void(const TraceEvent&)> observer_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mutex_
  std::chrono::steady_clock::time_point last_step_;  // worker thread only
};

}  // namespace gb::server
