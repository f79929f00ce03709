#include "server/engine_worker.h"

namespace gb::server {

namespace {
HubConfig hub_config(const WorkerConfig& worker) {
  HubConfig config;
  config.max_queue = worker.max_queue;
  return config;
}
}  // namespace

EngineWorker::EngineWorker(std::unique_ptr<Engine> engine, WorkerConfig config)
    : engine_(std::move(engine)), config_(config), hub_(engine_info(*engine_), hub_config(config)) {
  hub_.set_wake([this] { wake(); });
}

EngineWorker::~EngineWorker() { stop(); }

void EngineWorker::start() {
  GB_CHECK_MSG(!thread_.joinable(), "EngineWorker::start called twice");
  hub_.update_gauges(*engine_);
  thread_ = std::thread([this] { run(); });
}

void EngineWorker::stop() {
  hub_.close();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Taking the mutex before notifying closes the gap between the worker finding
// no command and starting to wait, so a wake-up is never lost.
void EngineWorker::wake() {
  { std::lock_guard lock(mutex_); }
  cv_.notify_all();
}

void EngineWorker::deliver_events() {
  for (const TraceEvent& e : engine_->drain_events()) {
    if (observer_) observer_(e);
    hub_.on_event(e, engine_->tokenizer());
  }
  hub_.update_gauges(*engine_);
}

void EngineWorker::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (!engine_->has_work()) cv_.wait(lock, [&] { return stopping_ || hub_.has_commands(); });
      if (stopping_) break;
    }
    hub_.run_commands(*engine_);
    deliver_events();
    if (engine_->has_work() && config_.step_interval.count() > 0) {
      // Slow motion: wait out the interval, but wake for commands and stop.
      std::unique_lock lock(mutex_);
      const auto due = last_step_ + config_.step_interval;
      cv_.wait_until(lock, due, [&] { return stopping_ || hub_.has_commands(); });
      if (stopping_) break;
      if (std::chrono::steady_clock::now() < due) continue;  // a command came first
    }
    if (!engine_->has_work()) continue;
    last_step_ = std::chrono::steady_clock::now();
    if (auto stepped = engine_->step(); !stepped) hub_.fail_all(*engine_, "engine failure: " + stepped.error().message, true);
    deliver_events();
  }
  hub_.fail_all(*engine_, "the server is shutting down", false);
  deliver_events();
}

}  // namespace gb::server
