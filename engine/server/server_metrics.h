// ServerMetrics: the serving numbers GET /metrics exposes in Prometheus text
// format (exposition format 0.0.4): latency histograms (TTFT, TPOT, queue time,
// end-to-end), running/waiting requests, KV block use, prefix-cache queries and
// hits, preemptions, prompt/generated tokens, finished requests by reason and
// HTTP responses by status. Names are documented in docs/server.md.
//
// Threads: the engine thread records, HTTP handler threads record responses and
// render; one mutex guards everything (updates are a few per step).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace gb::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of metric `name`.
  void render(const std::string& name, std::string& out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;    // (num_buckets) ascending upper bounds; +Inf is implicit
  std::vector<uint64_t> counts_;  // (num_buckets + 1) non-cumulative counts, last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct KvGauges {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_blocks_total = 0;
  int32_t num_blocks_owned = 0;   // held by live requests
  int32_t num_blocks_cached = 0;  // prefix cache, nobody holds them
};

// One finished engine request, as the metrics see it.
struct FinishedSample {
  std::string reason;  // engine reason: stop, max_tokens, length, cancelled, error
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;
  int32_t num_generated = 0;
  double ttft_s = 0.0;    // < 0: no token was produced
  double tpot_s = 0.0;    // < 0: fewer than two tokens
  double e2e_s = 0.0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void on_admitted(double queue_s);
  void on_finished(const FinishedSample& sample);
  void on_preemptions(int32_t count);
  void set_kv(const KvGauges& gauges);
  void on_http_response(int status);

  KvGauges kv() const;
  int64_t num_finished(const std::string& reason) const;
  std::string render() const;  // Prometheus text format

 private:
  mutable std::mutex mutex_;
  Histogram ttft_, tpot_, queue_, e2e_;
  KvGauges kv_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;  // prompt tokens looked up / served from the cache
  int64_t preemptions_ = 0;
  std::map<std::string, int64_t> finished_;       // by engine reason
  std::map<int, int64_t> http_responses_;         // by status code
};

}  // namespace gb::server
