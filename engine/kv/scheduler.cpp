#include "kv/scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"

namespace gb {
const char* request_state_name(RequestState state) {
  switch (state) {
    case RequestState::Waiting: return "waiting";
    case RequestState::Running: return "running";
    case RequestState::Preempted: return "preempted";
    case RequestState::Finished: return "finished";
    case RequestState::Cancelled: return "cancelled";
  }
  return "?";
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::None: return "none";
    case FinishReason::Stop: return "stop";
    case FinishReason::MaxTokens: return "max_tokens";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config),
      kv_(config.num_blocks, config.block_size, config.num_lookahead_blocks, config.sliding_window),
      max_total_tokens_(std::min(config.max_context, config.num_blocks * config.block_size)),
      position_limit_(config.max_positions > 0 ? config.max_positions : config.max_context),
      watermark_blocks_(static_cast<int32_t>(std::ceil(config.admission_watermark * static_cast<float>(config.num_blocks)))) {
  GB_CHECK(config.max_batch_tokens > 0 && config.max_seqs > 0 && config.max_context > 1);
  GB_CHECK(config.admission_watermark >= 0.0f && config.admission_watermark < 1.0f);
  GB_CHECK(config.sliding_window >= 0);
  if (config.sliding_window > 0) {
    // Tokens c .. c + n - 1 with the window before them span W + n - 1
    // positions, at most floor((W + n - 2) / block_size) + 2 blocks.
    window_chunk_cap_ = std::max(0, (config.num_blocks - 1) * config.block_size - config.sliding_window + 1);
    if (window_chunk_cap_ > 0) max_total_tokens_ = config.max_context;
  }
  if (const KvGroupSpec& g = config.window_group; g.num_blocks > 0) {
    GB_CHECK_MSG(config.sliding_window == 0 && g.window > 0, "Scheduler: a window group beside a sliding leader");
    // The same lookahead reserve: self-drafting borrows scratch in both pools.
    window_kv_ = std::make_unique<KvCacheManager>(g.num_blocks, config.block_size, config.num_lookahead_blocks, g.window,
                                                  /*follower=*/true);
    window_chunk_cap_ = (g.num_blocks - 1) * config.block_size - g.window + 1;
    GB_CHECK_MSG(window_chunk_cap_ > 0, "Scheduler: the window group's pool holds less than a window and a block");
    window_watermark_blocks_ =
        static_cast<int32_t>(std::ceil(config.admission_watermark * static_cast<float>(g.num_blocks)));
  }
}

void Scheduler::kv_free(RequestId id) {
  kv_.free_request(id);
  if (window_kv_) window_kv_->free_request(id);
}

bool Scheduler::kv_short(RequestId id, int32_t num_new_tokens, int32_t keep, bool leader) const {
  if (leader && kv_.num_available() - kv_.num_blocks_needed(id, num_new_tokens) < keep) return true;
  return window_kv_ && window_kv_->num_available() - window_kv_->num_blocks_needed(id, num_new_tokens) < keep;
}

std::optional<std::vector<Scheduler::GroupCopy>> Scheduler::kv_append(RequestId id, std::span<const TokenId> tokens,
                                                                       bool leader) {
  // Checked in both first: an append is all or nothing.
  if (kv_short(id, static_cast<int32_t>(tokens.size()), 0, leader)) return std::nullopt;
  std::vector<GroupCopy> out;
  if (leader) {
    auto copies = kv_.append_slots(id, tokens);
    GB_CHECK(copies.has_value());
    for (const BlockCopy& c : *copies) out.push_back({id, c, 0});
  }
  if (window_kv_) {
    auto window_copies = window_kv_->append_slots(id, tokens);
    GB_CHECK(window_copies.has_value());
    for (const BlockCopy& c : *window_copies) out.push_back({id, c, 1});
  }
  return out;
}

std::optional<std::vector<Scheduler::GroupCopy>> Scheduler::kv_fork(RequestId parent, RequestId child,
                                                                     int32_t num_tokens, int32_t num_slots) {
  auto copies = kv_.fork(parent, child, num_slots);
  if (!copies) return std::nullopt;
  std::vector<GroupCopy> out;
  for (const BlockCopy& c : *copies) out.push_back({child, c, 0});
  if (window_kv_) {
    auto window_copies = window_kv_->fork(parent, child, num_tokens);
    if (!window_copies) {
      kv_.free_request(child);  // all or nothing
      return std::nullopt;
    }
    for (const BlockCopy& c : *window_copies) out.push_back({child, c, 1});
  }
  return out;
}

void Scheduler::kv_truncate(RequestId id, int32_t num_tokens) {
  kv_.truncate(id, num_tokens);
  if (window_kv_) window_kv_->truncate(id, num_tokens);
}

void Scheduler::kv_mark_computed(const Request& r) {
  kv_.mark_computed(r.id, r.num_kv_slots());
  if (window_kv_) window_kv_->mark_computed(r.id, r.num_tokens_computed, kv_.table(r.id).prefix_chain);
}

Request& Scheduler::at(RequestId id) {
  auto it = requests_.find(id);
  GB_CHECK_MSG(it != requests_.end(), "Scheduler: unknown request");
  return it->second;
}

const Request* Scheduler::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

Status Scheduler::submit(RequestSpec spec) {
  GB_CHECK_MSG(!requests_.contains(spec.id), "Scheduler::submit: request id already in use");
  const std::string name = "request " + std::to_string(spec.id.value);
  const auto num_prompt = static_cast<int32_t>(spec.prompt_ids.size());
  if (num_prompt == 0) return make_error(name + ": empty prompt");
  if (spec.max_tokens < 1) return make_error(name + ": max_tokens must be at least 1");
  auto policy = resolve_kv_policy(spec.kv_policy);
  if (!policy) return make_error(name + ": " + policy.error().message);
  if (policy->active()) {
    if (config_.sliding_window > 0)
      return make_error(name + ": KV eviction needs global attention layers; every layer of this model keeps only a " +
                        std::to_string(config_.sliding_window) + "-token window already");
    // The budget plus a block for the step's copy of a shared block.
    if (ceil_div(policy->budget, config_.block_size) + 1 > config_.num_blocks)
      return make_error(name + ": a KV budget of " + std::to_string(policy->budget) + " tokens needs " +
                        std::to_string(ceil_div(policy->budget, config_.block_size) + 1) + " KV blocks, the pool has " +
                        std::to_string(config_.num_blocks));
    spec.use_prefix_cache = false;  // see KV eviction above
  }
  const bool evicts_while_running = kv_policy_row(policy->kind).evicts_while_running;
  const int32_t limit = evicts_while_running ? position_limit_ : max_total_tokens_;
  // Room for the prompt plus one generated token is the least a request needs.
  if (num_prompt >= (evicts_while_running ? position_limit_ : config_.max_context))
    return make_error(name + ": prompt of " + std::to_string(num_prompt) + " tokens leaves no room to generate in a " +
                      std::to_string(config_.max_context) + "-token context");
  if (num_prompt >= limit)
    return make_error(name + ": prompt of " + std::to_string(num_prompt) + " tokens needs " +
                      std::to_string(ceil_div(num_prompt + 1, config_.block_size)) + " KV blocks, but the pool has " +
                      std::to_string(config_.num_blocks) + " blocks of " + std::to_string(config_.block_size) +
                      " tokens");
  const auto num_initial = static_cast<int32_t>(spec.initial_output.size());
  if (num_initial >= spec.max_tokens)
    return make_error(name + ": max_tokens leaves no room to generate after the " + std::to_string(num_initial) +
                      " given output tokens");
  if (num_prompt + num_initial >= limit)
    return make_error(name + ": " + std::to_string(num_prompt + num_initial) +
                      " tokens leave no room to generate within " + std::to_string(limit));
  Request r;
  r.id = spec.id;
  r.tokens = std::move(spec.prompt_ids);
  r.num_prompt = num_prompt;
  r.tokens.insert(r.tokens.end(), spec.initial_output.begin(), spec.initial_output.end());
  r.max_tokens = spec.max_tokens;
  r.priority = spec.priority;
  r.arrival = next_arrival_++;
  r.isolation = std::move(spec.isolation);
  r.use_prefix_cache = spec.use_prefix_cache;
  r.retain_kv = spec.retain_kv;
  r.kv_policy = *policy;
  waiting_.push_back(r.id);
  requests_.emplace(r.id, std::move(r));
  return {};
}

bool Scheduler::cancel(RequestId id) {
  GB_CHECK_MSG(!in_flight_, "Scheduler::cancel between schedule() and on_step_done()");
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  if (kv_.has_request(id)) kv_free(id);
  remove_from(running_, id);
  remove_from(waiting_, id);
  requests_.erase(it);
  return true;
}

Status Scheduler::fork(RequestId parent, RequestSpec child, int32_t num_shared_tokens,
                       std::vector<TokenId> initial_output) {
  GB_CHECK_MSG(!in_flight_, "Scheduler::fork between schedule() and on_step_done()");
  GB_CHECK_MSG(!requests_.contains(child.id) && !retained_.contains(child.id), "Scheduler::fork: child id in use");
  const std::string name = "fork of request " + std::to_string(parent.value);
  int32_t computed = 0;
  if (auto it = retained_.find(parent); it != retained_.end()) {
    computed = it->second.num_computed;
    it->second.last_used = next_use_++;  // branching from it makes it recent
  } else if (auto rt = requests_.find(parent); rt != requests_.end() && rt->second.state == RequestState::Running) {
    computed = rt->second.num_tokens_computed;
  } else {
    return make_error(name + ": the parent holds no KV blocks (finished without retain_kv, waiting, or unknown)");
  }
  const auto num_prompt = static_cast<int32_t>(child.prompt_ids.size());
  const auto num_total = num_prompt + static_cast<int32_t>(initial_output.size());
  if (num_shared_tokens < 1 || num_shared_tokens > computed || num_shared_tokens > num_prompt)
    return make_error(name + ": cannot share " + std::to_string(num_shared_tokens) + " tokens; the parent has computed " +
                      std::to_string(computed));
  if (num_total <= num_shared_tokens) return make_error(name + ": the child needs at least one token after the shared ones");
  if (num_total >= max_total_tokens_) return make_error(name + ": the branch is longer than the context");
  // An evicted parent shares the slots holding positions before the fork point.
  const int32_t num_slots = shared_slots(parent, num_shared_tokens);
  if (num_slots < 0)
    return make_error(name + ": the parent's evicted KV cache does not hold the positions before " +
                      std::to_string(num_shared_tokens) + " in its first slots");
  if (num_slots == 0) return make_error(name + ": the parent's KV cache keeps none of the shared tokens");
  if (!kv_.can_fork(parent, num_slots) || (window_kv_ && !window_kv_->can_fork(parent, num_shared_tokens)))
    return make_error(name + ": the parent's K/V before position " + std::to_string(num_shared_tokens) +
                      " has left the sliding window and was released");
  if (static_cast<int32_t>(initial_output.size()) >= child.max_tokens)
    return make_error(name + ": max_tokens leaves no room to generate after the forced tokens");
  auto policy = resolve_kv_policy(child.kv_policy);
  if (!policy) return make_error(name + ": " + policy.error().message);
  if (policy->active() && config_.sliding_window > 0)
    return make_error(name + ": KV eviction needs global attention layers");
  std::vector<int32_t> positions;
  std::vector<float> mass;
  if (auto it = retained_.find(parent); it != retained_.end()) {
    positions = it->second.kv_positions;
    mass = it->second.kv_mass;
  } else {
    positions = requests_.at(parent).kv_positions;
    mass = requests_.at(parent).kv_mass;
  }
  if (!positions.empty()) positions.resize(static_cast<size_t>(num_slots));
  mass.resize(positions.empty() && !policy->active() ? 0 : static_cast<size_t>(num_slots), 0.0f);
  if (policy->active() && positions.empty())
    for (int32_t p = 0; p < num_slots; ++p) positions.push_back(p);
  auto copies = kv_fork(parent, child.id, num_shared_tokens, num_slots);
  while (!copies && config_.evict_retained && release_lru_retained(parent))
    copies = kv_fork(parent, child.id, num_shared_tokens, num_slots);
  if (!copies) return make_error(name + ": no free KV block for the copy-on-write of the last block");
  if (policy->active() || !positions.empty()) {
    // Its cache will hold other values than a full one (see KV eviction).
    kv_.stop_prefix_commits(child.id);
    if (window_kv_) window_kv_->stop_prefix_commits(child.id);
  }
  pending_copies_.insert(pending_copies_.end(), copies->begin(), copies->end());
  Request r;
  r.id = child.id;
  r.tokens = std::move(child.prompt_ids);
  r.num_prompt = num_prompt;
  r.tokens.insert(r.tokens.end(), initial_output.begin(), initial_output.end());
  r.max_tokens = child.max_tokens;
  r.priority = child.priority;
  r.arrival = next_arrival_++;
  r.isolation = std::move(child.isolation);
  r.use_prefix_cache = child.use_prefix_cache && !policy->active();
  r.retain_kv = child.retain_kv;
  r.kv_policy = *policy;
  r.kv_positions = std::move(positions);
  r.kv_mass = std::move(mass);
  r.kv_inherited = num_slots < num_shared_tokens ? num_shared_tokens : 0;
  r.kv_fork_point = num_shared_tokens;
  r.num_tokens_computed = num_shared_tokens;
  r.state = RequestState::Running;
  running_.push_back(r.id);
  requests_.emplace(r.id, std::move(r));
  return {};
}

bool Scheduler::release(RequestId id) {
  GB_CHECK_MSG(!in_flight_, "Scheduler::release between schedule() and on_step_done()");
  auto it = retained_.find(id);
  if (it == retained_.end()) return false;
  kv_free(id);
  retained_.erase(it);
  return true;
}

bool Scheduler::release_lru_retained(RequestId keep) {
  auto oldest = retained_.end();
  for (auto it = retained_.begin(); it != retained_.end(); ++it)
    if (it->first != keep && (oldest == retained_.end() || it->second.last_used < oldest->second.last_used)) oldest = it;
  if (oldest == retained_.end()) return false;
  kv_free(oldest->first);  // full blocks stay cached (evictable), the rest is free
  retained_.erase(oldest);
  return true;
}

std::vector<RequestId> Scheduler::retained_requests() const {
  std::vector<std::pair<uint64_t, RequestId>> order;
  for (const auto& [id, r] : retained_) order.emplace_back(r.last_used, id);
  std::sort(order.begin(), order.end());
  std::vector<RequestId> out;
  for (const auto& [used, id] : order) out.push_back(id);
  return out;
}

int32_t Scheduler::num_tokens_held(RequestId id) const {
  if (auto it = retained_.find(id); it != retained_.end()) return it->second.num_computed;
  const Request* r = find(id);
  return r && r->state == RequestState::Running ? r->num_tokens_computed : 0;
}

std::optional<RequestId> Scheduler::stalled_request() const {
  if (!running_.empty() || waiting_.empty()) return std::nullopt;
  std::vector<RequestId> order = waiting_;
  sort_by_rank(order);
  return order.front();
}

void Scheduler::remove_from(std::vector<RequestId>& list, RequestId id) {
  list.erase(std::remove(list.begin(), list.end(), id), list.end());
}

void Scheduler::sort_by_rank(std::vector<RequestId>& ids) const {
  std::sort(ids.begin(), ids.end(),
            [this](RequestId a, RequestId b) { return requests_.at(a).ranks_before(requests_.at(b)); });
}

RequestId Scheduler::lowest_ranked_running() const {
  GB_CHECK(!running_.empty());
  RequestId worst = running_.front();
  for (RequestId id : running_)
    if (requests_.at(worst).ranks_before(requests_.at(id))) worst = id;
  return worst;
}

int32_t Scheduler::chunk_limit(int32_t budget) const {
  int32_t n = config_.max_prefill_chunk > 0 ? std::min(budget, config_.max_prefill_chunk) : budget;
  if (window_chunk_cap_ > 0) n = std::min(n, window_chunk_cap_);
  return n;
}

std::span<const TokenId> Scheduler::tokens_to_compute(const Request& r, int32_t n) const {
  return r.all_tokens().subspan(static_cast<size_t>(r.num_tokens_computed), static_cast<size_t>(n));
}

void Scheduler::drop_kv(Request& r) {
  kv_free(r.id);
  r.num_tokens_computed = 0;
  r.kv_positions.clear();
  r.kv_mass.clear();
  r.kv_reuse_slot = -1;
  r.kv_pruned = false;
  r.num_evicted = 0;
  r.kv_inherited = 0;
  r.kv_fork_point = 0;
}

void Scheduler::preempt(RequestId victim, StepState& step) {
  Request& r = at(victim);
  drop_kv(r);
  r.state = RequestState::Preempted;
  ++r.num_preemptions;
  remove_from(running_, victim);
  waiting_.push_back(victim);
  // If it was already scheduled this step, take it back out with its copies.
  for (auto it = step.entries.begin(); it != step.entries.end(); ++it) {
    if (it->id == victim) {
      step.budget += it->num_new_tokens;
      step.entries.erase(it);
      break;
    }
  }
  std::erase_if(step.copies, [victim](const GroupCopy& c) { return c.id == victim; });
  std::erase_if(step.moves, [victim](const GroupMove& m) { return m.id == victim; });
  std::erase_if(step.plan->evictions, [victim](const EvictedTokens& e) { return e.id == victim; });
  step.plan->preempted.push_back(victim);
  ++step.plan->stats.num_preemptions;
}

void Scheduler::schedule_running(StepState& step, bool decodes) {
  std::vector<RequestId> order = running_;
  sort_by_rank(order);
  for (RequestId id : order) {
    if (step.budget == 0 || static_cast<int32_t>(step.entries.size()) >= config_.max_seqs) return;
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.state != RequestState::Running) continue;  // preempted meanwhile
    Request& r = it->second;
    if (r.is_decoding() != decodes) continue;
    const int32_t left = r.num_tokens_total() - r.num_tokens_computed;
    int32_t n = std::min(left, decodes ? step.budget : chunk_limit(step.budget));
    if (!decodes && r.kv_policy.active()) {
      // An evicting request's chunks are a function of the request alone
      // (see fixed_chunk): it waits for a step with room for the whole one.
      const int32_t fixed = fixed_chunk(r);
      if (fixed > n) continue;
      n = fixed;
    }
    const std::span<const TokenId> tokens = tokens_to_compute(r, n);
    if (decodes && try_schedule_draft(id, tokens, step)) continue;
    for (;;) {
      // A decode at the budget overwrites the evicted token's slot: only the
      // window group appends.
      if (const std::optional<int32_t> reuse = evict_for(r, n, step)) {
        if (auto copies = kv_append(id, tokens, *reuse < 0)) {
          step.copies.insert(step.copies.end(), copies->begin(), copies->end());
          step.entries.push_back({id, n, decodes});
          step.budget -= n;
          break;
        }
      }
      // Kept blocks of finished requests go before anyone running is preempted.
      if (config_.evict_retained && release_lru_retained()) continue;
      const RequestId victim = lowest_ranked_running();
      preempt(victim, step);
      if (victim == id) break;
    }
  }
}

void Scheduler::set_draft(RequestId id, std::vector<TokenId> draft_ids) {
  GB_CHECK_MSG(!in_flight_, "Scheduler::set_draft between schedule() and on_step_done()");
  if (draft_ids.empty()) drafts_.erase(id);
  else drafts_[id] = std::move(draft_ids);
}

bool Scheduler::try_schedule_draft(RequestId id, std::span<const TokenId> last, StepState& step) {
  auto it = drafts_.find(id);
  if (it == drafts_.end() || step.budget < 2) return false;
  const Request& r = requests_.at(id);
  // Verification rolls back slots; an evicted cache's slots are not positions.
  if (r.kv_policy.active() || !r.kv_positions.empty()) return false;
  // Every draft token ends up in the output if accepted: stay within max_tokens
  // and the context (the engine bounds k the same way; this is the backstop).
  const int32_t room = std::min(r.max_tokens - r.num_tokens_output(), max_total_tokens_ - r.num_tokens_total());
  const int32_t num_draft =
      std::min({static_cast<int32_t>(it->second.size()), step.budget - 1, room - 1});
  if (num_draft < 1) return false;
  std::vector<TokenId> tokens(last.begin(), last.end());
  tokens.insert(tokens.end(), it->second.begin(), it->second.begin() + num_draft);
  // Drafts are an optimisation: decode plainly rather than take blocks the
  // other running requests may need this step (one each at most) and make
  // them preempt someone for slots that may be rolled back.
  const auto n = static_cast<int32_t>(tokens.size());
  const bool more_than_one = kv_.num_blocks_needed(id, n) > kv_.num_blocks_needed(id, 1) ||
                             (window_kv_ && window_kv_->num_blocks_needed(id, n) > window_kv_->num_blocks_needed(id, 1));
  if (more_than_one && kv_short(id, n, static_cast<int32_t>(running_.size()))) return false;
  auto copies = kv_append(id, tokens);
  if (!copies) return false;
  step.copies.insert(step.copies.end(), copies->begin(), copies->end());
  step.entries.push_back({id, 1 + num_draft, true, num_draft});
  step.budget -= 1 + num_draft;
  return true;
}

void Scheduler::schedule_waiting(StepState& step) {
  std::vector<RequestId> order = waiting_;
  sort_by_rank(order);
  const int32_t bs = config_.block_size;
  for (RequestId id : order) {
    if (step.budget == 0 || static_cast<int32_t>(step.entries.size()) >= config_.max_seqs) return;
    Request& r = at(id);
    const std::span<const TokenId> known = r.all_tokens();
    PrefixMatch match;
    int32_t n = 0;
    // Blocks this admission takes: cached blocks revived from the free queue plus
    // new ones for the first chunk (the prefix is whole blocks: no copy needed).
    // Kept blocks of finished requests are released (longest unused first) while
    // it does not fit; released full blocks may then be part of its prefix.
    // With a window group, the hit is the longest both groups serve.
    PrefixMatch window_match;
    auto fits = [&] {
      match = r.use_prefix_cache ? kv_.find_prefix(known, r.isolation) : PrefixMatch{};
      if (window_kv_ && r.use_prefix_cache) {
        window_match = window_kv_->find_prefix(known, r.isolation, match.num_tokens,
                                               kv_.prefix_links(known, r.isolation, match.num_tokens));
        if (window_match.num_tokens < match.num_tokens)
          match = kv_.find_prefix(known, r.isolation, window_match.num_tokens);
      }
      n = std::min(r.num_tokens_total() - match.num_tokens, chunk_limit(step.budget));
      if (r.kv_policy.active()) {
        const int32_t fixed = fixed_chunk(r);
        if (fixed > n) return false;
        n = fixed;
      }
      const int32_t taken = match.num_unreferenced + ceil_div(match.num_tokens + n, bs) - match.num_blocks;
      const int32_t left_after = kv_.num_available() - taken;
      bool ok = left_after >= 0 && (running_.empty() || left_after >= watermark_blocks_);
      if (window_kv_) {
        const int32_t window_taken =
            window_match.num_unreferenced + ceil_div(match.num_tokens + n, bs) - window_match.num_blocks;
        const int32_t window_left = window_kv_->num_available() - window_taken;
        ok = ok && window_left >= 0 && (running_.empty() || window_left >= window_watermark_blocks_);
      }
      return ok;
    };
    bool admissible = fits();
    while (!admissible && config_.evict_retained && release_lru_retained()) admissible = fits();
    if (!admissible) return;  // first in line waits; nobody overtakes it
    const int32_t hit = kv_.add_request(id, known, r.isolation, r.use_prefix_cache, match.num_tokens);
    GB_CHECK(hit == match.num_tokens);
    if (window_kv_)
      GB_CHECK(window_kv_->add_request(id, known, r.isolation, r.use_prefix_cache, hit, kv_.table(id).prefix_chain) == hit);
    r.num_tokens_computed = hit;
    r.num_prefix_hit_tokens += hit;
    step.plan->stats.num_prefix_hit_tokens += hit;
    auto copies = kv_append(id, tokens_to_compute(r, n));
    GB_CHECK_MSG(copies && copies->empty(), "admission counted its blocks wrong");
    r.state = RequestState::Running;
    remove_from(waiting_, id);
    running_.push_back(id);
    step.entries.push_back({id, n, false});
    step.budget -= n;
  }
}

StepPlan Scheduler::schedule() {
  GB_CHECK_MSG(!in_flight_, "Scheduler::schedule called again before on_step_done");
  StepPlan plan;
  plan.block_size = config_.block_size;
  plan.stats.step = next_step_++;
  StepState step;
  step.budget = config_.max_batch_tokens;
  step.plan = &plan;
  schedule_running(step, /*decodes=*/true);
  schedule_running(step, /*decodes=*/false);
  // Blocks just ran out: admitting now would only take blocks the running
  // requests need next step (and could re-admit the request just preempted).
  if (plan.stats.num_preemptions == 0) schedule_waiting(step);

  for (const Entry& e : step.entries) {
    const Request& r = requests_.at(e.id);
    ScheduledRequest s;
    s.id = e.id;
    s.start_pos = r.num_tokens_computed;
    s.num_new_tokens = e.num_new_tokens;
    if (e.num_draft > 0) {
      // The last known token, then the drafts (not yet part of the request).
      const std::span<const TokenId> last = tokens_to_compute(r, 1);
      s.token_ids.assign(last.begin(), last.end());
      const std::vector<TokenId>& d = drafts_.at(e.id);
      s.token_ids.insert(s.token_ids.end(), d.begin(), d.begin() + e.num_draft);
    } else {
      const std::span<const TokenId> tokens = tokens_to_compute(r, e.num_new_tokens);
      s.token_ids.assign(tokens.begin(), tokens.end());
    }
    Request& rw = requests_.at(e.id);
    if (rw.kv_reuse_slot >= 0) {
      // A decode at the budget: its token takes the evicted token's slot.
      s.kv_slots = {rw.kv_reuse_slot};
      rw.kv_positions[static_cast<size_t>(rw.kv_reuse_slot)] = s.start_pos;
      if (!rw.kv_mass.empty()) rw.kv_mass[static_cast<size_t>(rw.kv_reuse_slot)] = 0.0f;
    } else if (rw.kv_policy.active() || !rw.kv_positions.empty()) {
      for (int32_t i = 0; i < s.num_new_tokens; ++i) {
        s.kv_slots.push_back(static_cast<int32_t>(rw.kv_positions.size()));
        rw.kv_positions.push_back(s.start_pos + i);
      }
      rw.kv_mass.resize(kv_policy_row(rw.kv_policy.kind).uses_mass ? rw.kv_positions.size() : 0, 0.0f);
    }
    s.num_kv_slots = rw.kv_positions.empty() ? s.start_pos + s.num_new_tokens
                                             : static_cast<int32_t>(rw.kv_positions.size());
    if (rw.kv_policy.kind == KvPolicyKind::H2O) s.mass_from = 0;
    else if (rw.kv_policy.kind == KvPolicyKind::SnapKV && !rw.kv_pruned)
      s.mass_from = std::max(0, rw.num_prompt - rw.kv_policy.window);
    s.block_ids = kv_.table(e.id).block_ids();
    if (window_kv_) s.window_block_ids = window_kv_->table(e.id).block_ids();
    // A verification needs logits at every position; otherwise only the step
    // that reaches the last known token does (step_plan.h).
    if (e.num_draft > 0) s.num_logit_rows = s.num_new_tokens;
    else if (s.start_pos + s.num_new_tokens == r.num_tokens_total()) s.num_logit_rows = 1;
    s.is_decode = e.is_decode;
    (e.is_decode ? plan.stats.num_decode_tokens : plan.stats.num_prefill_tokens) += e.num_new_tokens;
    plan.requests.push_back(std::move(s));
  }
  // Fork copies first: their sources are shared, full or partial blocks that
  // nothing in this step writes before the copy.
  const auto emit = [&plan](const GroupCopy& c) {
    (c.group == 0 ? plan.block_copies : plan.window_block_copies).emplace_back(c.copy.src.value, c.copy.dst.value);
  };
  for (const GroupMove& m : step.moves) plan.slot_moves.emplace_back(m.move.src, m.move.dst);
  for (const GroupCopy& c : pending_copies_) emit(c);
  plan.num_fork_copies = static_cast<int32_t>(plan.block_copies.size());
  pending_copies_.clear();
  for (const GroupCopy& c : step.copies) emit(c);
  kv_.end_step_copies();
  drafts_.clear();  // a draft that did not get scheduled is stale next step
  plan.stats.num_seqs = static_cast<int32_t>(plan.requests.size());
  in_flight_ = !plan.empty();
  return plan;
}

std::vector<FinishedRequest> Scheduler::on_step_done(const StepPlan& plan, std::span<const StepToken> sampled) {
  in_flight_ = false;
  std::vector<FinishedRequest> finished;
  size_t next_sample = 0;
  for (const ScheduledRequest& s : plan.requests) {
    Request& r = at(s.id);
    GB_CHECK(r.state == RequestState::Running && r.num_tokens_computed == s.start_pos);
    // A verification (decode with drafts): only the last token and the
    // accepted drafts stay computed; the rejected drafts' slots are rolled back.
    const int32_t num_draft = s.is_decode ? s.num_new_tokens - 1 : 0;
    int32_t num_accepted = 0;
    if (num_draft > 0) {
      GB_CHECK_MSG(next_sample < sampled.size() && sampled[next_sample].id == s.id,
                   "on_step_done: one StepToken per request with logit rows, in plan order");
      num_accepted = sampled[next_sample].num_accepted_draft;
      GB_CHECK_MSG(num_accepted >= 0 && num_accepted <= num_draft, "on_step_done: more accepted drafts than drafted");
      kv_truncate(s.id, num_draft - num_accepted);
    } else {
      GB_CHECK_MSG(next_sample >= sampled.size() || sampled[next_sample].id != s.id ||
                       sampled[next_sample].num_accepted_draft == 0,
                   "on_step_done: accepted drafts for a request that had none");
    }
    r.num_tokens_computed += s.num_new_tokens - (num_draft - num_accepted);
    r.kv_reuse_slot = -1;
    kv_mark_computed(r);
    if (!s.needs_logits()) continue;
    GB_CHECK_MSG(next_sample < sampled.size() && sampled[next_sample].id == s.id,
                 "on_step_done: one StepToken per request with logit rows, in plan order");
    const StepToken& t = sampled[next_sample++];
    r.tokens.insert(r.tokens.end(), s.token_ids.begin() + 1, s.token_ids.begin() + 1 + num_accepted);
    r.tokens.push_back(t.token);
    FinishReason reason = FinishReason::None;
    if (t.stop) reason = FinishReason::Stop;
    else if (r.num_tokens_output() >= r.max_tokens) reason = FinishReason::MaxTokens;
    else if (r.num_tokens_total() >= position_limit(r)) reason = FinishReason::Length;
    if (reason == FinishReason::None) continue;
    if (r.retain_kv) {
      retained_[s.id] = {r.num_tokens_computed, next_use_++, std::move(r.kv_positions), std::move(r.kv_mass)};
      if (config_.max_retained > 0 && static_cast<int32_t>(retained_.size()) > config_.max_retained)
        release_lru_retained(s.id);
    } else {
      kv_free(s.id);
    }
    remove_from(running_, s.id);
    finished.push_back({s.id, reason, std::move(r.tokens), r.num_prompt});
    requests_.erase(s.id);
  }
  GB_CHECK_MSG(next_sample == sampled.size(), "on_step_done: more samples than requests needing logits");
  // The invariant sweep after a step is the caller's (the engine's
  // EngineConfig::check_invariants, on in debug builds; the tests' drivers):
  // one sweep per step, not two.
  return finished;
}

void Scheduler::on_step_failed(const StepPlan& plan) {
  in_flight_ = false;
  for (const ScheduledRequest& s : plan.requests) {
    Request& r = at(s.id);
    if (!s.kv_slots.empty()) {
      // Its cache may be half rewritten (moved rows, an overwritten slot):
      // it recomputes from scratch.
      drop_kv(r);
      r.state = RequestState::Preempted;
      remove_from(running_, s.id);
      waiting_.push_back(s.id);
      continue;
    }
    kv_truncate(s.id, s.num_new_tokens);
  }
}

Status Scheduler::check_invariants() const {
  GB_TRY(kv_.check_invariants());
  auto fail = [](const std::string& what) { return Status(make_error("Scheduler invariant: " + what)); };
  if (window_kv_) {
    GB_TRY(window_kv_->check_invariants());
    // The groups hold the same requests, token for token, under one chain.
    if (window_kv_->num_requests() != kv_.num_requests()) return fail("the layer groups hold different requests");
    for (const auto& [id, kept] : retained_) {
      (void)kept;
      if (!window_kv_->has_request(id)) return fail("a retained request is in one layer group only");
    }
    for (const auto& [id, request] : requests_) {
      if (kv_.has_request(id) != window_kv_->has_request(id)) return fail("a request is in one layer group only");
      if (!kv_.has_request(id)) continue;
      const BlockTable& a = kv_.table(id);
      const BlockTable& b = window_kv_->table(id);
      // An evicted leader's slots are not positions; the window group's are.
      if (!request.kv_positions.empty() || request.kv_policy.active()) {
        if (!in_flight_ && b.num_tokens != request.num_tokens_computed)
          return fail("the window group of an evicting request does not hold its positions");
        continue;
      }
      if (a.num_tokens != b.num_tokens || a.num_computed != b.num_computed ||
          a.num_committed_blocks != b.num_committed_blocks || a.prefix_chain.size() != b.prefix_chain.size())
        return fail("the layer groups' tables of a request disagree");
      for (size_t i = 0; i < a.prefix_chain.size(); ++i)
        if (a.prefix_chain[i].hash != b.prefix_chain[i].hash || a.prefix_chain[i].serial != b.prefix_chain[i].serial)
          return fail("the window group's chain is not its leader's");
    }
  }
  if (running_.size() + waiting_.size() != requests_.size()) return fail("a request is in no list or in two");
  for (RequestId id : running_) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.state != RequestState::Running) return fail("running list holds a non-running request");
    const Request& r = it->second;
    if (!kv_.has_request(id)) return fail("running request without a block table");
    const BlockTable& t = kv_.table(id);
    if (r.num_tokens_computed >= r.num_tokens_total()) return fail("running request with nothing left to compute");
    if (r.num_tokens_total() > position_limit(r)) return fail("request longer than the context limit");
    if (!in_flight_ && (t.num_tokens != r.num_kv_slots() || t.num_computed != r.num_kv_slots()))
      return fail("block table and request disagree on computed tokens");
    if (!in_flight_) GB_TRY(check_kv_policy(r));
  }
  if (config_.max_retained > 0 && static_cast<int32_t>(retained_.size()) > config_.max_retained)
    return fail("more retained requests than max_retained");
  for (const auto& [id, kept] : retained_) {
    if (requests_.contains(id)) return fail("a retained request is still queued or running");
    const int32_t slots = kept.kv_positions.empty() ? kept.num_computed : static_cast<int32_t>(kept.kv_positions.size());
    if (!kv_.has_request(id) || kv_.table(id).num_computed != slots)
      return fail("a retained request's block table does not match its computed tokens");
  }
  for (RequestId id : waiting_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return fail("waiting list holds an unknown request");
    const Request& r = it->second;
    if (r.state != RequestState::Waiting && r.state != RequestState::Preempted) return fail("waiting request in a wrong state");
    if (kv_.has_request(id) || r.num_tokens_computed != 0) return fail("waiting request holds blocks");
  }
  return {};
}

}  // namespace gb
