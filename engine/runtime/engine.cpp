#include "runtime/engine.h"
#include "runtime/engine_request_state.h"
#include "runtime/grammar_constraint.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "backend/kv_pool_sizing.h"
#include "kv/block_pool.h"
#include "kv/scheduler.h"
#include "runtime/step_layout.h"
#include "sampling/sampler_chain.h"
#include "sampling/sampler_rng.h"
#include "sampling/sampler_settings_json.h"
#include "speculative/speculative_decoder.h"

namespace gb {

using Clock = std::chrono::steady_clock;

namespace {
// Logit rows the work buffers are sized for at start beyond one per sequence:
// the drafts of four speculating sequences at SpeculativeConfig's default
// k_max (8). A step with more still runs; the backend's buffers grow then.
constexpr int32_t kReservedDraftRows = 4 * 8;

// The last token id of a text's encoding: the id a marker string ends with.
std::optional<TokenId> last_token_of(const Tokenizer& tokenizer, const std::string& text) {
  const std::vector<TokenId> ids = tokenizer.encode(text, false);
  if (ids.empty()) return std::nullopt;
  return ids.back();
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

Status Engine::make_helpers(RequestState& rs, std::span<const TokenId> prompt, std::span<const TokenId> replay) {
  rs.chain = std::make_unique<SamplerChain>(rs.settings);
  std::unique_ptr<GrammarConstraint> grammar;
  if (rs.settings.format.kind != FormatKind::None) {
    if (!formats_) formats_ = std::make_unique<FormatCache>(tokenizer_);
    auto compiled = formats_->get(rs.settings.format);
    if (!compiled) return compiled.error();
    grammar = std::make_unique<GrammarConstraint>(std::move(*compiled));
    for (size_t i = 0; i < replay.size(); ++i)
      if (!grammar->accept(replay[i]))
        return make_error("the output before the branch point leaves the format at its token " + std::to_string(i));
  }
  rs.output.emplace(*tokenizer_, rs.settings, prompt, rs.ignore_eos, std::move(grammar));
  return {};
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
  events_.push_back(std::move(e));
}

std::vector<TraceEvent> Engine::drain_events() {
  std::vector<TraceEvent> out;
  out.swap(events_);
  return out;
}

bool invariant_checks_by_default() {
#ifndef NDEBUG
  return true;
#else
  const char* v = std::getenv("GLASSBOX_CHECK_INVARIANTS");
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
#endif
}

Status Engine::start() {
  const ModelConfig& c = model_->config;
  // The pool and context: explicit blocks, a byte budget, or what the host's
  // memory holds (plan_kv states the rules; the CPU backend's budget is the
  // host's, a device's its free memory after the weights, when it says).
  KvPlanRequest request;
  request.context = config_.max_context;
  request.num_blocks = config_.num_blocks;
  request.num_bytes = static_cast<int64_t>(config_.kv_bytes);
  request.contexts = config_.kv_full_contexts > 0 ? config_.kv_full_contexts : std::max(1, config_.max_seqs / 4);
  request.block_size = config_.block_size;
  request.types = config_.kv_types;
  request.window_group = config_.release_window_blocks && c.has_window_group() && backend_->supports_window_group();
  request.window_seqs = config_.max_seqs;
  request.num_window_blocks = config_.num_window_blocks;
  request.max_chunk = config_.max_prefill_chunk > 0 ? std::min(config_.max_prefill_chunk, config_.max_batch_tokens)
                                                    : config_.max_batch_tokens;
  // Work buffers first (a device's free memory is then what the pool can have).
  const int32_t context = request.context > 0 ? request.context : c.context_length;
  StepLimits step_limits;
  step_limits.max_tokens = config_.max_batch_tokens;
  step_limits.max_seqs = config_.max_seqs;
  step_limits.max_logits = std::min(config_.max_batch_tokens, config_.max_seqs + kReservedDraftRows);
  step_limits.max_context = context;
  step_limits.block_size = config_.block_size;
  GB_TRY(backend_->reserve_work(step_limits));
  const DeviceInfo device = backend_->device_info();
  MemoryBudget budget;
  const size_t work = backend_->work_bytes_reserved() > 0
                          ? 0
                          : work_bytes(c, config_.max_batch_tokens, config_.max_seqs, context, device.num_threads);
  if (device.backend == "cpu") {
    // The weights still to come off the available memory: those read from the
    // file in place (the backend's own copies are already taken from it).
    const size_t held = device.memory_used_bytes - std::min(device.memory_used_bytes, backend_->kv_pool_bytes());
    budget = host_budget(held - std::min(held, device.memory_taken_bytes), work, config_.memory_available);
  } else if (device.memory_free_bytes > 0) {  // a device: its free memory after the weights (a pool it holds is replaced)
    budget = device_budget(config_.memory_available > 0 ? config_.memory_available
                                                        : device.memory_free_bytes + backend_->kv_pool_bytes(),
                           device.memory_total_bytes, work);
  }
  auto plan = plan_kv(c, request, budget);
  if (!plan) return plan.error();
  kv_plan_ = *plan;
  max_context_ = kv_plan_.context;
  num_blocks_ = kv_plan_.num_blocks;
  // Self-draft scratch blocks are a lookahead reserve in the scheduler's own
  // pool: requests never take them, the SpeculativeDecoder borrows them.
  const int32_t num_scratch = std::max(0, config_.num_scratch_blocks);
  GB_TRY(backend_->init_kv_pool({num_blocks_ + num_scratch, config_.block_size, config_.kv_types.k, config_.kv_types.v,
                                 kv_plan_.num_window_blocks > 0 ? kv_plan_.num_window_blocks + num_scratch : 0}));
  SchedulerConfig sc;
  sc.num_blocks = num_blocks_;
  sc.num_lookahead_blocks = num_scratch;
  sc.block_size = config_.block_size;
  sc.max_batch_tokens = config_.max_batch_tokens;
  sc.max_seqs = config_.max_seqs;
  sc.max_context = max_context_;
  sc.max_prefill_chunk = config_.max_prefill_chunk;
  sc.admission_watermark = config_.admission_watermark;
  sc.max_retained = config_.max_retained;
  sc.evict_retained = config_.evict_retained;
  // Every layer slides (Mistral): blocks that leave a request's window go back
  // to the pool. A backend reads a released slot only if its window masking is
  // wrong; the CPU backend checks that every slot a query reads is present.
  sc.sliding_window = config_.release_window_blocks ? c.kv_release_window() : 0;
  // Some layers slide (Gemma 2/3): theirs is a window group (plan_kv sized it).
  sc.window_group = {kv_plan_.num_window_blocks, kv_plan_.window};
  // Requests that keep a KV budget while they run (sink, h2o) may go past the
  // context: their cache holds at most the budget (docs/kv-eviction.md).
  sc.max_positions = kMaxEvictingPositions;
  scheduler_ = std::make_unique<Scheduler>(sc);
  SpeculativeLimits limits;
  limits.max_context = max_context_;
  limits.max_seqs = config_.max_seqs;
  limits.block_size = config_.block_size;
  spec_ = std::make_unique<SpeculativeDecoder>(model_, tokenizer_, *backend_, scheduler_->kv_cache(), limits,
                                               scheduler_->window_kv_cache());
  logits_.clear();
  return {};
}

// What KV eviction needs besides a valid policy (GenerationRequest::kv_policy).
Status Engine::check_kv_eviction(const GenerationRequest& request) const {
  const ModelConfig& c = model_->config;
  if (!backend_->supports_kv_eviction())
    return make_error("KV eviction (" + std::string(kv_policy_name(request.kv_policy.kind)) + ") runs on the CPU backend; the " +
                      backend_->device_info().backend + " backend keeps every token");
  if (request.speculative) return make_error("KV eviction does not combine with speculative decoding yet");
  if (c.kv_release_window() > 0)
    return make_error("KV eviction needs global attention layers; every layer of this model keeps only a " +
                      std::to_string(c.kv_release_window()) + "-token window already");
  if (kv_plan_.num_window_blocks == 0)
    for (int32_t l = 0; l < c.num_layers; ++l)
      if (c.is_sliding(l))
        return make_error("KV eviction needs the sliding layers in a window group of their own (layer " +
                          std::to_string(l) + " slides over the shared cache)");
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
  request.isolation.kv_types = kv_types_name(config_.kv_types);
  if (request.kv_policy.active()) {
    auto policy = resolve_kv_policy(request.kv_policy);
    if (!policy) return reject("request " + std::to_string(id.value) + ": " + policy.error().message);
    if (Status st = check_kv_eviction(request); !st)
      return reject("request " + std::to_string(id.value) + ": " + st.error().message);
    request.kv_policy = *policy;
    request.isolation.kv_policy = describe_kv_policy(*policy);
  }

  auto rs = std::make_unique<RequestState>();
  rs->settings = request.sampling;
  complete_settings(rs->settings);
  rs->ignore_eos = request.ignore_eos;
  if (Status st = make_helpers(*rs, request.prompt_ids); !st)
    return reject("request " + std::to_string(id.value) + ": " + st.error().message);
  rs->rng = SamplerRng(request.sampling.seed);
  rs->num_prompt = static_cast<int32_t>(request.prompt_ids.size());
  rs->submitted_ms = ms_now();
  rs->wants_shadow = request.kv_shadow && request.kv_policy.active();

  RequestSpec spec;
  spec.id = id;
  spec.prompt_ids = request.prompt_ids;
  spec.max_tokens = request.sampling.max_tokens;
  spec.priority = request.priority;
  spec.isolation = request.isolation;
  spec.use_prefix_cache = request.use_prefix_cache;
  spec.retain_kv = request.retain_kv;
  spec.kv_policy = request.kv_policy;
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
  if (!request.purpose.empty()) ev.purpose = request.purpose;
  publish(std::move(ev));
  states_.emplace(id, std::move(rs));
  return id;
}

bool Engine::has_work() const { return scheduler_ && scheduler_->has_work(); }

Engine::KvUsage Engine::kv_usage(bool count_empty_slots) const {
  KvUsage u;
  if (!scheduler_) return u;
  const KvCacheManager& kv = scheduler_->kv_cache();
  u.num_blocks = kv.num_blocks();
  u.num_owned = kv.num_owned();
  u.num_free = kv.num_free();
  u.num_cached = kv.num_cached();
  u.num_running = scheduler_->num_running();
  u.num_waiting = scheduler_->num_waiting();
  if (const KvCacheManager* window = scheduler_->window_kv_cache()) {
    u.num_window_blocks = window->num_blocks();
    u.num_window_owned = window->num_owned();
  }
  if (!count_empty_slots) return u;
  // Straight from the pool (no snapshot copies), so measuring does not slow
  // the run it measures.
  const BlockPool& pool = kv.pool();
  for (int32_t b = 0; b < pool.num_blocks(); ++b) {
    const KvBlock& block = pool.block(BlockId{b});
    if (block.ref_count > 0) u.num_empty_owned_slots += pool.block_size() - block.num_filled();
  }
  return u;
}

KvSnapshot Engine::kv_snapshot() const { return scheduler_ ? scheduler_->kv_cache().snapshot() : KvSnapshot{}; }

bool Engine::is_live(RequestId id) const { return scheduler_ && scheduler_->find(id) != nullptr; }

std::vector<TokenId> Engine::live_tokens(RequestId id) const {
  std::vector<TokenId> out;
  const Request* r = scheduler_ ? scheduler_->find(id) : nullptr;
  if (!r) return out;
  out.reserve(static_cast<size_t>(r->num_tokens_total()));
  for (int32_t i = 0; i < r->num_tokens_total(); ++i) out.push_back(r->token_at(i));
  return out;
}

int32_t Engine::max_tokens_per_request() const { return scheduler_ ? scheduler_->max_tokens_per_request() : 0; }

Status Engine::check_kv_ownership(std::span<const RequestId> live) const {
  if (!scheduler_) return {};
  if (Status st = scheduler_->check_invariants(); !st) return st;
  const std::vector<RequestId> kept = retained_requests();
  // Every pool: the main one, and the sliding layers' window group if any.
  for (const KvCacheManager* kv : {&scheduler_->kv_cache(), scheduler_->window_kv_cache()}) {
    if (kv == nullptr) continue;
    const std::string pool = kv == &scheduler_->kv_cache() ? "" : " (window group)";
    if (kv->num_owned() + kv->num_free() + kv->num_cached() != kv->num_blocks())
      return make_error("owned + free + cached blocks != the pool" + pool);
    std::set<int32_t> held;
    const auto hold = [&](RequestId id) {
      for (BlockId b : kv->lookahead_blocks(id)) held.insert(b.value);  // self-draft scratch
      if (!kv->has_request(id)) return;
      for (int32_t b : kv->table(id).block_ids())
        if (b >= 0) held.insert(b);  // -1: released by the sliding window
    };
    for (RequestId id : live) hold(id);
    for (RequestId id : kept) hold(id);
    if (static_cast<int32_t>(held.size()) != kv->num_owned())
      return make_error(std::to_string(kv->num_owned()) + " blocks owned" + pool +
                        " but live and retained requests hold " + std::to_string(held.size()));
  }
  return {};
}

namespace {
// Blocks of `pool` that these events left free (not cached): they hold nothing
// anyone reads, so the backend may give their memory back (the CPU pool's
// pages) and a pool's resident memory follows the blocks held, not the most
// ever held.
std::vector<int32_t> freed_blocks(std::span<const KvEvent> events, const BlockPool& pool) {
  std::vector<int32_t> freed;
  for (const KvEvent& e : events)
    if (e.kind == KvEventKind::Freed && e.block.value >= 0 && pool.block(e.block).state() == BlockState::Free)
      freed.push_back(e.block.value);
  return freed;
}
}  // namespace

void Engine::forward_kv_events() {
  std::vector<KvEvent> kv = scheduler_->kv_cache().drain_events();
  if (auto freed = freed_blocks(kv, scheduler_->kv_cache().pool()); !freed.empty())
    backend_->release_block_memory(freed);
  // The window group's blocks leave its pool as they leave the window: their
  // memory goes back the same way. (Its events are not traced: the trace's
  // per-block KV map is the main pool's; step events count the window pool.)
  if (KvCacheManager* w = scheduler_->window_kv_cache())
    if (auto freed = freed_blocks(w->drain_events(), w->pool()); !freed.empty())
      backend_->release_block_memory(freed, KvGroup::Window);
  if (!config_.record_kv_events) return;
  for (const KvEvent& e : kv) publish(KvTraceEvent{step_index_, e});
}

void Engine::finish(RequestId id, const std::string& reason, const RequestState& rs) {
  spec_->finish(id);  // drafter state released, statistics kept
  const RequestOutput& out = *rs.output;
  const int32_t num_generated = out.num_generated();
  RequestFinishedEvent ev;
  ev.request = id;
  ev.reason = reason;
  ev.num_prompt_tokens = rs.num_prompt;
  ev.num_generated = num_generated;
  ev.num_cached_tokens = rs.num_cached;
  const double now = ms_now();
  ev.ttft_ms = out.first_token_ms() >= 0 ? out.first_token_ms() - rs.submitted_ms : 0.0;
  ev.tpot_ms = num_generated > 1 ? (out.last_token_ms() - out.first_token_ms()) / (num_generated - 1) : 0.0;
  ev.e2e_ms = now - rs.submitted_ms;
  ev.text = out.text();
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
    if (rs.output->has_reasoning_budget()) continue;  // forced close-marker tokens are not drafted
    const int32_t max_k = std::min({r->max_tokens - r->num_tokens_output() - 1,
                                    scheduler_->max_tokens_per_request() - r->num_tokens_total() - 1,
                                    config_.max_batch_tokens - 1});
    if (max_k < 1) continue;
    const std::span<const TokenId> tokens = r->all_tokens();
    const std::vector<int32_t> blocks = scheduler_->kv_cache().table(id).block_ids();
    const KvCacheManager* window = scheduler_->window_kv_cache();
    const std::vector<int32_t> window_blocks = window ? window->table(id).block_ids() : std::vector<int32_t>{};
    auto draft = spec_->propose(id, tokens, r->num_tokens_prompt(), max_k, blocks, rs.rng.counter(), window_blocks);
    if (!draft) {
      publish(ErrorEvent{id, "request " + std::to_string(id.value) + ": drafting failed, decoding plainly: " +
                                 draft.error().message});
      spec_->finish(id);
      continue;
    }
    // A format cuts the draft before its first token the grammar forbids (the
    // verifier would reject it anyway, and what follows it).
    if (GrammarConstraint* grammar = rs.output->grammar()) {
      GrammarMatcher m = grammar->matcher();
      size_t keep = 0;
      while (keep < draft->size() && grammar->format().masks->accept_token(m, (*draft)[keep])) ++keep;
      draft->resize(keep);
    }
    if (!draft->empty()) scheduler_->set_draft(id, std::move(*draft));
  }
}

// schedule -> run -> process outputs (after nano-vllm's step()).
Result<bool> Engine::step() {
  GB_CHECK_MSG(scheduler_ != nullptr, "Engine::step before start()");
  propose_drafts();
  StepTimes t;
  t.start_ms = ms_now();
  StepPlan plan = scheduler_->schedule();
  t.scheduled_ms = ms_now();
  if (!begin_step(plan, t.start_ms)) return false;
  const Status forward = run_forward(plan);
  t.forward_ms = ms_now();
  if (!forward) {
    // The step's requests fail with the backend's reason (a device out of
    // memory, a fault); the others, and later requests, go on.
    fail_requests(plan, "forward pass failed: " + forward.error().message);
    return true;
  }
  StepOutputs out = sample_outputs(plan, t);
  end_step(plan, std::move(out), t, ms_now());
  return true;
}

// Events known before the forward pass: preemptions, admissions, prefill
// chunks. False when the plan is empty (nothing to run this step).
bool Engine::begin_step(const StepPlan& plan, double start_ms) {
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
      publish(RequestAdmittedEvent{s.id, reused, start_ms - rs.submitted_ms});
    }
    if (!s.is_decode) publish(PrefillChunkEvent{s.id, plan.stats.step, s.start_pos, s.num_new_tokens});
  }
  publish_evictions(plan);
  return true;
}

// What KV eviction dropped in this step, with a snapshot of what each cache
// keeps in a request's first eviction event and every kKeptSnapshotEvery-th.
void Engine::publish_evictions(const StepPlan& plan) {
  for (const EvictedTokens& e : plan.evictions) {
    const Request* r = scheduler_->find(e.id);
    if (r == nullptr) continue;
    KvEvictionEvent ev;
    ev.request = e.id;
    ev.step = plan.stats.step;
    ev.policy = describe_kv_policy(r->kv_policy);
    ev.reason = kv_policy_row(r->kv_policy.kind).evict_reason;
    ev.positions = e.positions;
    ev.mass = e.mass;
    ev.num_kept = r->num_kv_slots();
    RequestState& rs = *states_.at(e.id);
    if (rs.num_eviction_events++ % kKeptSnapshotEvery == 0) {
      ev.kept_positions = r->kv_positions;
      ev.kept_mass = r->kv_mass;
    }
    publish(std::move(ev));
  }
}

// Block copies, then one forward pass over the plan's ragged batch into
// logits_ (plan.num_logits() rows). On failure the scheduler takes the step
// back (step() then fails the step's requests, saying why).
Status Engine::run_forward(const StepPlan& plan) {
  // Fork copies, KV eviction's row moves, then this step's copies (step_plan.h).
  const auto copies = std::span<const std::pair<int32_t, int32_t>>(plan.block_copies);
  const auto num_fork = static_cast<size_t>(plan.num_fork_copies);
  Status st = backend_->copy_blocks(copies.first(num_fork));
  if (st) st = backend_->move_slots(plan.slot_moves);
  if (st) st = backend_->copy_blocks(copies.subspan(num_fork));
  if (st && !plan.window_block_copies.empty()) st = backend_->copy_blocks(plan.window_block_copies, KvGroup::Window);
  if (st) {
    BatchLayout layout = to_batch_layout(plan);
    // A mixture's routing goes into the tokens' records (the Experts view, the trace).
    routing_.experts.clear();
    if (model_->config.is_moe() && config_.record_tokens) layout.routing = &routing_;
    // The attention mass KV eviction ranks by (h2o, snapkv), one value per slot.
    mass_.seq_offset.assign(1, 0);
    bool mass = false;
    for (const ScheduledRequest& r : plan.requests) {
      mass = mass || r.mass_from >= 0;
      mass_.seq_offset.push_back(mass_.seq_offset.back() + (r.mass_from >= 0 ? r.num_kv_slots : 0));
    }
    if (mass) layout.mass = &mass_;
    logits_.resize(static_cast<size_t>(layout.num_logits()) * static_cast<size_t>(model_->config.vocab_size));
    st = backend_->forward(layout, logits_);
    for (size_t i = 0; st && mass && i < plan.requests.size(); ++i)
      if (const ScheduledRequest& r = plan.requests[i]; r.mass_from >= 0)
        scheduler_->add_kv_mass(r.id, std::span<const float>(mass_.sums).subspan(
                                          static_cast<size_t>(mass_.seq_offset[i]), static_cast<size_t>(r.num_kv_slots)));
  }
  if (!st) scheduler_->on_step_failed(plan);
  return st;
}

// The scheduler records the step, then the step's events go out (sampling
// errors, verifications, tokens, KV changes, the step itself) and finished
// requests report.
void Engine::end_step(const StepPlan& plan, StepOutputs out, const StepTimes& t, double sampled_ms) {
  std::vector<FinishedRequest> finished = scheduler_->on_step_done(plan, out.sampled);
  for (ErrorEvent& ev : out.errors) publish(std::move(ev));
  for (SpeculativeEvent& ev : out.speculative) publish(std::move(ev));
  for (TokenSampledEvent& ev : out.tokens) publish(std::move(ev));
  forward_kv_events();
  publish_step_event(plan, t, sampled_ms);
  if (config_.check_invariants) {
    const Status ok = scheduler_->check_invariants();
    GB_CHECK_MSG(ok.ok(), ok.ok() ? nullptr : ok.error().message.c_str());
  }
  for (KvShadowEvent& ev : out.shadow) publish(std::move(ev));
  start_shadows(plan);
  for (FinishedRequest& f : finished) {
    RequestState& rs = *states_.at(f.id);
    end_shadow_links(rs);
    rs.output->finish(f.reason);
    finish(f.id, out.has_failed(f.id) ? "error" : out.is_dead_end(f.id) ? "grammar_dead_end" : finish_reason_name(f.reason), rs);
    // Prompt + outputs (a fork's forced token included), for later forks; the
    // per-request state goes, so a long session does not grow without bound.
    remember_finished(f.id, rs, std::move(f.tokens));
    states_.erase(f.id);
  }
}

// An evicting request that wants a full-cache shadow gets it once its first
// token is known: the same prompt and that token, then each of its tokens
// forced, every token kept (GenerationRequest::kv_shadow). The shadow comes
// after it in every batch (later arrival, same priority), so the request's
// token at a position is known when the shadow's row for it is sampled.
void Engine::start_shadows(const StepPlan& plan) {
  for (const ScheduledRequest& s : plan.requests) {
    auto it = states_.find(s.id);
    if (it == states_.end() || !it->second->wants_shadow || it->second->shadow) continue;
    const Request* r = scheduler_->find(s.id);
    if (r == nullptr || r->num_tokens_output() < 1) continue;
    RequestState& rs = *it->second;
    rs.wants_shadow = false;
    GenerationRequest g;
    g.prompt_ids.assign(r->all_tokens().begin(), r->all_tokens().begin() + r->num_prompt + 1);
    g.sampling = rs.settings;
    g.sampling.max_tokens = std::max(1, r->max_tokens - 1);
    g.sampling.stop_strings.clear();
    g.sampling.stop_token_ids.clear();
    g.ignore_eos = true;  // its tokens are the request's: it ends with it
    g.priority = r->priority;
    g.isolation = r->isolation;
    g.isolation.kv_policy.clear();
    g.purpose = "kv_shadow";
    auto id = submit(std::move(g));
    if (!id) continue;  // the error event says why; the request goes on alone
    rs.shadow = *id;
    states_.at(*id)->shadow_of = s.id;
  }
}

// Counts and pool state after the step (so after on_step_done), with timings.
void Engine::publish_step_event(const StepPlan& plan, const StepTimes& t, double sampled_ms) {
  StepEvent se;
  se.step = plan.stats.step;
  se.start_ms = t.start_ms;
  se.schedule_ms = t.scheduled_ms - t.start_ms;
  se.forward_ms = t.forward_time();
  se.sample_ms = sampled_ms - t.forward_ms;
  se.num_seqs = plan.stats.num_seqs;
  se.num_prefill_tokens = plan.stats.num_prefill_tokens;
  se.num_decode_tokens = plan.stats.num_decode_tokens;
  se.num_running = scheduler_->num_running();
  se.num_waiting = scheduler_->num_waiting();
  se.num_blocks_owned = scheduler_->kv_cache().num_owned();
  se.num_blocks_free = scheduler_->kv_cache().num_free();
  se.num_blocks_cached = scheduler_->kv_cache().num_cached();
  se.num_blocks_total = num_pool_blocks();  // the lookahead reserve included
  if (const KvCacheManager* w = scheduler_->window_kv_cache()) {
    se.num_window_blocks_owned = w->num_owned();
    se.num_window_blocks_cached = w->num_cached();
    se.num_window_blocks_total = w->num_blocks();
  }
  se.num_prefix_hit_tokens = plan.stats.num_prefix_hit_tokens;
  se.num_preemptions = plan.stats.num_preemptions;
  publish(se);
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
  for (RequestId k : kept) kept_blocks += kv.table(k).num_live_blocks();
  const Request* r = scheduler_->find(*stalled);
  const int32_t needed = r ? (r->num_tokens_total() + kv.block_size() - 1) / kv.block_size() : 0;
  publish(ErrorEvent{*stalled, "request " + std::to_string(stalled->value) + " cannot start: it needs " +
                                   std::to_string(needed) + " KV blocks, " + std::to_string(kv.num_available()) +
                                   " of " + std::to_string(kv.num_blocks()) + " are free or cached, and " +
                                   std::to_string(kept.size()) + " finished requests keep " +
                                   std::to_string(kept_blocks) + " for branching (release them)"});
  end_with_error(*stalled);
}

// Each request of a step whose forward pass failed ends with an ErrorEvent
// naming the reason and finish reason "error"; its blocks go back.
void Engine::fail_requests(const StepPlan& plan, const std::string& message) {
  for (const ScheduledRequest& s : plan.requests) {
    if (!states_.contains(s.id)) continue;  // a shadow that ended with its leader above
    publish(ErrorEvent{s.id, message});
    end_with_error(s.id);
  }
}

// Ends a live request with reason "error" (its ErrorEvent is already out): its
// blocks go back, and its shadow links end.
void Engine::end_with_error(RequestId id) {
  auto it = states_.find(id);
  scheduler_->cancel(id);
  forward_kv_events();
  if (it == states_.end()) return;
  end_shadow_links(*it->second);
  finish(id, "error", *it->second);
  states_.erase(it);
}

// A shadow ends with its request, and a request whose shadow ended keeps going
// without one.
void Engine::end_shadow_links(RequestState& rs) {
  if (rs.shadow) cancel(*rs.shadow);
  if (rs.shadow_of)
    if (auto leader = states_.find(*rs.shadow_of); leader != states_.end()) {
      leader->second->shadow.reset();
      leader->second->shadow_rows.clear();
    }
}

Status Engine::run_until_idle() {
  while (has_work()) {
    auto stepped = step();
    if (!stepped) return stepped.error();
  }
  return {};
}

}  // namespace gb
