// RequestChannel: how the engine thread hands one HTTP request's results to the
// handler thread that answers it. The engine thread pushes ChoiceEvents (tokens,
// the finish, an error) for every choice of the request; the handler waits for
// them with a timeout so it can check meanwhile whether its client went away.
// Threads: push() from the engine thread, wait() from one handler thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gb::server {

struct TokenLogprob {
  std::string token;    // the token's bytes as they appear in text (may be part of a UTF-8 character)
  float logprob = 0.0f; // natural log of the raw model probability (softmax of logits, temperature 1)
  std::vector<std::pair<std::string, float>> top;  // (top_logprobs) most likely tokens by raw logit
};

struct ChoiceEvent {
  enum class Kind { Token, Finished, Error };
  Kind kind = Kind::Token;
  int choice = 0;                       // index of the choice in the response
  std::string text;                     // Token: text it released; Finished: text released at the end
  std::optional<TokenLogprob> logprob;  // Token, when the client asked for logprobs
  std::string finish_reason;            // Finished: engine reason (stop, max_tokens, length, cancelled, error)
  int32_t num_prompt_tokens = 0;        // Finished
  int32_t num_generated = 0;            // Finished
  int32_t num_cached_tokens = 0;        // Finished: prompt tokens served from the prefix cache
  std::string error;                    // Error: message for the client
};

class RequestChannel {
 public:
  void push(ChoiceEvent event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    cv_.notify_one();
  }

  // Moves every pending event into `out`, waiting up to `timeout` for the first.
  // False when nothing arrived.
  bool wait(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    for (ChoiceEvent& e : events_) out.push_back(std::move(e));
    events_.clear();
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<ChoiceEvent> events_;
};

}  // namespace gb::server
