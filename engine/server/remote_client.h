// RemoteClient: another OpenAI-compatible server (another Glassbox, llama.cpp's
// llama-server, vLLM) used as the engine -- the first piece of the remote
// backend of issue 17. It streams completions with logprobs and reports, per
// token, what the API can show: the text, the chosen token's logprob and the
// top alternatives (up to 20); timings are measured on this side (client TTFT
// and TPOT). What the API cannot show (token ids, sampler stages, the random
// draw) is absent, never made up. metrics() scrapes the server's Prometheus
// /metrics when it has one.
// Threads: one RemoteClient per thread (it holds one HTTP connection).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "sampling/sampler_settings.h"

namespace gb::server {

struct RemoteOptions {
  std::string url;      // "http://host:port" or "https://host[:port]", optionally ending in /v1
  std::string api_key;  // sent as a bearer token when not empty
  std::string model;    // "" -> the server's first model in /v1/models
  int top_logprobs = 20;
  int timeout_s = 300;
};

struct RemoteToken {
  std::string text;      // text this token added to the completion
  std::string token;     // the token's own string as the server spells it ("" when not reported)
  float logprob = 0.0f;  // of the chosen token; NaN when the server reported none
  std::vector<std::pair<std::string, float>> top;  // alternatives, most likely first
  double t_ms = 0.0;     // since the request was sent
};

struct RemoteResult {
  std::string text;
  std::string finish_reason;  // as the server said: "stop" | "length" | ...
  int num_prompt_tokens = 0, num_generated = 0, num_cached_tokens = 0;  // from usage, when reported
  double ttft_ms = 0.0;  // client side: request sent -> first token
  double tpot_ms = 0.0;  // client side: mean gap between tokens after the first
};

class RemoteClient {
 public:
  // Checks the server answers GET /v1/models and picks the model.
  static Result<std::unique_ptr<RemoteClient>> connect(const RemoteOptions& options);
  ~RemoteClient();

  const std::string& model() const { return model_; }
  // Streams one completion of `prompt`; on_token returning false cancels it
  // (the connection is closed, which a Glassbox server turns into a cancel).
  Result<RemoteResult> complete(const std::string& prompt, const SamplerSettings& sampling, int max_tokens,
                                const std::function<bool(const RemoteToken&)>& on_token);
  // The server's Prometheus samples ("name{labels}" -> value); an error when it
  // has no /metrics.
  Result<std::map<std::string, double>> metrics();

 private:
  struct Impl;
  explicit RemoteClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string model_;
};

}  // namespace gb::server
