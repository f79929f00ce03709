// `glassbox-cli serve-bench`: replays a workload (JSONL) through the continuous-
// batching Engine in real time and reports serving metrics: TTFT and TPOT
// percentiles, queueing delay, throughput, KV peak use, prefix hit rate,
// preemptions. This is how a user sizes a deployment, and how the scheduler's
// guarantees are checked from outside.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "backend/kv_pool_sizing.h"
#include "cli/command_registry.h"
#include "cli/kv_pool_options.h"
#include "cli/model_session.h"
#include "cli/workload.h"

namespace gb::cli {
namespace {

struct ServeBenchArgs {
  ModelOptions model;
  std::string workload;
  KvPoolOptions kv_pool;
  int32_t block_size = 16;
  int32_t max_batch_tokens = 512;
  int32_t max_seqs = 32;
  int32_t max_prefill_chunk = 0;
  bool json = false;
  bool emit_tokens = false;
  bool no_prefix_cache = false;
};

struct RequestResult {
  std::string finish_reason = "pending";
  std::string error;
  double queue_ms = -1, ttft_ms = -1, tpot_ms = -1, e2e_ms = -1;
  int32_t num_prompt_tokens = 0, num_cached_tokens = 0, num_preemptions = 0;
  std::vector<TokenId> generated;
};

// Linear interpolation between closest ranks (numpy's default).
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// What the replay measured: each request's result and the step counters.
struct ServeBenchStats {
  std::vector<RequestResult> results;   // by workload index
  std::map<uint64_t, size_t> index_of;  // request id -> workload index
  int32_t peak_blocks = 0, preemptions = 0, max_running = 0;
  double waste_max = 0.0, waste_sum = 0.0;  // empty slots in owned blocks per running sequence
  int64_t waste_samples = 0;
  int64_t generated_tokens = 0;
  double wall_s = 0.0;

  RequestResult* at(RequestId id) {
    auto it = index_of.find(id.value);
    return it == index_of.end() ? nullptr : &results[it->second];
  }

  void on_event(const TraceEvent& e) {
    if (const auto* t = std::get_if<TokenSampledEvent>(&e.body)) {
      if (auto* r = at(t->request)) r->generated.push_back(t->token);
      ++generated_tokens;
    } else if (const auto* adm = std::get_if<RequestAdmittedEvent>(&e.body)) {
      if (auto* r = at(adm->request); r && r->queue_ms < 0) r->queue_ms = adm->queue_ms;
    } else if (const auto* pre = std::get_if<RequestPreemptedEvent>(&e.body)) {
      if (auto* r = at(pre->request)) ++r->num_preemptions;
    } else if (const auto* f = std::get_if<RequestFinishedEvent>(&e.body)) {
      if (auto* r = at(f->request)) {
        r->finish_reason = f->reason;
        r->ttft_ms = f->ttft_ms;
        r->tpot_ms = f->tpot_ms;
        r->e2e_ms = f->e2e_ms;
        r->num_cached_tokens = f->num_cached_tokens;
      }
    } else if (const auto* s = std::get_if<StepEvent>(&e.body)) {
      peak_blocks = std::max(peak_blocks, s->num_blocks_owned);
      preemptions += s->num_preemptions;
      max_running = std::max(max_running, s->num_running);
    } else if (const auto* err = std::get_if<ErrorEvent>(&e.body)) {
      if (err->request)
        if (auto* r = at(*err->request)) r->error = err->message;
    }
  }

  // Internal fragmentation: empty slots in owned blocks, per sequence holding blocks.
  void sample_kv_waste(const Engine::KvUsage& kv) {
    if (kv.num_running == 0) return;
    const double per_seq = static_cast<double>(kv.num_empty_owned_slots) / static_cast<double>(kv.num_running);
    waste_max = std::max(waste_max, per_seq);
    waste_sum += per_seq;
    ++waste_samples;
  }
};

EngineConfig serve_bench_config(const ServeBenchArgs& a, int32_t context_length) {
  EngineConfig config;
  config.block_size = a.block_size;
  config.max_batch_tokens = a.max_batch_tokens;
  config.max_seqs = a.max_seqs;
  config.max_prefill_chunk = a.max_prefill_chunk;
  config.max_context = context_length;
  config.record_kv_events = false;
  config.record_tokens = false;  // per-token candidate records are for inspection, not serving
  return config;
}

// Submits the workload in arrival order, in real time, and steps the engine
// until every request is done.
Status replay(Engine& engine, const std::vector<WorkloadItem>& workload, bool no_prefix_cache, ServeBenchStats& stats) {
  std::vector<size_t> order(workload.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return workload[x].arrival_ms < workload[y].arrival_ms; });
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  size_t next = 0;
  while (next < order.size() || engine.has_work()) {
    while (next < order.size() && workload[order[next]].arrival_ms <= elapsed_ms()) {
      const size_t i = order[next++];
      RequestResult& result = stats.results[i];
      result.num_prompt_tokens = static_cast<int32_t>(workload[i].request.prompt_ids.size());
      GenerationRequest request = workload[i].request;
      if (no_prefix_cache) request.use_prefix_cache = false;
      auto id = engine.submit(std::move(request));
      if (id) stats.index_of[id->value] = i;
      else {
        result.finish_reason = "rejected";
        result.error = id.error().message;
      }
    }
    if (!engine.has_work()) {
      if (next < order.size()) {
        const double wait = workload[order[next]].arrival_ms - elapsed_ms();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(wait));
      }
      continue;
    }
    auto stepped = engine.step();
    if (!stepped) return stepped.error();
    for (const TraceEvent& e : engine.drain_events()) stats.on_event(e);
    stats.sample_kv_waste(engine.kv_usage(/*count_empty_slots=*/true));
  }
  stats.wall_s = elapsed_ms() / 1000.0;
  return {};
}

// The latency samples of the requests that ran, and their prompt and cached tokens.
struct Latencies {
  std::vector<double> ttft, tpot, queue;
  int64_t prompt_tokens = 0, cached_tokens = 0;
};

Latencies collect_latencies(const std::vector<RequestResult>& results) {
  Latencies l;
  for (const RequestResult& r : results) {
    if (r.ttft_ms >= 0 && r.finish_reason != "rejected") l.ttft.push_back(r.ttft_ms);
    if (r.tpot_ms > 0) l.tpot.push_back(r.tpot_ms);
    if (r.queue_ms >= 0) l.queue.push_back(r.queue_ms);
    if (r.finish_reason != "rejected") {
      l.prompt_tokens += r.num_prompt_tokens;
      l.cached_tokens += r.num_cached_tokens;
    }
  }
  return l;
}

nlohmann::json summary_json(const ServeBenchStats& s, const Latencies& l, const Engine& engine, int32_t block_size,
                            size_t bytes_per_block) {
  const double wall_s = s.wall_s;
  return {
      {"num_requests", s.results.size()},
      {"ttft_ms_p50", percentile(l.ttft, 50)}, {"ttft_ms_p90", percentile(l.ttft, 90)}, {"ttft_ms_p99", percentile(l.ttft, 99)},
      {"tpot_ms_p50", percentile(l.tpot, 50)}, {"tpot_ms_p90", percentile(l.tpot, 90)},
      {"queue_ms_p50", percentile(l.queue, 50)}, {"queue_ms_p90", percentile(l.queue, 90)},
      {"throughput_tok_s", wall_s > 0 ? static_cast<double>(s.generated_tokens) / wall_s : 0.0},
      {"generated_tokens", s.generated_tokens},
      {"wall_s", wall_s},
      {"kv_peak_blocks", s.peak_blocks},
      {"kv_peak_bytes", static_cast<double>(s.peak_blocks) * static_cast<double>(bytes_per_block)},
      {"kv_pool_blocks", engine.num_blocks()},
      {"kv_bytes_per_block", bytes_per_block},
      {"prefix_hit_rate", l.prompt_tokens > 0 ? static_cast<double>(l.cached_tokens) / static_cast<double>(l.prompt_tokens) : 0.0},
      {"preemptions", s.preemptions},
      {"max_running_seqs", s.max_running},
      // Sequences the same bytes would hold if each got a contiguous max-context slab.
      {"contiguous_equivalent_seqs", engine.num_blocks() * block_size / std::max(1, engine.max_context())},
      {"kv_waste_slots_per_seq_max", s.waste_max},
      {"kv_waste_slots_per_seq_mean", s.waste_samples > 0 ? s.waste_sum / static_cast<double>(s.waste_samples) : 0.0},
  };
}

nlohmann::json requests_json(const std::vector<RequestResult>& results, bool emit_tokens) {
  nlohmann::json requests = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const RequestResult& r = results[i];
    nlohmann::json j = {{"index", i},
                        {"finish_reason", r.finish_reason},
                        {"ttft_ms", r.ttft_ms},
                        {"tpot_ms", r.tpot_ms},
                        {"queue_ms", r.queue_ms},
                        {"num_prompt_tokens", r.num_prompt_tokens},
                        {"num_cached_tokens", r.num_cached_tokens},
                        {"num_generated", r.generated.size()},
                        {"num_preemptions", r.num_preemptions}};
    if (!r.error.empty()) j["error"] = r.error;
    if (emit_tokens) j["generated_ids"] = r.generated;
    requests.push_back(std::move(j));
  }
  return requests;
}

void print_text(const ServeBenchStats& s, const Latencies& l, const nlohmann::json& summary, const Engine& engine) {
  std::printf("%zu requests in %.2f s: %.1f tok/s\n", s.results.size(), s.wall_s,
              summary["throughput_tok_s"].get<double>());
  std::printf("TTFT ms p50 %.1f p90 %.1f p99 %.1f | TPOT ms p50 %.2f p90 %.2f | queue ms p50 %.1f\n",
              percentile(l.ttft, 50), percentile(l.ttft, 90), percentile(l.ttft, 99), percentile(l.tpot, 50),
              percentile(l.tpot, 90), percentile(l.queue, 50));
  std::printf("KV peak %d of %d blocks (%.1f MB), prefix hit rate %.3f, preemptions %d\n", s.peak_blocks,
              engine.num_blocks(), summary["kv_peak_bytes"].get<double>() / 1e6,
              summary["prefix_hit_rate"].get<double>(), s.preemptions);
  for (const RequestResult& r : s.results)
    if (!r.error.empty()) std::printf("  rejected/error: %s\n", r.error.c_str());
}

int run_serve_bench(const ServeBenchArgs& a) {
  auto session = open_model_session(a.model);
  if (!session) return fail(session.error().message);
  auto workload = load_workload(a.workload, *session->tokenizer);
  if (!workload) return fail(workload.error().message);
  EngineConfig config = serve_bench_config(a, session->context_length);
  apply_session(*session, config);
  if (Status st = apply_kv_pool_options(a.kv_pool, session->model->config, config); !st)
    return fail(st.error().message);
  const ModelConfig model_config = session->model->config;
  Engine engine(session->model, session->tokenizer, std::move(session->backend), config);
  if (Status st = engine.start(); !st) return fail(st.error().message);
  const size_t bytes_per_block = kv_bytes_per_block(model_config, a.block_size, config.kv_types);

  ServeBenchStats stats;
  stats.results.resize(workload->size());
  if (Status st = replay(engine, *workload, a.no_prefix_cache, stats); !st) return fail(st.error().message);

  const Latencies latencies = collect_latencies(stats.results);
  const nlohmann::json summary = summary_json(stats, latencies, engine, a.block_size, bytes_per_block);
  if (a.json) {
    const nlohmann::json requests = requests_json(stats.results, a.emit_tokens);
    std::printf("%s\n", nlohmann::json({{"summary", summary}, {"requests", requests}}).dump(2).c_str());
  } else {
    print_text(stats, latencies, summary, engine);
  }
  return 0;
}

const CommandRegistrar serve_bench_command("serve-bench", "Replay a request workload through continuous batching",
                                 [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<ServeBenchArgs>();
  add_model_options(sub, a->model);
  sub.add_option("--workload", a->workload, "JSONL workload: prompt|prompt_ids, max_tokens, arrival_ms, priority, sampling, isolation_key")->required();
  add_kv_pool_options(sub, a->kv_pool);
  sub.add_option("--block-size", a->block_size, "Tokens per KV block")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-batch-tokens", a->max_batch_tokens, "Token budget per step")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-seqs", a->max_seqs, "Sequences per step")->check(CLI::PositiveNumber)->capture_default_str();
  sub.add_option("--max-prefill-chunk", a->max_prefill_chunk, "Largest prefill chunk (0 = budget)");
  sub.add_flag("--json", a->json, "One JSON object: summary and requests");
  sub.add_flag("--emit-tokens", a->emit_tokens, "Include every request's generated ids");
  sub.add_flag("--no-prefix-cache", a->no_prefix_cache, "Do not reuse cached prefixes (cold runs)");
  return [a] { return run_serve_bench(*a); };
});

}  // namespace
}  // namespace gb::cli
