// Comparison: the driver (prompt once, forks per lane x sample, event
// bookkeeping, release). See comparison.h; statistics in comparison_stats.cpp.
#include "runtime/comparison.h"

#include <chrono>
#include <set>

#include "kv/scheduler.h"
#include "runtime/engine.h"

namespace gb {
namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Status validate_comparison(const ComparisonSpec& spec) {
  const auto num_lanes = static_cast<int32_t>(spec.lanes.size());
  if (num_lanes < kMinComparisonLanes || num_lanes > kMaxComparisonLanes)
    return make_error("comparison: " + std::to_string(num_lanes) + " lanes; give " +
                      std::to_string(kMinComparisonLanes) + " to " + std::to_string(kMaxComparisonLanes));
  if (spec.num_samples < 1 || spec.num_samples > kMaxComparisonSamples)
    return make_error("comparison: " + std::to_string(spec.num_samples) + " samples per lane; give 1 to " +
                      std::to_string(kMaxComparisonSamples));
  if (spec.max_tokens < 1) return make_error("comparison: max_tokens must be at least 1");
  if (spec.prompt_ids.empty()) return make_error("comparison: empty prompt");
  std::set<std::string> names;
  for (size_t i = 0; i < spec.lanes.size(); ++i) {
    const ComparisonLane& lane = spec.lanes[i];
    const std::string which = "comparison lane " + std::to_string(i) + " (" + lane.name + ")";
    if (lane.name.empty()) return make_error("comparison lane " + std::to_string(i) + ": the name is empty");
    if (!names.insert(lane.name).second) return make_error(which + ": another lane has the same name");
    if (Status st = validate(lane.settings); !st) return make_error(which + ": " + st.error().message);
    if (auto policy = resolve_kv_policy(lane.kv_policy); !policy)
      return make_error(which + ": " + policy.error().message);
  }
  return {};
}

Result<std::unique_ptr<Comparison>> Comparison::start(Engine& engine, ComparisonSpec spec) {
  GB_TRY(validate_comparison(spec));
  std::unique_ptr<Comparison> c(new Comparison());
  c->spec_ = std::move(spec);
  for (ComparisonLane& lane : c->spec_.lanes) {
    lane.kv_policy = resolve_kv_policy(lane.kv_policy).value();
    if (!lane.kv_policy.active()) continue;
    GenerationRequest probe;
    probe.kv_policy = lane.kv_policy;
    if (Status st = engine.check_kv_eviction(probe); !st)
      return make_error("comparison lane " + lane.name + ": " + st.error().message);
  }
  c->start_ms_ = now_ms();
  // The prompt runs once; the token it samples (greedy, unrecorded) is thrown
  // away -- the request only exists to own the prompt's KV blocks.
  GenerationRequest prompt;
  prompt.prompt_ids = c->spec_.prompt_ids;
  prompt.sampling.temperature = 0.0f;
  prompt.sampling.top_n_record = 0;
  prompt.sampling.max_tokens = 1;
  prompt.retain_kv = true;
  prompt.ignore_eos = c->spec_.ignore_eos;
  prompt.isolation = c->spec_.isolation;
  auto id = engine.submit(std::move(prompt));
  if (!id) return make_error("comparison: the prompt was refused: " + id.error().message);
  c->prompt_request_ = *id;
  return c;
}

ComparisonSample* Comparison::find(RequestId id) {
  auto it = sample_of_.find(id.value);
  return it == sample_of_.end() ? nullptr : &samples_[it->second];
}

const ComparisonSample& Comparison::sample(int32_t lane, int32_t s) const {
  GB_CHECK(lane >= 0 && lane < static_cast<int32_t>(spec_.lanes.size()) && s >= 0 && s < spec_.num_samples);
  return samples_[static_cast<size_t>(lane * spec_.num_samples + s)];
}

void Comparison::observe(const TraceEvent& event) {
  if (const auto* t = std::get_if<TokenSampledEvent>(&event.body)) {
    if (ComparisonSample* s = find(t->request)) {
      s->tokens.push_back(*t);
      s->token_ids.push_back(t->token);
      s->text += t->text;
    }
  } else if (const auto* f = std::get_if<RequestFinishedEvent>(&event.body)) {
    if (f->request == prompt_request_ && !prompt_done_) {
      prompt_done_ = true;
      if (f->reason == "error" || f->reason == "cancelled") prompt_error_ += " (" + f->reason + ")";
    } else if (ComparisonSample* s = find(f->request)) {
      s->finished = true;
      s->stop_reason = f->reason;
      s->text = f->text;
      s->tokens_per_s = f->tpot_ms > 0 ? 1000.0 / f->tpot_ms : 0.0;
    }
  } else if (const auto* e = std::get_if<ErrorEvent>(&event.body)) {
    if (!e->request) return;
    if (*e->request == prompt_request_) prompt_error_ = e->message;
    else if (ComparisonSample* s = find(*e->request)) s->error = e->message;
  }
}

// A finished sample frees its blocks at once (not retained): the pool then
// always has room for the samples still waiting (a retained sample could
// starve them).
Result<RequestId> Comparison::start_sample(Engine& engine, const ComparisonLane& lane, const SamplerSettings& settings) {
  const auto num_prompt = static_cast<int32_t>(spec_.prompt_ids.size());
  if (!lane.kv_policy.active()) return engine.fork_with_settings(prompt_request_, num_prompt, settings, false);
  // The prompt again, under the policy: submit() at the prompt's end draws what
  // a fork there would (the same counter), so CRN still lines the lanes up.
  GenerationRequest r;
  r.prompt_ids = spec_.prompt_ids;
  r.sampling = settings;
  r.ignore_eos = spec_.ignore_eos;
  r.isolation = spec_.isolation;
  r.kv_policy = lane.kv_policy;
  return engine.submit(std::move(r));
}

Status Comparison::fork_lanes(Engine& engine) {
  const auto num_lanes = static_cast<int32_t>(spec_.lanes.size());
  samples_.clear();
  sample_of_.clear();
  for (int32_t i = 0; i < num_lanes; ++i) {
    const SamplerSettings& lane = spec_.lanes[static_cast<size_t>(i)].settings;
    const uint64_t key = spec_.crn ? 0 : lane_stream_key(lane);
    for (int32_t j = 0; j < spec_.num_samples; ++j) {
      SamplerSettings s = lane;
      s.seed = comparison_sample_seed(spec_.seed, j, key);
      s.max_tokens = spec_.max_tokens;
      s.top_n_record = std::max(1, s.top_n_record);  // the statistics need the raw log-probability
      for (TokenId stop : spec_.stop_token_ids)
        if (!s.is_stop_token(stop)) s.stop_token_ids.push_back(stop);
      auto id = start_sample(engine, spec_.lanes[static_cast<size_t>(i)], s);
      if (!id) return make_error("comparison lane " + spec_.lanes[static_cast<size_t>(i)].name + ", sample " +
                                 std::to_string(j) + ": " + id.error().message);
      ComparisonSample cs;
      cs.lane = i;
      cs.sample = j;
      cs.seed = s.seed;
      cs.request = *id;
      sample_of_[id->value] = samples_.size();
      samples_.push_back(std::move(cs));
      forked_ = true;  // from the first fork on, close() has something to release
    }
  }
  // Which prompt blocks every sample holds by reference (not a copy).
  const KvCacheManager& kv = engine.scheduler().kv_cache();
  const std::vector<int32_t> parent = kv.table(prompt_request_).block_ids();
  num_prompt_blocks_shared_ = static_cast<int32_t>(parent.size());
  for (const ComparisonSample& s : samples_) {
    if (spec_.lanes[static_cast<size_t>(s.lane)].kv_policy.active()) continue;  // not a fork
    const std::vector<int32_t> child = kv.table(s.request).block_ids();
    int32_t n = 0;
    while (n < static_cast<int32_t>(std::min(parent.size(), child.size())) && parent[n] == child[n]) ++n;
    num_prompt_blocks_shared_ = std::min(num_prompt_blocks_shared_, n);
  }
  // Slots a sliding window released (-1 in every table) are not blocks anyone holds.
  shared_prompt_blocks_.clear();
  for (int32_t i = 0; i < num_prompt_blocks_shared_; ++i)
    if (parent[static_cast<size_t>(i)] >= 0) shared_prompt_blocks_.push_back(parent[static_cast<size_t>(i)]);
  num_prompt_blocks_shared_ = static_cast<int32_t>(shared_prompt_blocks_.size());
  return {};
}

void Comparison::finalize() {
  for (ComparisonSample& s : samples_) {
    s.stats = compute_sample_stats(s.tokens);
    s.first_divergence = s.lane == 0 ? std::nullopt
                                     : first_divergence(samples_[static_cast<size_t>(s.sample)].token_ids, s.token_ids);
  }
  wall_ms_ = now_ms() - start_ms_;
  done_ = true;
}

Status Comparison::advance(Engine& engine) {
  if (closed_ || done_) return {};
  if (!forked_) {
    if (!prompt_done_) return {};
    if (!prompt_error_.empty()) return make_error("comparison: the prompt failed: " + prompt_error_);
    return fork_lanes(engine);
  }
  for (const ComparisonSample& s : samples_)
    if (!s.finished) return {};
  finalize();
  return {};
}

void Comparison::close(Engine& engine) {
  if (closed_) return;
  closed_ = true;
  for (ComparisonSample& s : samples_) {
    if (!s.finished) engine.cancel(s.request);
    engine.release(s.request);
  }
  engine.release(prompt_request_);
}

Result<std::unique_ptr<Comparison>> run_comparison(Engine& engine, ComparisonSpec spec,
                                                   const std::function<void(const TraceEvent&)>& on_event) {
  auto started = Comparison::start(engine, std::move(spec));
  if (!started) return started.error();
  std::unique_ptr<Comparison> c = std::move(*started);
  const auto pump = [&] {
    for (const TraceEvent& e : engine.drain_events()) {
      if (on_event) on_event(e);
      c->observe(e);
    }
  };
  const auto fail = [&](const Error& error) -> Result<std::unique_ptr<Comparison>> {
    c->close(engine);
    pump();
    return error;
  };
  pump();
  while (true) {
    if (Status st = c->advance(engine); !st) return fail(st.error());
    if (c->done()) break;
    if (!engine.has_work()) return fail(make_error("comparison: the engine stopped before every sample finished"));
    auto stepped = engine.step();
    if (!stepped) return fail(stepped.error());
    pump();
    // Work left but nothing could run (the pool cannot hold what waits): stop.
    if (!*stepped && !c->done() && c->forked())
      return fail(make_error("comparison: the KV pool (" + std::to_string(engine.num_blocks()) +
                             " blocks) cannot hold the waiting samples; use fewer samples or tokens"));
  }
  c->close(engine);
  pump();
  return c;
}

}  // namespace gb
