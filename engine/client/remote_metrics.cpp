#include "client/remote_metrics.h"

#include <initializer_list>
#include <vector>

namespace gb::server {

namespace {

struct MetricRow {
  std::optional<double> RemoteMetrics::*field;
  std::vector<const char*> names;  // first found wins
};

// The quantity -> the names each server family exports it under.
const std::vector<MetricRow>& metric_rows() {
  static const std::vector<MetricRow> rows = {
      {&RemoteMetrics::num_running, {"glassbox_num_requests_running", "vllm:num_requests_running", "llamacpp:requests_processing"}},
      {&RemoteMetrics::num_waiting, {"glassbox_num_requests_waiting", "vllm:num_requests_waiting", "llamacpp:requests_deferred"}},
      {&RemoteMetrics::kv_usage, {"glassbox_kv_cache_usage_perc", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                                  "llamacpp:kv_cache_usage_ratio"}},
      {&RemoteMetrics::kv_blocks_total, {"glassbox_kv_blocks_total"}},
      {&RemoteMetrics::kv_blocks_used, {"glassbox_kv_blocks_used"}},
      {&RemoteMetrics::kv_blocks_cached, {"glassbox_kv_blocks_cached"}},
      {&RemoteMetrics::prefix_queries, {"glassbox_prefix_cache_queries_total", "vllm:prefix_cache_queries_total",
                                        "vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries_total"}},
      {&RemoteMetrics::prefix_hits, {"glassbox_prefix_cache_hits_total", "vllm:prefix_cache_hits_total",
                                     "vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits_total"}},
      {&RemoteMetrics::prompt_tokens, {"glassbox_prompt_tokens_total", "vllm:prompt_tokens_total", "llamacpp:prompt_tokens_total"}},
      {&RemoteMetrics::generation_tokens, {"glassbox_generation_tokens_total", "vllm:generation_tokens_total",
                                           "llamacpp:tokens_predicted_total"}},
      {&RemoteMetrics::preemptions, {"glassbox_num_preemptions_total", "vllm:num_preemptions_total"}},
  };
  return rows;
}

// Sum of every series of `name` (with or without labels); nullopt when absent.
std::optional<double> sum_of(const std::map<std::string, double>& samples, const std::string& name) {
  std::optional<double> sum;
  for (auto it = samples.lower_bound(name); it != samples.end() && it->first.compare(0, name.size(), name) == 0; ++it) {
    if (it->first.size() != name.size() && it->first[name.size()] != '{') continue;  // a longer name
    sum = sum.value_or(0.0) + it->second;
  }
  return sum;
}

}  // namespace

std::optional<double> RemoteMetrics::prefix_hit_rate() const {
  if (!prefix_queries || !prefix_hits || *prefix_queries <= 0.0) return std::nullopt;
  return *prefix_hits / *prefix_queries;
}

RemoteMetrics read_remote_metrics(const std::map<std::string, double>& samples) {
  RemoteMetrics m;
  for (const MetricRow& row : metric_rows()) {
    for (const char* name : row.names) {
      if (auto v = sum_of(samples, name)) {
        m.*row.field = v;
        if (m.flavour.empty()) {
          const std::string n = name;
          m.flavour = n.rfind("glassbox_", 0) == 0 ? "glassbox" : n.rfind("vllm:", 0) == 0 ? "vllm" : "llama.cpp";
        }
        break;
      }
    }
  }
  return m;
}

}  // namespace gb::server
