#include "runtime/engine.h"
#include "runtime/engine_request_state.h"

#include <algorithm>
#include <cmath>

#include "backend/kv_pool_sizing.h"
#include "kv/scheduler.h"
#include "runtime/step_layout.h"
#include "sampling/reasoning_budget.h"
#include "sampling/sampler_chain.h"
#include "sampling/sampler_rng.h"
#include "sampling/sampler_settings_json.h"
#include "sampling/stop_string_matcher.h"
#include "speculative/speculative_decoder.h"

namespace gb {

using Clock = std::chrono::steady_clock;

// Everything the engine keeps per request beside the scheduler's Request.

namespace {
// The last token id of a text's encoding: the id a marker string ends with.
std::optional<TokenId> last_token_of(const Tokenizer& tokenizer, const std::string& text) {
  const std::vector<TokenId> ids = tokenizer.encode(text, false);
  if (ids.empty()) return std::nullopt;
  return ids.back();
}

// The inspector's record for a token the picker did not choose (an accepted
// draft, a verifier's resample or bonus, a forced token): the candidates and
// stage probabilities are those of this position's logits and history; the
// chosen-token fields describe `token`. `draw` is -1: no picker draw was used.
void record_for_token(SamplerChain& chain, std::span<const float> logits, std::span<const TokenId> history,
                      TokenId token, TokenRecord& record) {
  if (!chain.sample_with_draws(logits, history, 0.5, 1.0, &record)) {
    record = TokenRecord{};
    return;
  }
  record.chosen = token;
  record.chosen_logit = logits[static_cast<size_t>(token)];
  record.draw = -1.0;
  record.chosen_prob = 0.0f;
  record.chosen_prob_before = 0.0f;
  if (!record.top.empty()) {
    const double log_z = record.top.front().logit - std::log(static_cast<double>(record.top.front().prob_before));
    record.chosen_prob_before = static_cast<float>(std::exp(record.chosen_logit - log_z));
  }
  for (const CandidateRecord& c : record.top)
    if (c.id == token && c.removed_by_stage < 0 && !c.prob_after_stage.empty()) record.chosen_prob = c.prob_after_stage.back();
  int32_t rank = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    rank += logits[i] > record.chosen_logit || (logits[i] == record.chosen_logit && static_cast<TokenId>(i) < token);
  record.chosen_rank = rank;
}
}  // namespace

// Fills what only the tokenizer knows: DRY's breaker ids from its breaker
// strings, and XTC's protected ids (newline and EOS, as text-generation-webui
// exempts them).
void Engine::complete_settings(SamplerSettings& s) const {
  if (s.dry.sequence_breaker_ids.empty())
    for (const std::string& b : s.dry.sequence_breakers)
      if (auto id = last_token_of(*tokenizer_, b)) s.dry.sequence_breaker_ids.push_back(*id);
  if (s.xtc.protected_ids.empty()) {
    s.xtc.protected_ids.push_back(tokenizer_->eos_id());
    if (auto nl = last_token_of(*tokenizer_, "\n")) s.xtc.protected_ids.push_back(*nl);
  }
}

void Engine::reset_helpers(RequestState& rs) const {
  rs.chain = std::make_unique<SamplerChain>(rs.settings);
  rs.stop = std::make_unique<StopStringMatcher>(rs.settings.stop_strings);
  rs.budget.reset();
  if (rs.settings.reasoning.max_tokens >= 0)
    rs.budget = std::make_unique<ReasoningBudget>(rs.settings.reasoning,
                                                  tokenizer_->encode(rs.settings.reasoning.close_marker, false));
}

Engine::Engine(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
               std::unique_ptr<Backend> backend, const EngineConfig& config)
    : model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      backend_(std::move(backend)),
      config_(config),
      t0_(Clock::now()) {}

Engine::~Engine() = default;

double Engine::ms_now() const { return std::chrono::duration<double, std::milli>(Clock::now() - t0_).count(); }

void Engine::publish(TraceEventBody body) {
  TraceEvent e{next_seq_++, static_cast<int64_t>(ms_now() * 1000.0), std::move(body)};
  if (sink_) sink_(e);
  events_.push_back(std::move(e));
}

std::vector<TraceEvent> Engine::drain_events() {
  std::vector<TraceEvent> out;
  out.swap(events_);
  return out;
}

Status Engine::start() {
  const ModelConfig& c = model_->config;
  max_context_ = config_.max_context > 0 ? config_.max_context : c.context_length;
  // The pool size: explicit blocks, a byte budget, whole contexts or the
  // serving default (kv_pool_blocks states the rules).
  KvPoolPolicy pool;
  pool.num_blocks = config_.num_blocks;
  pool.num_bytes = config_.kv_bytes;
  pool.full_contexts = config_.kv_full_contexts;
  pool.max_seqs = config_.max_seqs;
  pool.max_context = max_context_;
  pool.block_size = config_.block_size;
  auto pool_blocks = kv_pool_blocks(c, pool);
  if (!pool_blocks) return pool_blocks.error();
  num_blocks_ = *pool_blocks;
  // Self-draft scratch blocks sit past the scheduler's blocks: the scheduler
  // never hands them out, the SpeculativeDecoder does.
  GB_TRY(backend_->init_kv_pool({num_blocks_ + std::max(0, config_.num_scratch_blocks), config_.block_size}));
  SchedulerConfig sc;
  sc.num_blocks = num_blocks_;
  sc.block_size = config_.block_size;
  sc.max_batch_tokens = config_.max_batch_tokens;
  sc.max_seqs = config_.max_seqs;
  sc.max_context = max_context_;
  sc.max_prefill_chunk = config_.max_prefill_chunk;
  sc.admission_watermark = config_.admission_watermark;
  sc.max_retained = config_.max_retained;
  sc.evict_retained = config_.evict_retained;
  scheduler_ = std::make_unique<Scheduler>(sc);
  SpeculativeLimits limits;
  limits.max_context = max_context_;
  limits.max_seqs = config_.max_seqs;
  limits.block_size = config_.block_size;
  limits.scratch_first = num_blocks_;
  limits.num_scratch = std::max(0, config_.num_scratch_blocks);
  spec_ = std::make_unique<SpeculativeDecoder>(model_, tokenizer_, *backend_, limits);
  logits_.clear();
  return {};
}

Result<RequestId> Engine::submit(GenerationRequest request) {
  GB_CHECK_MSG(scheduler_ != nullptr, "Engine::submit before start()");
  const RequestId id{next_request_id_++};
  const auto reject = [&](const std::string& message) -> Result<RequestId> {
    publish(ErrorEvent{id, message});
    return make_error(message);
  };
  if (Status st = validate(request.sampling); !st) return reject("request " + std::to_string(id.value) + ": " + st.error().message);
  for (TokenId t : request.prompt_ids)
    if (t < 0 || t >= model_->config.vocab_size)
      return reject("request " + std::to_string(id.value) + ": prompt token id " + std::to_string(t) +
                    " is outside the vocabulary");
  if (request.isolation.model.empty()) request.isolation.model = model_->path;

  auto rs = std::make_unique<RequestState>();
  rs->settings = request.sampling;
  complete_settings(rs->settings);
  reset_helpers(*rs);
  rs->rng = SamplerRng(request.sampling.seed);
  rs->decoder = std::make_unique<StreamingDecoder>(*tokenizer_);
  rs->decoder->prime(request.prompt_ids);
  rs->ignore_eos = request.ignore_eos;
  rs->num_prompt = static_cast<int32_t>(request.prompt_ids.size());
  rs->prompt_ids = request.prompt_ids;
  rs->submitted_ms = ms_now();

  RequestSpec spec;
  spec.id = id;
  spec.prompt_ids = request.prompt_ids;
  spec.max_tokens = request.sampling.max_tokens;
  spec.priority = request.priority;
  spec.isolation = request.isolation;
  spec.use_prefix_cache = request.use_prefix_cache;
  spec.retain_kv = request.retain_kv;
  if (request.speculative) {
    if (Status st = spec_->add_request(id, *request.speculative, rs->settings); !st)
      return reject("request " + std::to_string(id.value) + ": " + st.error().message);
  }
  const std::optional<BranchChoice> branch = choose_branch(request.branch_from, request.prompt_ids);
  bool forked = false;
  if (branch && branch->num_shared > 0) {
    // Copy-on-write up to the common prefix; a fork refused for want of a free
    // block for the partial block's copy falls back to a plain submission.
    forked = scheduler_->fork(branch->parent, spec, branch->num_shared).ok();
    if (forked) rs->num_shared = branch->num_shared;
  }
  if (!forked) {
    if (Status st = scheduler_->submit(std::move(spec)); !st) {
      spec_->finish(id);
      return reject(st.error().message);
    }
  }

  RequestSubmittedEvent ev;
  ev.request = id;
  ev.prompt_ids = request.prompt_ids;
  ev.max_tokens = request.sampling.max_tokens;
  ev.priority = request.priority == Priority::Interactive ? "interactive" : "batch";
  ev.sampler_settings = sampler_settings_to_json(request.sampling);
  if (branch) {
    ev.parent = branch->parent;
    ev.fork_position = branch->num_common;
  }
  publish(std::move(ev));
  states_.emplace(id, std::move(rs));
  return id;
}

bool Engine::has_work() const { return scheduler_ && scheduler_->has_work(); }

void Engine::forward_kv_events() {
  std::vector<KvEvent> kv = scheduler_->kv_cache().drain_events();
  if (!config_.record_kv_events) return;
  for (const KvEvent& e : kv) publish(KvTraceEvent{step_index_, e});
}

void Engine::finish(RequestId id, const std::string& reason, RequestState& rs, int32_t num_generated) {
  spec_->finish(id);  // drafter state released, statistics kept
  RequestFinishedEvent ev;
  ev.request = id;
  ev.reason = reason;
  ev.num_prompt_tokens = rs.num_prompt;
  ev.num_generated = num_generated;
  ev.num_cached_tokens = rs.num_cached;
  const double now = ms_now();
  ev.ttft_ms = rs.first_token_ms >= 0 ? rs.first_token_ms - rs.submitted_ms : 0.0;
  ev.tpot_ms = num_generated > 1 ? (rs.last_token_ms - rs.first_token_ms) / (num_generated - 1) : 0.0;
  ev.e2e_ms = now - rs.submitted_ms;
  ev.text = rs.text;
  publish(std::move(ev));
}

std::optional<SpeculativeStats> Engine::speculative_stats(RequestId id) const {
  return spec_ ? spec_->stats(id) : std::nullopt;
}

// Step 0 of speculative decoding: every running request that is decoding and
// asked for it gets a draft, bounded so that accepted drafts never pass
// max_tokens or the context. A drafter error is reported for that request and
// turns speculation off for it (it continues plainly).
void Engine::propose_drafts() {
  for (RequestId id : spec_->live_requests()) {
    const Request* r = scheduler_->find(id);
    if (r == nullptr || r->state != gb::RequestState::Running || !r->is_decoding()) continue;
    RequestState& rs = *states_.at(id);
    if (rs.budget) continue;  // forced close-marker tokens are not drafted
    const int32_t max_k = std::min({r->max_tokens - r->num_tokens_output() - 1,
                                    scheduler_->max_tokens_per_request() - r->num_tokens_total() - 1,
                                    config_.max_batch_tokens - 1});
    if (max_k < 1) continue;
    const std::vector<TokenId> tokens = r->all_tokens();
    const std::vector<int32_t> blocks = scheduler_->kv_cache().table(id).block_ids();
    auto draft = spec_->propose(id, tokens, r->num_tokens_prompt(), max_k, blocks, rs.rng.counter());
    if (!draft) {
      publish(ErrorEvent{id, "request " + std::to_string(id.value) + ": drafting failed, decoding plainly: " +
                                 draft.error().message});
      spec_->finish(id);
      continue;
    }
    if (!draft->empty()) scheduler_->set_draft(id, std::move(*draft));
  }
}

Result<bool> Engine::step() {
  GB_CHECK_MSG(scheduler_ != nullptr, "Engine::step before start()");
  propose_drafts();
  const double t_start = ms_now();
  StepPlan plan = scheduler_->schedule();
  const double t_scheduled = ms_now();
  for (RequestId id : plan.preempted) {
    publish(RequestPreemptedEvent{id, plan.stats.step});
    if (auto it = states_.find(id); it != states_.end()) it->second->admitted = false;
  }
  if (plan.empty()) {
    forward_kv_events();
    // Nothing ran and nobody was preempted: unless a request can never start
    // (fail_stalled_request), there was simply nothing to do.
    if (plan.preempted.empty()) fail_stalled_request();
    return false;
  }
  step_index_ = plan.stats.step;
  const int32_t vocab = model_->config.vocab_size;

  // Admissions and prefill chunks are known before the forward pass.
  for (const ScheduledRequest& s : plan.requests) {
    RequestState& rs = *states_.at(s.id);
    if (!rs.admitted) {
      // Prompt tokens whose K/V this admission reused (prefix hits, or a fork's
      // shared blocks), never more than the prompt; the request's figure is
      // that of its first admission (a re-admission after preemption may hit
      // its own earlier output, which is not a prompt hit).
      rs.admitted = true;
      const Request* r = scheduler_->find(s.id);
      const int32_t hits = r ? r->num_prefix_hit_tokens : 0;
      const int32_t reused = std::min(rs.num_prompt, rs.num_shared + hits - rs.num_hits_seen);
      rs.num_hits_seen = hits;
      rs.num_shared = 0;
      if (!rs.ever_admitted) rs.num_cached = reused;
      rs.ever_admitted = true;
      publish(RequestAdmittedEvent{s.id, reused, t_start - rs.submitted_ms});
    }
    if (!s.is_decode) publish(PrefillChunkEvent{s.id, plan.stats.step, s.start_pos, s.num_new_tokens});
  }

  Status st = backend_->copy_blocks(plan.block_copies);
  BatchLayout layout;
  if (st) {
    layout = to_batch_layout(plan);
    // Verifications need logits at every position of [last, drafts...]:
    // rebuild the logit rows (plan order; all rows of a verification in a row).
    layout.logit_token_indices.clear();
    int32_t first = 0;
    for (const ScheduledRequest& s : plan.requests) {
      const bool verifies = s.is_decode && s.num_new_tokens > 1;
      for (int32_t i = verifies ? 0 : s.num_new_tokens - 1; s.needs_logits && i < s.num_new_tokens; ++i)
        layout.logit_token_indices.push_back(first + i);
      first += s.num_new_tokens;
    }
    logits_.resize(static_cast<size_t>(layout.num_logits()) * static_cast<size_t>(vocab));
    st = backend_->forward(layout, logits_);
  }
  const double t_forward = ms_now();
  if (!st) {
    scheduler_->on_step_failed(plan);
    publish(ErrorEvent{std::nullopt, "forward pass failed: " + st.error().message});
    return st.error();
  }

  // Sample one token per request that reached its last known token.
  std::vector<StepToken> sampled;
  std::vector<RequestId> failed;
  std::vector<TokenSampledEvent> token_events;
  std::vector<SpeculativeEvent> spec_events;
  // Stop checks, text and the event for one emitted token; true when the token
  // ends the request (EOS and stop tokens are not emitted as events).
  auto emit = [&](RequestState& rs, TokenSampledEvent ev, double t_sample0) {
    const bool is_eos = (!rs.ignore_eos && tokenizer_->is_end_of_generation(ev.token)) || ev.token == tokenizer_->bos_id() ||
                        rs.settings.is_stop_token(ev.token);
    if (is_eos) return true;
    const std::string piece = rs.decoder->push(ev.token);
    if (rs.budget) rs.budget->observe(ev.token, piece);
    StopMatch m = rs.stop->feed(piece);
    ev.text = std::move(m.text);
    rs.text += ev.text;
    const double now = ms_now();
    if (rs.first_token_ms < 0) rs.first_token_ms = now;
    rs.last_token_ms = now;
    ++rs.num_generated;
    ev.record.forward_ms = t_forward - t_scheduled;
    ev.record.sample_ms = now - t_sample0;
    token_events.push_back(std::move(ev));
    return m.stopped;
  };
  int32_t row = 0;
  for (const ScheduledRequest& s : plan.requests) {
    if (!s.needs_logits) continue;
    if (s.is_decode && s.num_new_tokens > 1) {
      // Verification: rows for [last, d_1..d_k]; emit accepted drafts, then the
      // resampled or bonus token, stopping early at EOS or a stop string.
      const int32_t num_draft = s.num_new_tokens - 1;
      const std::span<const float> rows(logits_.data() + static_cast<size_t>(row) * static_cast<size_t>(vocab),
                                        static_cast<size_t>(num_draft + 1) * static_cast<size_t>(vocab));
      row += num_draft + 1;
      RequestState& rs = *states_.at(s.id);
      const double t_sample0 = ms_now();
      auto out = spec_->verify(s.id, rows, num_draft, scheduler_->find(s.id)->all_tokens(), *rs.chain, rs.rng,
                               t_forward - t_scheduled, plan.stats.step);
      if (!out) {
        failed.push_back(s.id);
        publish(ErrorEvent{s.id, "request " + std::to_string(s.id.value) + ": " + out.error().message});
        sampled.push_back({s.id, tokenizer_->eos_id(), true});
        continue;
      }
      StepToken st_token{s.id, -1, false};
      std::vector<TokenId> history = scheduler_->find(s.id)->all_tokens();
      for (size_t i = 0; i < out->tokens.size(); ++i) {
        TokenSampledEvent ev;
        ev.request = s.id;
        ev.step = plan.stats.step;
        ev.position = s.start_pos + 1 + static_cast<int32_t>(i);
        ev.index = rs.num_generated;
        ev.token = out->tokens[i].token;
        ev.origin = out->tokens[i].origin;
        if (config_.record_tokens && rs.settings.top_n_record > 0) {
          const std::span<const float> row_i = rows.subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
          record_for_token(*rs.chain, row_i, history, ev.token, ev.record);
        }
        history.push_back(ev.token);
        st_token.token = ev.token;
        st_token.num_accepted_draft = static_cast<int32_t>(i);  // the drafts before this token
        if (emit(rs, std::move(ev), t_sample0)) {
          st_token.stop = true;
          break;
        }
      }
      sampled.push_back(st_token);
      spec_events.push_back(std::move(out->event));
      continue;
    }
    const std::span<const float> logits(logits_.data() + static_cast<size_t>(row++) * static_cast<size_t>(vocab),
                                        static_cast<size_t>(vocab));
    RequestState& rs = *states_.at(s.id);
    const Request* r = scheduler_->find(s.id);
    const double t_sample0 = ms_now();
    TokenSampledEvent ev;
    ev.request = s.id;
    ev.step = plan.stats.step;
    ev.position = s.start_pos + s.num_new_tokens;
    ev.index = rs.num_generated;
    TokenRecord* record = config_.record_tokens && rs.settings.top_n_record > 0 ? &ev.record : nullptr;
    const std::span<const TokenId> forced =
        rs.budget ? rs.budget->forced_next() : std::span<const TokenId>{};
    if (!forced.empty()) {
      // Reasoning budget spent: the close marker is appended instead of sampling.
      ev.token = forced.front();
      ev.origin = TokenOrigin::Forced;
      rs.rng.advance();
      if (record) record_for_token(*rs.chain, logits, r->all_tokens(), ev.token, *record);
    } else {
      const std::vector<TokenId> history = r->all_tokens();
      auto tok = rs.chain->sample(logits, history, rs.rng, record);
      if (!tok) {
        failed.push_back(s.id);
        publish(ErrorEvent{s.id, "request " + std::to_string(s.id.value) + ": " + tok.error().message});
        sampled.push_back({s.id, tokenizer_->eos_id(), true});
        continue;
      }
      ev.token = tok->id;
    }
    const TokenId chosen = ev.token;
    const bool stop = emit(rs, std::move(ev), t_sample0);
    sampled.push_back({s.id, chosen, stop});
    // A speculative request that decoded without a draft (fallback, no n-gram
    // match, budget): its cost is the adaptive K's baseline.
    if (spec_->has(s.id)) spec_->on_plain_step(s.id, t_forward - t_scheduled, s.is_decode);
  }
  const double t_sampled = ms_now();

  std::vector<FinishedRequest> finished = scheduler_->on_step_done(plan, sampled);
  for (SpeculativeEvent& ev : spec_events) publish(std::move(ev));
  for (TokenSampledEvent& ev : token_events) publish(std::move(ev));
  forward_kv_events();

  StepEvent se;
  se.step = plan.stats.step;
  se.start_ms = t_start;
  se.schedule_ms = t_scheduled - t_start;
  se.forward_ms = t_forward - t_scheduled;
  se.sample_ms = t_sampled - t_forward;
  se.num_seqs = plan.stats.num_seqs;
  se.num_prefill_tokens = plan.stats.num_prefill_tokens;
  se.num_decode_tokens = plan.stats.num_decode_tokens;
  se.num_running = scheduler_->num_running();
  se.num_waiting = scheduler_->num_waiting();
  se.num_blocks_owned = scheduler_->kv_cache().num_owned();
  se.num_blocks_free = scheduler_->kv_cache().num_free();
  se.num_blocks_cached = scheduler_->kv_cache().num_cached();
  se.num_blocks_total = num_blocks_;
  se.num_prefix_hit_tokens = plan.stats.num_prefix_hit_tokens;
  se.num_preemptions = plan.stats.num_preemptions;
  publish(se);
  if (config_.check_invariants) {
    const Status ok = scheduler_->check_invariants();
    GB_CHECK_MSG(ok.ok(), ok.ok() ? nullptr : ok.error().message.c_str());
  }

  for (FinishedRequest& f : finished) {
    RequestState& rs = *states_.at(f.id);
    std::string tail = rs.stop->flush();
    if (f.reason != FinishReason::Stop) tail += rs.decoder->flush();
    rs.text += tail;
    const bool errored = std::find(failed.begin(), failed.end(), f.id) != failed.end();
    finish(f.id, errored ? "error" : finish_reason_name(f.reason), rs, rs.num_generated);
    // Prompt + outputs (a fork's forced token included), for later forks; the
    // per-request state goes, so a long session does not grow without bound.
    std::vector<TokenId> all = rs.prompt_ids;
    all.insert(all.end(), f.output_ids.begin(), f.output_ids.end());
    remember_finished(f.id, rs, std::move(all));
    states_.erase(f.id);
  }
  return true;
}

void Engine::remember_finished(RequestId id, const RequestState& rs, std::vector<TokenId> tokens) {
  finished_[id] = FinishedRecord{std::move(tokens), rs.settings, rs.num_prompt, rs.ignore_eos};
  finished_order_.push_back(id);
  while (config_.max_finished_records > 0 &&
         static_cast<int32_t>(finished_order_.size()) > config_.max_finished_records) {
    const RequestId old = finished_order_.front();
    finished_order_.pop_front();
    finished_.erase(old);
    // Normally long released (max_retained is far smaller); never keep blocks
    // nobody can fork from any more.
    if (scheduler_->release(old)) forward_kv_events();
  }
}

// A waiting request that cannot be admitted while nothing runs would wait for
// ever (and a caller stepping until idle would spin): it fails with a message
// saying where the blocks are, and the others go on.
void Engine::fail_stalled_request() {
  const std::optional<RequestId> stalled = scheduler_->stalled_request();
  if (!stalled) return;
  const KvCacheManager& kv = scheduler_->kv_cache();
  int32_t kept_blocks = 0;
  const std::vector<RequestId> kept = scheduler_->retained_requests();
  for (RequestId k : kept) kept_blocks += kv.table(k).num_blocks();
  const Request* r = scheduler_->find(*stalled);
  const int32_t needed = r ? (r->num_tokens_total() + kv.block_size() - 1) / kv.block_size() : 0;
  publish(ErrorEvent{*stalled, "request " + std::to_string(stalled->value) + " cannot start: it needs " +
                                   std::to_string(needed) + " KV blocks, " + std::to_string(kv.num_available()) +
                                   " of " + std::to_string(kv.num_blocks()) + " are free or cached, and " +
                                   std::to_string(kept.size()) + " finished requests keep " +
                                   std::to_string(kept_blocks) + " for branching (release them)"});
  auto it = states_.find(*stalled);
  scheduler_->cancel(*stalled);
  forward_kv_events();
  if (it == states_.end()) return;
  finish(*stalled, "error", *it->second, it->second->num_generated);
  states_.erase(it);
}

Status Engine::run_until_idle() {
  while (has_work()) {
    auto stepped = step();
    if (!stepped) return stepped.error();
  }
  return {};
}

}  // namespace gb
