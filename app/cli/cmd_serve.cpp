// `glassbox-cli serve`: an OpenAI-compatible HTTP server on one model
// (engine/server, docs/server.md). The engine runs on the server's worker
// thread with continuous batching; this thread waits for SIGINT / SIGTERM and
// then shuts down cleanly. Prints one line "glassbox-cli serve: listening on
// http://HOST:PORT (model NAME)" on stdout once it accepts connections (with
// --port 0 that line is how callers learn the port).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <pthread.h>

#include "cli/command_registry.h"
#include "cli/kv_pool_options.h"
#include "cli/model_session.h"
#include "server/engine_worker.h"
#include "server/openai_server.h"

namespace gb::cli {
namespace {

struct ServeArgs {
  ModelOptions model;
  server::ServerConfig server;
  int32_t max_queue = 256;
  int32_t step_interval_ms = 0;
  KvPoolOptions kv_pool;
  int32_t block_size = 16;
  int32_t max_batch_tokens = 512;
  int32_t max_seqs = 32;
  int32_t max_prefill_chunk = 0;
};

Result<EngineConfig> engine_config(const ServeArgs& a, const ModelSession& session) {
  EngineConfig config;
  config.block_size = a.block_size;
  config.max_batch_tokens = a.max_batch_tokens;
  config.max_seqs = a.max_seqs;
  config.max_prefill_chunk = a.max_prefill_chunk;
  apply_session(session, config);
  config.record_kv_events = false;  // nobody watches the KV map from the CLI
  config.record_tokens = true;      // logprobs come from the token records
  GB_TRY(apply_kv_pool_options(a.kv_pool, session.model->config, config));
  return config;
}

int run_serve(ServeArgs& a) {
  // Block the stop signals before any thread starts, so that they all inherit
  // the mask and this thread alone receives them in sigwait().
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  for (const std::string& key : a.server.api_keys)
    if (key.empty()) return fail("--api-key: an empty key would let nobody in");
  // Checked again by OpenAiServer::start(); said here before the model loads.
  if (!server::is_loopback_host(a.server.host) && a.server.api_keys.empty()) {
    if (!a.server.insecure_no_key)
      return fail("refusing to serve on " + a.server.host +
                  " without --api-key: anyone who can reach it could use the model (--insecure-no-key to do it anyway)");
    std::fprintf(stderr, "glassbox-cli serve: WARNING: serving on %s with no API key: anyone who can reach this "
                         "address can use the model\n", a.server.host.c_str());
  }
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  auto config = engine_config(a, *session);
  if (!config) return fail(config.error().message);
  auto engine = std::make_unique<Engine>(session->model, session->tokenizer, std::move(session->backend), *config);
  if (Status st = engine->start(); !st) return fail(st.error().message);
  server::EngineWorker worker(std::move(engine), server::WorkerConfig{a.max_queue, std::chrono::milliseconds(a.step_interval_ms)});
  server::OpenAiServer http(worker.hub(), session->model, session->tokenizer, a.server);
  worker.start();
  if (Status st = http.start(); !st) return fail(st.error().message);
  std::printf("glassbox-cli serve: listening on %s (model %s)\n", http.address().c_str(), http.model_name().c_str());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::fprintf(stderr, "glassbox-cli serve: stopping (signal %d)\n", signal_number);
  // The worker first: it answers queued submissions and ends every live
  // request, so the handler threads http.stop() joins are not left waiting.
  worker.stop();
  http.stop();
  return 0;
}

const CommandRegistrar serve_command("serve", "Serve the model over an OpenAI-compatible HTTP API", [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<ServeArgs>();
  add_model_options(sub, a->model);
  server::ServerConfig& s = a->server;
  sub.add_option("--host", s.host, "Address to listen on (loopback by default; 0.0.0.0 for every interface)")->capture_default_str();
  sub.add_option("--port", s.port, "Port (0: any free port, printed on stdout)")->check(CLI::Range(0, 65535))->capture_default_str();
  sub.add_option("--api-key", s.api_keys, "Key clients must send as 'Authorization: Bearer KEY'; repeatable (one tenant per key)");
  sub.add_option("--allow-origin", s.allowed_origins,
                 "Web origin whose browser requests are accepted (e.g. http://localhost:3000; '*' for any); repeatable. "
                 "Others get 403");
  sub.add_option("--allow-host", s.allowed_hosts,
                 "Host name clients may use besides localhost, 127.0.0.1, [::1] and --host; repeatable. Others get 403 "
                 "(a page re-resolving its own name to this address: DNS rebinding)");
  sub.add_flag("--insecure-no-key", s.insecure_no_key,
               "Serve on a non-loopback --host without --api-key (refused otherwise: anyone on the network could use it)");
  sub.add_option("--served-model-name", s.model_name, "Model id clients use (default: the file name without extension)");
  sub.add_option("--max-queue", a->max_queue, "Requests waiting for admission before new ones get 429")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--step-interval-ms", a->step_interval_ms, "Slow motion: at least this long between engine steps")->check(CLI::NonNegativeNumber);
  sub.add_option("--max-body-bytes", s.max_body_bytes, "Largest request body (413 above)")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-connections", s.max_connections, "Open connections at once (more get 503 and are closed)")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-handlers", s.max_threads, "Requests handled at once (worker threads; a streaming answer holds one)")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--header-timeout-ms", s.header_timeout_ms, "A request's header must arrive within this")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--body-timeout-ms", s.body_timeout_ms, "A request's body must arrive within this")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--idle-timeout-ms", s.idle_timeout_ms, "How long a kept-alive connection waits for its next request")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-n", s.max_n, "Largest n (choices per prompt)")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-prompt-tokens", s.max_prompt_tokens, "Longest prompt in tokens (0: the context minus one)");
  sub.add_option("--record-top-n", s.record_top_n, "Candidates recorded per token when the client asks no logprobs")->capture_default_str();
  add_kv_pool_options(sub, a->kv_pool);
  sub.add_option("--block-size", a->block_size, "Tokens per KV block")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-batch-tokens", a->max_batch_tokens, "Token budget per step")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-seqs", a->max_seqs, "Sequences per step")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-prefill-chunk", a->max_prefill_chunk, "Largest prefill chunk (0 = budget)");
  return [a] { return run_serve(*a); };
});

}  // namespace
}  // namespace gb::cli
