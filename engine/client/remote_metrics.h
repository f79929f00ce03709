// RemoteMetrics: the serving gauges and counters of a remote OpenAI-compatible
// server, read from its Prometheus /metrics under whichever names it uses:
// Glassbox's own (glassbox_*), llama.cpp's llama-server (llamacpp:*, needs its
// --metrics flag) or vLLM's (vllm:*). One table row per quantity lists the
// names it goes by; a quantity the server does not export stays empty (never
// estimated). Labelled series of one name (vLLM's model_name=...) are summed.
// Threads: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace gb::server {

struct RemoteMetrics {
  std::string flavour;  // "glassbox" | "llama.cpp" | "vllm" | "" (none recognised)
  std::optional<double> num_running;        // requests being decoded
  std::optional<double> num_waiting;        // requests queued (llama-server: deferred)
  std::optional<double> kv_usage;           // 0..1 of the KV cache in use
  std::optional<double> kv_blocks_total;    // Glassbox only: pool size, used, prefix-cache-only
  std::optional<double> kv_blocks_used;
  std::optional<double> kv_blocks_cached;
  std::optional<double> prefix_queries;     // prompt tokens looked up in the prefix cache (counter)
  std::optional<double> prefix_hits;        // of those, served from it (counter)
  std::optional<double> prompt_tokens;      // counter
  std::optional<double> generation_tokens;  // counter
  std::optional<double> preemptions;        // counter

  // hits / queries when both are known and queries > 0.
  std::optional<double> prefix_hit_rate() const;
};

RemoteMetrics read_remote_metrics(const std::map<std::string, double>& samples);

}  // namespace gb::server
