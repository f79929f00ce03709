// RemoteClient: another OpenAI-compatible server (another Glassbox, llama.cpp's
// llama-server, vLLM) used as the engine (issue 17, the remote backend). It
// streams completions and chat completions with logprobs and reports, per
// token, what the API can show: the text, the chosen token's logprob and the
// top alternatives (up to 20); timings are measured on this side (client TTFT
// and TPOT). What the API cannot show (token ids, sampler stages, the random
// draw) is absent, never made up. It also scores a text through `echo` +
// `logprobs` with `max_tokens` 0 (prompt logprobs, as vLLM and Glassbox
// answer), asks for n choices at once (Compare lanes), and scrapes the server's
// Prometheus /metrics (server/remote_metrics.h reads the samples).
// No method throws: a server's answer is read by the type-checked parsers of
// client/remote_response.h, and an answer of the wrong shape is an error for
// that call, naming the field.
// Threads: one RemoteClient per thread (it holds one HTTP connection), except
// abort(), which any thread may call to end a request in flight.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "sampling/sampler_settings.h"
#include "template/chat_prompt.h"

namespace gb::server {

struct RemoteOptions {
  std::string url;      // "http://host:port" or "https://host[:port]", optionally ending in /v1
  std::string api_key;  // sent as a bearer token when not empty
  std::string model;    // "" -> the server's first model in /v1/models
  int top_logprobs = 20;
  int timeout_s = 300;
  bool probe = true;    // GET /v1/models on connect (false: trust `model`, which must be set)
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
  std::string finish_reason;  // as the server said: "stop" | "length" | ... ("cancelled" when we hung up)
  int num_prompt_tokens = 0, num_generated = 0, num_cached_tokens = 0;  // from usage, when reported
  double ttft_ms = 0.0;  // client side: request sent -> first token
  double tpot_ms = 0.0;  // client side: mean gap between tokens after the first
  double e2e_ms = 0.0;   // client side: request sent -> last byte
};

// One choice of a non-streamed request with n choices.
struct RemoteChoice {
  std::string text;
  std::string finish_reason;
  std::vector<RemoteToken> tokens;  // with logprobs, one per token (t_ms = 0: not streamed)
};

// One prompt token scored by the server (echo + logprobs).
struct RemoteScoredToken {
  std::string token;
  std::optional<float> logprob;  // none for the first token (nothing precedes it)
  std::vector<std::pair<std::string, float>> top;  // most likely first
};

class RemoteClient {
 public:
  // Checks the server answers GET /v1/models and picks the model.
  static Result<std::unique_ptr<RemoteClient>> connect(const RemoteOptions& options);
  ~RemoteClient();

  const std::string& model() const { return model_; }
  const RemoteOptions& options() const;
  using TokenCallback = std::function<bool(const RemoteToken&)>;
  // Streams one completion of `prompt`; on_token returning false cancels it
  // (the connection is closed, which a Glassbox server turns into a cancel).
  Result<RemoteResult> complete(const std::string& prompt, const SamplerSettings& sampling, int max_tokens,
                                const TokenCallback& on_token);
  // Streams one chat completion: the server renders `messages` with the
  // model's template; `template_kwargs_json` ("" or a JSON object) goes as
  // chat_template_kwargs (enable_thinking ...).
  Result<RemoteResult> chat(const std::vector<ChatMessage>& messages, const SamplerSettings& sampling, int max_tokens,
                            const std::string& template_kwargs_json, const TokenCallback& on_token);
  // n choices of one prompt, not streamed (seed, if set, as the request's seed).
  Result<std::vector<RemoteChoice>> complete_n(const std::string& prompt, const SamplerSettings& sampling,
                                               int max_tokens, int n);
  // The server's log-probabilities of the prompt's own tokens: POST
  // /v1/completions {echo: true, logprobs: top_n, max_tokens: 0}. A server that
  // cannot (no echo, or no prompt logprobs) gives an error naming what is missing.
  Result<std::vector<RemoteScoredToken>> score(const std::string& text, int top_n);
  // The server's Prometheus samples ("name{labels}" -> value); an error when it
  // has no /metrics.
  Result<std::map<std::string, double>> metrics();
  // Ends the request in flight now (closes its socket); safe from any thread.
  void abort();

 private:
  struct Impl;
  explicit RemoteClient(std::unique_ptr<Impl> impl);
  Result<RemoteResult> stream(const std::string& path, const std::string& body, bool chat,
                              const TokenCallback& on_token);
  std::unique_ptr<Impl> impl_;
  std::string model_;
};

// Prometheus text format -> samples ("name{labels}" -> value); comments and
// unparsable lines are skipped.
std::map<std::string, double> parse_prometheus_text(const std::string& text);

}  // namespace gb::server
