#include "client/remote_session.h"

#include <algorithm>
#include <exception>

namespace gb::server {

struct RemoteSession::Worker {
  uint64_t id = 0;
  std::atomic<bool> cancelled{false};
  std::atomic<bool> done{false};
  std::mutex client_mutex;  // guards client (abort from the owner thread)
  RemoteClient* client = nullptr;
  std::thread thread;

  void abort() {
    std::lock_guard<std::mutex> lock(client_mutex);
    if (client) client->abort();
  }
};

Result<std::unique_ptr<RemoteSession>> RemoteSession::connect(const RemoteOptions& options, int metrics_interval_ms) {
  auto probe = RemoteClient::connect(options);
  if (!probe) return probe.error();
  std::unique_ptr<RemoteSession> s(new RemoteSession());
  s->options_ = options;
  s->model_ = (*probe)->model();
  s->options_.model = s->model_;
  s->options_.probe = false;  // every request's client trusts the model picked here
  s->metrics_interval_ms_ = std::max(50, metrics_interval_ms);
  s->t0_ = std::chrono::steady_clock::now();
  if (auto samples = (*probe)->metrics()) s->metrics_flavour_ = read_remote_metrics(*samples).flavour;
  if (!s->metrics_flavour_.empty()) s->poller_ = std::thread([raw = s.get()] { raw->poll_metrics(); });
  return s;
}

RemoteSession::~RemoteSession() {
  stopping_ = true;
  for (auto& w : workers_) {
    w->cancelled = true;
    w->abort();
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  {
    std::lock_guard<std::mutex> lock(poller_mutex_);
    if (poller_client_) poller_client_->abort();  // a scrape in flight ends now
  }
  if (poller_.joinable()) poller_.join();
}

void RemoteSession::push(RemoteEvent::Body body) {
  const double t_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back({t_ms, std::move(body)});
}

namespace {

// Publishes a worker's client for abort() from the owner thread while it
// lives: declared after the client, so it is unpublished before the client is
// destroyed, on every way out (an exception included).
class PublishedClient {
 public:
  PublishedClient(std::mutex& mutex, RemoteClient*& slot, RemoteClient* client) : mutex_(mutex), slot_(slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    slot_ = client;
  }
  ~PublishedClient() {
    std::lock_guard<std::mutex> lock(mutex_);
    slot_ = nullptr;
  }
  PublishedClient(const PublishedClient&) = delete;
  PublishedClient& operator=(const PublishedClient&) = delete;

 private:
  std::mutex& mutex_;
  RemoteClient*& slot_;
};

}  // namespace

uint64_t RemoteSession::start_worker(
    std::function<Result<RemoteResult>(RemoteClient&, const RemoteClient::TokenCallback&)> run) {
  auto worker = std::make_unique<Worker>();
  Worker* w = worker.get();
  w->id = next_id_++;
  push(RemoteStarted{w->id});
  w->thread = std::thread([this, w, run = std::move(run)] {
    RemoteFinished finished{w->id, {}, {}};
    int index = 0;
    // Nothing may escape a thread (std::terminate would end the workbench):
    // RemoteClient reports a bad answer as an error, and anything unexpected
    // still becomes this request's error.
    try {
      auto client = RemoteClient::connect(options_);
      if (!client) {
        finished.error = client.error().message;
      } else {
        PublishedClient published(w->client_mutex, w->client, client->get());
        auto result = w->cancelled ? Result<RemoteResult>(RemoteResult{}) : run(**client, [&](const RemoteToken& t) {
          push(RemoteTokenEvent{w->id, index++, t});
          return !w->cancelled.load();
        });
        if (result) finished.result = std::move(*result);
        else if (!w->cancelled) finished.error = result.error().message;
        else finished.result.num_generated = index;  // aborted mid-stream: what arrived
      }
    } catch (const std::exception& e) {
      finished.error = std::string("unexpected error in the remote request: ") + e.what();
    } catch (...) {
      finished.error = "unexpected error in the remote request";
    }
    if (w->cancelled) finished.result.finish_reason = "cancelled";
    else if (!finished.error.empty()) finished.result.finish_reason = "error";
    try {
      push(std::move(finished));
    } catch (...) {
      // Out of memory for one event: the request still ends (done below).
    }
    w->done = true;
  });
  workers_.push_back(std::move(worker));
  return w->id;
}

uint64_t RemoteSession::submit_completion(const std::string& prompt, const SamplerSettings& sampling, int max_tokens) {
  return start_worker([prompt, sampling, max_tokens](RemoteClient& c, const RemoteClient::TokenCallback& on_token) {
    return c.complete(prompt, sampling, max_tokens, on_token);
  });
}

uint64_t RemoteSession::submit_chat(const std::vector<ChatMessage>& messages, const SamplerSettings& sampling,
                                    int max_tokens, const std::string& template_kwargs_json) {
  return start_worker([=](RemoteClient& c, const RemoteClient::TokenCallback& on_token) {
    return c.chat(messages, sampling, max_tokens, template_kwargs_json, on_token);
  });
}

void RemoteSession::cancel(uint64_t request) {
  for (auto& w : workers_) {
    if (w->id != request || w->done) continue;
    w->cancelled = true;
    w->abort();
  }
}

void RemoteSession::reap() {
  for (auto& w : workers_)
    if (w->done && w->thread.joinable()) w->thread.join();
  workers_.erase(std::remove_if(workers_.begin(), workers_.end(), [](const auto& w) { return !w->thread.joinable(); }),
                 workers_.end());
}

std::vector<RemoteEvent> RemoteSession::drain() {
  reap();
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RemoteEvent> out;
  out.swap(events_);
  return out;
}

int RemoteSession::num_active() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return !w->done; }));
}

void RemoteSession::poll_metrics() {
  RemoteOptions options = options_;
  options.timeout_s = 5;  // a hung /metrics must not hold up the session's end for long
  // Metrics are an extra: anything unexpected ends the polling, never the
  // workbench (nothing may escape a thread).
  try {
    auto client = RemoteClient::connect(options);
    if (!client) return;
    PublishedClient published(poller_mutex_, poller_client_, client->get());
    while (!stopping_) {
      if (auto samples = (*client)->metrics()) push(RemoteMetricsSample{read_remote_metrics(*samples)});
      for (int waited = 0; waited < metrics_interval_ms_ && !stopping_; waited += 25)
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  } catch (...) {
  }
}

}  // namespace gb::server
