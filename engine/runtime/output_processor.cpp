// RequestOutput and StepOutputs (see output_processor.h).
#include "runtime/output_processor.h"

#include <algorithm>

#include "runtime/grammar_constraint.h"
#include "sampling/reasoning_budget.h"
#include "sampling/stop_string_matcher.h"

namespace gb {

RequestOutput::RequestOutput(const Tokenizer& tokenizer, const SamplerSettings& settings,
                             std::span<const TokenId> prompt, bool ignore_eos,
                             std::unique_ptr<GrammarConstraint> grammar)
    : tokenizer_(&tokenizer),
      stop_token_ids_(settings.stop_token_ids),
      ignore_eos_(ignore_eos),
      decoder_(std::make_unique<StreamingDecoder>(tokenizer)),
      stop_(std::make_unique<StopStringMatcher>(settings.stop_strings)),
      grammar_(std::move(grammar)) {
  decoder_->prime(prompt);
  if (settings.reasoning.max_tokens >= 0)
    budget_ = std::make_unique<ReasoningBudget>(settings.reasoning,
                                                tokenizer.encode(settings.reasoning.close_marker, false));
}

RequestOutput::~RequestOutput() = default;
RequestOutput::RequestOutput(RequestOutput&&) noexcept = default;
RequestOutput& RequestOutput::operator=(RequestOutput&&) noexcept = default;

// BOS always stops (as in llama2.c); EOS unless the request ignores it.
bool RequestOutput::ends_generation(TokenId token) const {
  if (!ignore_eos_ && tokenizer_->is_end_of_generation(token)) return true;
  if (token == tokenizer_->bos_id()) return true;
  return std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end();
}

void RequestOutput::stamp(double now_ms) {
  if (first_token_ms_ < 0) first_token_ms_ = now_ms;
  last_token_ms_ = now_ms;
  ++num_generated_;
}

RequestOutput::Accepted RequestOutput::accept(TokenId token, double now_ms) {
  Accepted a;
  if (ends_generation(token)) {
    a.ends = true;
    return a;
  }
  // Sampled tokens passed the grammar stage; a forced one (reasoning budget) may not.
  if (grammar_ && !grammar_->accept(token)) {
    a.ends = true;
    a.off_format = true;
    return a;
  }
  const std::string piece = decoder_->push(token);
  if (budget_) budget_->observe(token, piece);
  StopMatch m = stop_->feed(piece);
  a.emitted = true;
  a.ends = m.stopped;
  a.text = std::move(m.text);
  text_ += a.text;
  stamp(now_ms);
  return a;
}

std::string RequestOutput::accept_given(TokenId token, double now_ms) {
  if (grammar_) grammar_->accept(token);  // a user's pick may leave the format; the next mask says so
  std::string piece = decoder_->push(token);
  text_ += piece;
  stamp(now_ms);
  return piece;
}

void RequestOutput::finish(FinishReason reason) {
  text_ += stop_->flush();
  if (reason != FinishReason::Stop) text_ += decoder_->flush();
}

std::span<const TokenId> RequestOutput::forced_next() const {
  return budget_ ? budget_->forced_next() : std::span<const TokenId>{};
}

bool StepOutputs::add_token(RequestOutput& output, TokenSampledEvent ev, double now_ms, double forward_ms,
                       double sample_start_ms) {
  ev.index = output.num_generated();
  RequestOutput::Accepted a = output.accept(ev.token, now_ms);
  if (a.off_format) dead_ends.push_back(ev.request);
  if (!a.emitted) return a.ends;
  ev.text = std::move(a.text);
  ev.record.forward_ms = forward_ms;
  ev.record.sample_ms = now_ms - sample_start_ms;
  tokens.push_back(std::move(ev));
  return a.ends;
}

void StepOutputs::fail(RequestId id, TokenId eos, const std::string& message) {
  failed.push_back(id);
  errors.push_back(ErrorEvent{id, "request " + std::to_string(id.value) + ": " + message});
  sampled.push_back({id, eos, true});
}

void StepOutputs::dead_end(RequestId id, TokenId eos) {
  dead_ends.push_back(id);
  sampled.push_back({id, eos, true});
}

bool StepOutputs::is_dead_end(RequestId id) const {
  return std::find(dead_ends.begin(), dead_ends.end(), id) != dead_ends.end();
}

bool StepOutputs::has_failed(RequestId id) const {
  return std::find(failed.begin(), failed.end(), id) != failed.end();
}

}  // namespace gb
