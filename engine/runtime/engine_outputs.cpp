// Engine: the token-choosing part of a step -- after the forward pass, every
// request with logit rows gets its next token(s): sampled, forced by a
// reasoning budget, or verified from a draft. What happens to a chosen token
// (stop checks, text, events) is RequestOutput's job (output_processor.h).
// The step loop is in engine.cpp.
#include <algorithm>
#include <cmath>

#include "kv/scheduler.h"
#include "runtime/engine.h"
#include "runtime/engine_request_state.h"
#include "runtime/grammar_constraint.h"
#include "runtime/output_processor.h"
#include "runtime/text_scorer.h"
#include "speculative/speculative_decoder.h"

namespace gb {

namespace {
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

// Walks the plan's logit rows (ScheduledRequest::num_logit_rows each, plan
// order, as to_batch_layout laid them out): one row is a plain next token,
// more are a verification of [last, drafts...].
StepOutputs Engine::sample_outputs(const StepPlan& plan, const StepTimes& t) {
  StepOutputs out;
  const auto vocab = static_cast<size_t>(model_->config.vocab_size);
  size_t row = 0;
  for (const ScheduledRequest& s : plan.requests) {
    if (s.num_logit_rows == 0) continue;
    const auto num_rows = static_cast<size_t>(s.num_logit_rows);
    const std::span<const float> rows(logits_.data() + row * vocab, num_rows * vocab);
    if (num_rows > 1) verify_drafts(s, rows, row, t, out);
    else sample_token(s, rows, row, t, out);
    row += num_rows;
  }
  return out;
}

// One token from one row of logits: the reasoning budget's forced token, or a
// draw from the request's chain with its own random stream.
std::optional<RoutingRecord> Engine::routing_of_row(size_t row) const {
  const auto k = static_cast<size_t>(routing_.experts_per_token), layers = static_cast<size_t>(routing_.layers);
  if (k == 0 || routing_.experts.size() < (row + 1) * layers * k) return std::nullopt;
  RoutingRecord r;
  r.experts_per_token = routing_.experts_per_token;
  const auto from = static_cast<ptrdiff_t>(row * layers * k), to = from + static_cast<ptrdiff_t>(layers * k);
  r.experts.assign(routing_.experts.begin() + from, routing_.experts.begin() + to);
  r.weights.assign(routing_.weights.begin() + from, routing_.weights.begin() + to);
  return r;
}

void Engine::sample_token(const ScheduledRequest& s, std::span<const float> logits, size_t first_row,
                          const StepTimes& t, StepOutputs& out) {
  RequestState& rs = *states_.at(s.id);
  const Request* r = scheduler_->find(s.id);
  const double t_sample0 = ms_now();
  TokenSampledEvent ev;
  ev.request = s.id;
  ev.step = step_index_;
  ev.position = s.start_pos + s.num_new_tokens;
  TokenRecord* record = config_.record_tokens && rs.settings.top_n_record > 0 ? &ev.record : nullptr;
  // The grammar stage's mask; a format that allows nothing here ends the request.
  GrammarConstraint* grammar = rs.output->grammar();
  std::string grammar_state;
  if (grammar) {
    if (grammar->dead_end()) {
      rs.rng.advance();
      out.dead_end(s.id, tokenizer_->eos_id());
      return;
    }
    rs.chain->set_grammar_mask(grammar->mask());
    if (record) grammar_state = grammar->describe();
  }
  const std::span<const TokenId> forced = rs.output->forced_next();
  if (rs.shadow_of) {
    // A full-cache shadow takes its request's token (see start_shadows).
    if (!shadow_token(s, rs, logits, ev.token, out)) {
      out.fail(s.id, tokenizer_->eos_id(), "the KV shadow ran ahead of its request");
      return;
    }
    ev.origin = TokenOrigin::Forced;
    rs.rng.advance();
    if (record) record_for_token(*rs.chain, logits, r->all_tokens(), ev.token, *record);
  } else if (!forced.empty()) {
    // Reasoning budget spent: the close marker is appended instead of sampling.
    ev.token = forced.front();
    ev.origin = TokenOrigin::Forced;
    rs.rng.advance();
    if (record) record_for_token(*rs.chain, logits, r->all_tokens(), ev.token, *record);
  } else {
    auto tok = rs.chain->sample(logits, r->all_tokens(), rs.rng, record);
    if (!tok) {
      out.fail(s.id, tokenizer_->eos_id(), tok.error().message);
      return;
    }
    ev.token = tok->id;
  }
  if (record && record->grammar) {
    record->grammar->state = std::move(grammar_state);
    record->grammar->forced = grammar->one_text(grammar->mask());
  }
  if (record) record->routing = routing_of_row(first_row);
  // A request with a shadow (or about to get one) keeps its row until the
  // shadow reaches that position.
  if (rs.wants_shadow || rs.shadow) rs.shadow_rows[ev.position].assign(logits.begin(), logits.end());
  const TokenId chosen = ev.token;
  const bool stop = out.add_token(*rs.output, std::move(ev), ms_now(), t.forward_time(), t_sample0);
  out.sampled.push_back({s.id, chosen, stop});
  // A speculative request that decoded without a draft (fallback, no n-gram
  // match, budget): its cost is the adaptive K's baseline.
  if (spec_->has(s.id)) spec_->on_plain_step(s.id, t.forward_time(), s.is_decode);
}

bool Engine::shadow_token(const ScheduledRequest& s, RequestState& rs, std::span<const float> logits, TokenId& token,
                          StepOutputs& out) {
  const int32_t position = s.start_pos + s.num_new_tokens;
  const Request* leader = scheduler_->find(*rs.shadow_of);
  auto lt = states_.find(*rs.shadow_of);
  if (leader == nullptr || lt == states_.end() || leader->num_tokens_total() < position) return false;
  if (leader->num_tokens_total() > position) {
    token = leader->token_at(position);
  } else {
    // Taken earlier in this step (the request comes first in the batch).
    auto taken = std::find_if(out.sampled.begin(), out.sampled.end(), [&](const StepToken& t) { return t.id == leader->id; });
    if (taken == out.sampled.end()) return false;
    token = taken->token;
  }
  RequestState& ls = *lt->second;
  if (auto row = ls.shadow_rows.find(position); row != ls.shadow_rows.end()) {
    std::vector<double> full, pruned;
    log_softmax(logits, full);
    log_softmax(row->second, pruned);
    const TokenScore sc = score_position(position, token, pruned, &full, 0);
    KvShadowEvent ev;
    ev.request = *rs.shadow_of;
    ev.shadow = s.id;
    ev.step = step_index_;
    ev.position = position;
    ev.index = position - ls.num_prompt;
    ev.kl = sc.kl.value_or(0.0);
    ev.top1_agree = sc.top1_agree.value_or(true);
    ev.logprob_pruned = sc.logprob;
    ev.logprob_full = sc.base_logprob.value_or(0.0);
    out.shadow.push_back(ev);
  }
  ls.shadow_rows.erase(ls.shadow_rows.begin(), ls.shadow_rows.upper_bound(position));
  return true;
}

// A verification: rows for [last, d_1..d_k]. The accepted drafts are emitted,
// then the resampled or bonus token, stopping early at EOS or a stop string;
// the StepToken says how many drafts the scheduler keeps.
void Engine::verify_drafts(const ScheduledRequest& s, std::span<const float> rows, size_t first_row,
                           const StepTimes& t, StepOutputs& out) {
  const int32_t num_draft = s.num_new_tokens - 1;
  const auto vocab = static_cast<size_t>(model_->config.vocab_size);
  RequestState& rs = *states_.at(s.id);
  const double t_sample0 = ms_now();
  const Request* r = scheduler_->find(s.id);
  // With a format, row i is sampled under the mask of the grammar state after
  // the drafted tokens before it (propose_drafts cut drafts at the first token
  // the format forbids, so those states exist).
  GrammarConstraint* grammar = rs.output->grammar();
  if (grammar && grammar->dead_end()) {
    out.dead_end(s.id, tokenizer_->eos_id());
    return;
  }
  // Row i's mask and state text, computed as the rows are reached: the matcher
  // advances over the tokens before row i (drafts, all allowed: see propose_drafts).
  std::vector<TokenBitmask> row_masks;
  std::vector<std::string> row_states;
  std::optional<GrammarMatcher> row_matcher;
  const auto set_row_mask = [&](int32_t i, std::span<const TokenId> before) {
    if (!grammar) return;
    if (!row_matcher) row_matcher = grammar->matcher();
    while (static_cast<int32_t>(row_masks.size()) <= i) {
      const size_t k = row_masks.size();
      if (k > 0 && k <= before.size()) grammar->format().masks->accept_token(*row_matcher, before[k - 1]);
      row_masks.emplace_back();
      grammar->mask_for(*row_matcher, row_masks.back());
      row_states.push_back(row_matcher->describe());
    }
    rs.chain->set_grammar_mask(row_masks[static_cast<size_t>(i)]);
  };
  SpeculativeDecoder::BeforeRow before_row;
  if (grammar) before_row = set_row_mask;
  auto verified = spec_->verify(s.id, rows, num_draft, r->all_tokens(), *rs.chain, rs.rng, t.forward_time(),
                                step_index_, before_row);
  if (!verified) {
    out.fail(s.id, tokenizer_->eos_id(), verified.error().message);
    return;
  }
  const bool record = config_.record_tokens && rs.settings.top_n_record > 0;
  // The history each emitted token's record sees: prompt + output + the
  // tokens emitted before it in this verification.
  std::vector<TokenId> history;
  if (record) history.assign(r->all_tokens().begin(), r->all_tokens().end());
  std::vector<TokenId> emitted;  // this verification's tokens so far (row i's prefix)
  StepToken step_token{s.id, -1, false};
  for (size_t i = 0; i < verified->tokens.size(); ++i) {
    TokenSampledEvent ev;
    ev.request = s.id;
    ev.step = step_index_;
    ev.position = s.start_pos + 1 + static_cast<int32_t>(i);
    ev.token = verified->tokens[i].token;
    ev.origin = verified->tokens[i].origin;
    if (record) {
      set_row_mask(static_cast<int32_t>(i), emitted);
      record_for_token(*rs.chain, rows.subspan(i * vocab, vocab), history, ev.token, ev.record);
      if (ev.record.grammar) {
        ev.record.grammar->state = row_states[i];
        ev.record.grammar->forced = grammar->one_text(row_masks[i]);
      }
      ev.record.routing = routing_of_row(first_row + i);
      history.push_back(ev.token);
    }
    emitted.push_back(ev.token);
    step_token.token = ev.token;
    step_token.num_accepted_draft = static_cast<int32_t>(i);  // the drafts before this token
    if (out.add_token(*rs.output, std::move(ev), ms_now(), t.forward_time(), t_sample0)) {
      step_token.stop = true;
      break;
    }
  }
  out.sampled.push_back(step_token);
  out.speculative.push_back(std::move(verified->event));
}

}  // namespace gb
