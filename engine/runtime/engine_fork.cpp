// Engine: branching (copy-on-write forks), cancellation, releasing retained KV
// and live sampler-setting changes. The step loop is in engine.cpp.
#include <algorithm>

#include "kv/scheduler.h"
#include "runtime/engine.h"
#include "runtime/engine_request_state.h"
#include "sampling/sampler_settings_json.h"
#include "speculative/speculative_decoder.h"

namespace gb {

Result<RequestId> Engine::fork(RequestId parent, int32_t num_tokens, std::optional<TokenId> forced_next,
                               int32_t max_tokens) {
  auto pit = states_.find(parent);
  if (pit == states_.end()) return make_error("fork: request " + std::to_string(parent.value) + " is unknown");
  SamplerSettings settings = pit->second->settings;
  settings.max_tokens = max_tokens;
  return fork_impl(parent, num_tokens, forced_next, std::move(settings), false, true);
}

Result<RequestId> Engine::fork_with_settings(RequestId parent, int32_t num_tokens, SamplerSettings settings,
                                             bool retain_kv) {
  if (Status st = validate(settings); !st) return make_error("fork: " + st.error().message);
  return fork_impl(parent, num_tokens, std::nullopt, std::move(settings), true, retain_kv);
}

Result<RequestId> Engine::fork_impl(RequestId parent, int32_t num_tokens, std::optional<TokenId> forced_next,
                                    SamplerSettings settings, bool complete, bool retain_kv) {
  GB_CHECK_MSG(scheduler_ != nullptr, "Engine::fork before start()");
  auto pit = states_.find(parent);
  if (pit == states_.end()) return make_error("fork: request " + std::to_string(parent.value) + " is unknown");
  const RequestState& ps = *pit->second;
  const int32_t max_tokens = settings.max_tokens;
  // The parent's tokens: from the scheduler while it runs, else from its record.
  std::vector<TokenId> tokens;
  if (const Request* r = scheduler_->find(parent)) tokens = r->all_tokens();
  else tokens = retained_tokens_.count(parent) ? retained_tokens_[parent] : std::vector<TokenId>{};
  if (num_tokens < 1 || num_tokens > static_cast<int32_t>(tokens.size()))
    return make_error("fork: request " + std::to_string(parent.value) + " has no token " + std::to_string(num_tokens));
  if (forced_next && (*forced_next < 0 || *forced_next >= model_->config.vocab_size))
    return make_error("fork: token id " + std::to_string(*forced_next) + " is outside the vocabulary");

  const RequestId id{next_request_id_++};
  auto rs = std::make_unique<RequestState>();
  rs->settings = std::move(settings);
  if (complete) complete_settings(rs->settings);
  reset_helpers(*rs);
  // The counter continues from the branch point, so a branch that changes
  // nothing (same seed) replays the parent's draws, and a fork at the end of
  // the prompt draws exactly what a request submitted alone would.
  rs->rng = SamplerRng(rs->settings.seed, static_cast<uint64_t>(std::max(0, num_tokens - ps.num_prompt)));
  rs->decoder = std::make_unique<StreamingDecoder>(*tokenizer_);
  rs->ignore_eos = ps.ignore_eos;
  std::vector<TokenId> shared(tokens.begin(), tokens.begin() + num_tokens);
  rs->decoder->prime(shared);
  rs->num_prompt = num_tokens;
  rs->submitted_ms = ms_now();

  // With a forced token the child shares every given token and starts its
  // output with the forced one (computed next); without one it shares all but
  // the last token and recomputes that to get its logits.
  RequestSpec spec;
  spec.id = id;
  spec.prompt_ids = shared;
  spec.max_tokens = max_tokens;
  spec.isolation.model = model_->path;
  spec.retain_kv = retain_kv;
  std::vector<TokenId> initial_output;
  if (forced_next) initial_output.push_back(*forced_next);
  const int32_t num_shared = forced_next ? num_tokens : num_tokens - 1;
  if (num_shared < 1) return make_error("fork: nothing to share before token 1");
  rs->prompt_ids = shared;
  if (Status st = scheduler_->fork(parent, std::move(spec), num_shared, initial_output); !st) return st.error();

  RequestSubmittedEvent ev;
  ev.request = id;
  ev.prompt_ids = shared;
  ev.max_tokens = max_tokens;
  ev.priority = "interactive";
  ev.sampler_settings = sampler_settings_to_json(rs->settings);
  ev.parent = parent;
  ev.fork_position = num_tokens;
  publish(std::move(ev));
  if (forced_next) {
    // The chosen alternative is the child's first generated token.
    TokenSampledEvent tok;
    tok.request = id;
    tok.step = step_index_;
    tok.position = num_tokens;
    tok.index = 0;
    tok.token = *forced_next;
    tok.origin = TokenOrigin::Forced;
    tok.text = rs->decoder->push(*forced_next);
    rs->text += tok.text;
    rs->num_generated = 1;
    rs->first_token_ms = rs->last_token_ms = ms_now();
    rs->rng.advance();
    publish(std::move(tok));
  }
  states_.emplace(id, std::move(rs));
  return id;
}

bool Engine::cancel(RequestId id) {
  auto it = states_.find(id);
  if (it == states_.end()) return false;
  const bool was_live = scheduler_->cancel(id);
  if (was_live) {
    RequestState& rs = *it->second;
    finish(id, "cancelled", rs, rs.num_generated);
    states_.erase(it);  // a cancelled request keeps no blocks, so it cannot be forked
  }
  return was_live;
}

bool Engine::release(RequestId id) {
  retained_tokens_.erase(id);
  states_.erase(id);
  const bool released = scheduler_->release(id);
  if (released) forward_kv_events();
  return released;
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
  rs.settings = settings;
  rs.settings.max_tokens = max_tokens;
  complete_settings(rs.settings);
  rs.chain = std::make_unique<SamplerChain>(rs.settings);
  rs.rng = SamplerRng(settings.seed, counter);
  spec_->set_sampler_settings(id, rs.settings);
  return {};
}

}  // namespace gb
