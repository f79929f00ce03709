// RemoteSession: a remote OpenAI-compatible server used as the workbench's
// engine. Requests run on threads of their own (one RemoteClient each, since
// a streamed response holds its connection), and a poller thread scrapes
// /metrics every `metrics_interval_ms` when the server has it. Everything they
// learn becomes a RemoteEvent in one queue that the owner drains between its
// own work (the workbench's engine thread, at display rate), so no caller ever
// waits on the network: submit() and cancel() return at once.
//
// What an event carries is what the API shows: token strings, logprobs and up
// to 20 alternatives, client-side times, the server's usage counts and its
// metrics. Token ids, sampler stages and KV blocks are not available.
// Threads: any one owner thread calls every method; the worker threads only
// append to the queue (under its mutex). The destructor cancels and joins.
// Nothing escapes a worker thread: a failure, or even an unexpected exception,
// becomes that request's RemoteFinished error (the poller just stops).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "core/result.h"
#include "client/remote_client.h"
#include "client/remote_metrics.h"

namespace gb::server {

struct RemoteStarted {  // the request was sent
  uint64_t request = 0;
};
struct RemoteTokenEvent {
  uint64_t request = 0;
  int index = 0;  // 0 = first generated token
  RemoteToken token;
};
struct RemoteFinished {
  uint64_t request = 0;
  RemoteResult result;  // finish_reason "error" with `error` set when it failed
  std::string error;
};
struct RemoteMetricsSample {
  RemoteMetrics metrics;
};

struct RemoteEvent {
  using Body = std::variant<RemoteStarted, RemoteTokenEvent, RemoteFinished, RemoteMetricsSample>;
  double t_ms = 0.0;  // since the session connected
  Body body;
};

class RemoteSession {
 public:
  // Connects (GET /v1/models) and probes /metrics once: when it answers with a
  // family of names read_remote_metrics() knows, it is polled from then on.
  static Result<std::unique_ptr<RemoteSession>> connect(const RemoteOptions& options, int metrics_interval_ms = 500);
  ~RemoteSession();

  const std::string& model() const { return model_; }
  const std::string& url() const { return options_.url; }
  // "" when the server has no /metrics we can read, else its flavour.
  const std::string& metrics_flavour() const { return metrics_flavour_; }

  // A streamed completion of `prompt`; returns the session's id for it.
  uint64_t submit_completion(const std::string& prompt, const SamplerSettings& sampling, int max_tokens);
  // A streamed chat completion (the server renders its template).
  uint64_t submit_chat(const std::vector<ChatMessage>& messages, const SamplerSettings& sampling, int max_tokens,
                       const std::string& template_kwargs_json = {});
  // Ends a request: its stream is closed (a Glassbox server then cancels it and
  // frees its blocks); a RemoteFinished with reason "cancelled" follows.
  void cancel(uint64_t request);
  // The events since the last call, in order.
  std::vector<RemoteEvent> drain();
  // Requests still running.
  int num_active() const;

 private:
  struct Worker;
  RemoteSession() = default;
  uint64_t start_worker(std::function<Result<RemoteResult>(RemoteClient&, const RemoteClient::TokenCallback&)> run);
  void push(RemoteEvent::Body body);
  void reap();
  void poll_metrics();

  RemoteOptions options_;
  std::string model_;
  std::string metrics_flavour_;
  int metrics_interval_ms_ = 500;
  std::chrono::steady_clock::time_point t0_;
  uint64_t next_id_ = 1;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::thread poller_;
  std::mutex poller_mutex_;                // guards poller_client_ (abort at the end)
  RemoteClient* poller_client_ = nullptr;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;        // guards events_
  std::vector<RemoteEvent> events_;
};

}  // namespace gb::server
