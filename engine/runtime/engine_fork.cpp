// Engine: branching (copy-on-write forks), cancellation, releasing retained KV
// and live sampler-setting changes. The step loop is in engine.cpp.
#include <algorithm>
#include <tuple>

#include "kv/scheduler.h"
#include "runtime/engine.h"
#include "runtime/engine_request_state.h"
#include "sampling/sampler_settings_json.h"
#include "speculative/speculative_decoder.h"

namespace gb {

Result<RequestId> Engine::fork(RequestId parent, int32_t num_tokens, std::optional<TokenId> forced_next,
                               int32_t max_tokens) {
  return fork_impl(parent, num_tokens, forced_next, nullptr, max_tokens, true);
}

Result<RequestId> Engine::fork_with_settings(RequestId parent, int32_t num_tokens, SamplerSettings settings,
                                             bool retain_kv) {
  if (Status st = validate(settings); !st) return make_error("fork: " + st.error().message);
  return fork_impl(parent, num_tokens, std::nullopt, &settings, settings.max_tokens, retain_kv);
}

// The parent's tokens and settings: from its live state while it is queued or
// running, else from its finished record; nullopt when it is unknown.
std::optional<Engine::ForkParent> Engine::fork_parent(RequestId parent) const {
  ForkParent p;
  if (auto pit = states_.find(parent); pit != states_.end()) {
    if (const Request* r = scheduler_->find(parent)) p.tokens = r->all_tokens();
    p.settings = &pit->second->settings;
    p.num_prompt = pit->second->num_prompt;
    p.ignore_eos = pit->second->ignore_eos;
    return p;
  }
  if (auto fit = finished_.find(parent); fit != finished_.end()) {
    p.tokens = fit->second.tokens;
    p.settings = &fit->second.settings;
    p.num_prompt = fit->second.num_prompt;
    p.ignore_eos = fit->second.ignore_eos;
    return p;
  }
  return std::nullopt;
}

// settings: the child's own (completed here), or nullptr for the parent's.
Result<RequestId> Engine::fork_impl(RequestId parent, int32_t num_tokens, std::optional<TokenId> forced_next,
                                    const SamplerSettings* settings, int32_t max_tokens, bool retain_kv) {
  GB_CHECK_MSG(scheduler_ != nullptr, "Engine::fork before start()");
  const std::optional<ForkParent> p = fork_parent(parent);
  if (!p) return make_error("fork: request " + std::to_string(parent.value) + " is unknown (or finished too long ago)");
  if (num_tokens < 1 || num_tokens > static_cast<int32_t>(p->tokens.size()))
    return make_error("fork: request " + std::to_string(parent.value) + " has no token " + std::to_string(num_tokens));
  if (forced_next && (*forced_next < 0 || *forced_next >= model_->config.vocab_size))
    return make_error("fork: token id " + std::to_string(*forced_next) + " is outside the vocabulary");
  // With a forced token the child shares every given token and starts its
  // output with the forced one (computed next); without one it shares all but
  // the last token and recomputes that to get its logits.
  const int32_t num_shared = forced_next ? num_tokens : num_tokens - 1;
  if (num_shared < 1) return make_error("fork: nothing to share before token 1");

  const RequestId id{next_request_id_++};
  auto rs = std::make_unique<RequestState>();
  rs->settings = settings ? *settings : *p->settings;
  rs->settings.max_tokens = max_tokens;
  if (settings) complete_settings(rs->settings);
  rs->ignore_eos = p->ignore_eos;
  std::vector<TokenId> shared(p->tokens.begin(), p->tokens.begin() + num_tokens);
  const std::span<const TokenId> shared_output(shared.begin() + std::min<ptrdiff_t>(p->num_prompt, num_tokens), shared.end());
  GB_TRY(make_helpers(*rs, shared, shared_output));
  // The counter continues from the branch point, so a branch that changes
  // nothing (same seed) replays the parent's draws, and a fork at the end of
  // the prompt draws exactly what a request submitted alone would.
  rs->rng = SamplerRng(rs->settings.seed, static_cast<uint64_t>(std::max(0, num_tokens - p->num_prompt)));
  rs->num_prompt = num_tokens;
  rs->submitted_ms = ms_now();

  RequestSpec spec;
  spec.id = id;
  spec.prompt_ids = shared;
  spec.max_tokens = max_tokens;
  spec.isolation.model = model_->path;
  spec.isolation.kv_types = kv_types_name(config_.kv_types);
  spec.retain_kv = retain_kv;
  auto scheduled = schedule_fork(parent, std::move(spec), num_shared, forced_next);
  if (!scheduled) return scheduled.error();
  rs->num_shared = *scheduled;
  publish_fork(id, parent, *rs, shared, max_tokens, forced_next);
  states_.emplace(id, std::move(rs));
  return id;
}

Result<int32_t> Engine::schedule_fork(RequestId parent, RequestSpec spec, int32_t num_shared,
                                      std::optional<TokenId> forced_next) {
  std::vector<TokenId> initial_output;
  if (forced_next) initial_output.push_back(*forced_next);
  // Copy-on-write while the parent holds the K/V: its blocks are shared, only
  // the tail is computed. A fork refused there (no free block for the partial
  // block's copy while the pool is full of running requests) falls back, like
  // submit()'s branches, to the next path.
  if (scheduler_->num_tokens_held(parent) >= num_shared &&
      scheduler_->fork(parent, spec, num_shared, initial_output).ok())
    return num_shared;
  // The parent's blocks are gone (released, evicted, or it never ran that
  // far): the same tokens as a new request, mostly prefix-cache hits.
  spec.initial_output = std::move(initial_output);
  GB_TRY(scheduler_->submit(std::move(spec)));
  return 0;
}

void Engine::publish_fork(RequestId id, RequestId parent, RequestState& rs, std::span<const TokenId> shared,
                          int32_t max_tokens, std::optional<TokenId> forced_next) {
  const int32_t num_tokens = static_cast<int32_t>(shared.size());
  RequestSubmittedEvent ev;
  ev.request = id;
  ev.prompt_ids.assign(shared.begin(), shared.end());
  ev.max_tokens = max_tokens;
  ev.priority = "interactive";
  ev.sampler_settings = sampler_settings_to_json(rs.settings);
  ev.parent = parent;
  ev.fork_position = num_tokens;
  publish(std::move(ev));
  if (!forced_next) return;
  // The chosen alternative is the child's first generated token.
  TokenSampledEvent tok;
  tok.request = id;
  tok.step = step_index_;
  tok.position = num_tokens;
  tok.index = 0;
  tok.token = *forced_next;
  tok.origin = TokenOrigin::Forced;
  tok.text = rs.output->accept_given(*forced_next, ms_now());
  rs.rng.advance();
  publish(std::move(tok));
}

std::span<const TokenId> Engine::known_tokens(RequestId id) const {
  if (const Request* r = scheduler_->find(id)) return r->all_tokens();
  if (auto fit = finished_.find(id); fit != finished_.end()) return fit->second.tokens;
  return {};
}

std::optional<Engine::BranchChoice> Engine::choose_branch(const std::vector<RequestId>& candidates,
                                                          const std::vector<TokenId>& prompt) const {
  std::optional<BranchChoice> best;
  for (RequestId c : candidates) {
    const std::span<const TokenId> tokens = known_tokens(c);
    if (tokens.empty()) continue;
    const auto mismatch = std::mismatch(prompt.begin(), prompt.end(), tokens.begin(), tokens.end());
    BranchChoice choice;
    choice.parent = c;
    choice.num_common = static_cast<int32_t>(mismatch.first - prompt.begin());
    // At least the prompt's last token is computed here, for its logits.
    const int32_t held = scheduler_->num_tokens_held(c);
    choice.num_shared = std::max(0, std::min({choice.num_common, static_cast<int32_t>(prompt.size()) - 1, held}));
    // Most K/V reused first, then the longest common prefix.
    if (!best || std::tie(choice.num_shared, choice.num_common) > std::tie(best->num_shared, best->num_common))
      best = choice;
  }
  if (best && best->num_common == 0) return std::nullopt;  // nothing in common: not a branch
  return best;
}

bool Engine::cancel(RequestId id) {
  auto it = states_.find(id);
  if (it == states_.end()) return false;
  std::vector<TokenId> tokens;
  if (const Request* r = scheduler_->find(id)) tokens.assign(r->all_tokens().begin(), r->all_tokens().end());
  const bool was_live = scheduler_->cancel(id);
  if (was_live) {
    RequestState& rs = *it->second;
    forward_kv_events();
    finish(id, "cancelled", rs);
    // Its blocks are returned (full ones stay cached): a later fork re-prefills.
    remember_finished(id, rs, std::move(tokens));
    states_.erase(it);
  }
  return was_live;
}

bool Engine::release(RequestId id) {
  const bool released = scheduler_->release(id);
  if (released) forward_kv_events();
  return released;
}

std::vector<RequestId> Engine::retained_requests() const {
  return scheduler_ ? scheduler_->retained_requests() : std::vector<RequestId>{};
}

Status Engine::set_sampler_settings(RequestId id, const SamplerSettings& settings) {
  auto it = states_.find(id);
  if (it == states_.end()) return make_error("request " + std::to_string(id.value) + " is unknown");
  GB_TRY(validate(settings));
  RequestState& rs = *it->second;
  const uint64_t counter = rs.rng.counter();
  // Stop strings and the reasoning budget keep their state: only the chain and
  // the seed change from the next token on.
  const int32_t max_tokens = rs.settings.max_tokens;
  FormatSettings format = std::move(rs.settings.format);  // a format holds for the whole request
  rs.settings = settings;
  rs.settings.max_tokens = max_tokens;
  rs.settings.format = std::move(format);
  complete_settings(rs.settings);
  rs.chain = std::make_unique<SamplerChain>(rs.settings);
  rs.output->set_stop_token_ids(rs.settings.stop_token_ids);
  rs.rng = SamplerRng(settings.seed, counter);
  spec_->set_sampler_settings(id, rs.settings);
  return {};
}

}  // namespace gb
