// An OpenAI server on stories260K on a free loopback port, for the server
// tests: the engine (invariant sweeps on) behind an EngineWorker, an httplib
// client, and helpers to read server-sent events and Prometheus metrics.
#pragma once

#include <httplib.h>

#include <fstream>
#include <map>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/engine_worker.h"
#include "server/openai_request.h"
#include "server/openai_server.h"
#include "stories_fixture.h"

namespace gbtest {

struct ServerHarness {
  StoriesFixture stories;
  std::unique_ptr<gb::server::EngineWorker> worker;
  std::unique_ptr<gb::server::OpenAiServer> server;

  // `fixture` (default: stories260K) is the served model.
  explicit ServerHarness(gb::server::ServerConfig config = {}, gb::server::WorkerConfig worker_config = {},
                         gb::EngineConfig engine_config = {}, StoriesFixture fixture = {}) {
    stories = fixture.ok() ? std::move(fixture) : load_stories();
    if (!stories.ok()) return;
    worker = std::make_unique<gb::server::EngineWorker>(make_test_engine(stories, engine_config), worker_config);
    config.port = 0;
    server = std::make_unique<gb::server::OpenAiServer>(worker->hub(), stories.model, stories.tokenizer, config);
    worker->start();
    if (!server->start().ok()) server.reset();
  }
  ~ServerHarness() {
    if (server) server->stop();
    if (worker) worker->stop();
  }
  bool ok() const { return server != nullptr; }

  httplib::Client client(const std::string& key = "") const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(120, 0);
    if (!key.empty()) c.set_bearer_token_auth(key.c_str());
    return c;
  }

  // POST a JSON body; status -1 when the connection failed.
  std::pair<int, nlohmann::json> post(const std::string& path, const nlohmann::json& body, const std::string& key = "") const {
    auto c = client(key);
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    if (!r) return {-1, nlohmann::json()};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }

  // Prometheus samples: "name" or "name{labels}" -> value.
  std::map<std::string, double> metrics() const {
    std::map<std::string, double> out;
    auto c = client();
    auto r = c.Get("/metrics");
    if (!r) return out;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return out;
  }
};

// Another shared model file (relative to the shared dir) with its own tokenizer;
// not ok() when missing.
inline StoriesFixture load_fixture(const std::string& relative_path, int context_length) {
  StoriesFixture f;
  f.model_path = shared_file(relative_path);
  if (f.model_path.empty()) return f;
  gb::LoadOptions options;
  options.context_length = context_length;
  auto model = gb::load_model(f.model_path, options);
  if (!model) return f;
  auto tok = gb::load_tokenizer(**model, "");
  if (!tok) return f;
  f.model = *model;
  f.tokenizer = *tok;
  return f;
}

// Greedy text of the engine run directly (the reference for the HTTP answers).
inline std::string engine_greedy_text(const StoriesFixture& f, const std::string& prompt, int max_tokens) {
  auto engine = make_test_engine(f);
  gb::GenerationRequest r;
  r.prompt_ids = f.tokenizer->encode(prompt, true);
  r.sampling = gb::server::openai_default_sampling();
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  GB_CHECK(engine->submit(r).ok());
  GB_CHECK(engine->run_until_idle().ok());
  for (const gb::TraceEvent& e : engine->drain_events())
    if (const auto* fin = std::get_if<gb::RequestFinishedEvent>(&e.body)) return fin->text;
  return "<no finish>";
}

// The process's peak resident memory (VmHWM), KiB; -1 when unreadable.
inline long long vm_hwm_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

// The "data: ..." payloads of a server-sent event stream, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  return out;
}

}  // namespace gbtest
