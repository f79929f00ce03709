// Output processing: what happens to a token after it was chosen (sampled,
// accepted from a draft, resampled, forced) -- the end-of-generation check,
// detokenizing, stop strings, the reasoning budget, the emitted text, counts
// and timings. Split from the engine's step loop after vLLM v1's
// OutputProcessor: the engine decides tokens, this unit turns them into text
// and events and says when a request ends.
//
//   RequestOutput  one request's output state; owns its StreamingDecoder,
//                  StopStringMatcher and ReasoningBudget.
//   StepOutputs    what one step produced: a StepToken per request that had
//                  logit rows (plan order, for Scheduler::on_step_done) and the
//                  token, speculative and error events the engine publishes
//                  after on_step_done (errors first, then speculative, then
//                  tokens: the order the trace has always had).
//
// Invariants: a request's text is the concatenation of its emitted tokens'
// texts plus what finish() releases; EOS, BOS and stop tokens are never
// emitted; nothing after a completed stop string is emitted.
//
// Thread: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/ids.h"
#include "kv/request.h"
#include "kv/scheduler.h"
#include "runtime/grammar_constraint.h"
#include "sampling/sampler_settings.h"
#include "tokenizer/tokenizer.h"
#include "trace/trace_event.h"

namespace gb {

class ReasoningBudget;
class StopStringMatcher;

class RequestOutput {
 public:
  // prompt: the tokens before the output (they prime the decoder so a leading
  // space comes out as decode() would give it). The stop strings, stop token
  // ids and reasoning budget come from `settings`.
  // grammar: the request's format state (null: no format); accept() advances it.
  RequestOutput(const Tokenizer& tokenizer, const SamplerSettings& settings, std::span<const TokenId> prompt,
                bool ignore_eos, std::unique_ptr<GrammarConstraint> grammar = nullptr);
  ~RequestOutput();
  RequestOutput(RequestOutput&&) noexcept;
  RequestOutput& operator=(RequestOutput&&) noexcept;

  struct Accepted {
    bool emitted = false;  // false: an end-of-generation token, not part of the output
    bool ends = false;     // the request ends with this token (EOS, stop token, stop string)
    bool off_format = false;  // the format forbids this token (a forced one): the request ends, not emitted
    std::string text;      // text released by this token (stop-string tails held back)
  };
  // One chosen token at time now_ms. EOS (unless ignore_eos), BOS and stop
  // token ids end the request and are not emitted. Any other token is decoded,
  // shown to the reasoning budget and the stop strings, counted and emitted.
  Accepted accept(TokenId token, double now_ms);
  // A branch's first token picked by the user (Engine::fork's forced_next):
  // decoded and counted, without stop checks. Returns its text.
  std::string accept_given(TokenId token, double now_ms);
  // The request finished in a step: the text the stop matcher held back joins
  // the output, and unless it stopped (reason Stop) so do the decoder's
  // pending bytes.
  void finish(FinishReason reason);

  // New settings from set_sampler_settings: only the stop token ids change;
  // stop strings and the reasoning budget keep their state.
  void set_stop_token_ids(std::vector<TokenId> ids) { stop_token_ids_ = std::move(ids); }
  // The reasoning budget's forced tokens (the rest of its close marker):
  // appended instead of sampling. Empty when sampling is free.
  std::span<const TokenId> forced_next() const;
  bool has_reasoning_budget() const { return budget_ != nullptr; }
  // The request's format state; null without a format.
  GrammarConstraint* grammar() { return grammar_.get(); }

  const std::string& text() const { return text_; }
  int32_t num_generated() const { return num_generated_; }
  double first_token_ms() const { return first_token_ms_; }  // -1: none yet
  double last_token_ms() const { return last_token_ms_; }

 private:
  bool ends_generation(TokenId token) const;
  void stamp(double now_ms);

  const Tokenizer* tokenizer_;
  std::vector<TokenId> stop_token_ids_;
  bool ignore_eos_ = false;
  std::unique_ptr<StreamingDecoder> decoder_;
  std::unique_ptr<StopStringMatcher> stop_;
  std::unique_ptr<ReasoningBudget> budget_;  // present when settings.reasoning.max_tokens >= 0
  std::unique_ptr<GrammarConstraint> grammar_;
  std::string text_;                         // emitted text so far
  int32_t num_generated_ = 0;
  double first_token_ms_ = -1.0;
  double last_token_ms_ = 0.0;
};

struct StepOutputs {
  std::vector<StepToken> sampled;                  // one per request with logit rows, plan order
  std::vector<TokenSampledEvent> tokens;           // emitted tokens, in emission order
  std::vector<SpeculativeEvent> speculative;       // one per verification
  std::vector<KvShadowEvent> shadow;               // a full-cache shadow reached a token of its request
  std::vector<ErrorEvent> errors;                  // sampling or verification failures
  std::vector<RequestId> failed;                   // their requests (finished as "error")
  std::vector<RequestId> dead_ends;                // the format allowed no token ("grammar_dead_end")

  // Emits one chosen token: `output` accepts it; an emitted token's event gets
  // its text, index and timings (forward_ms, sample time since sample_start_ms)
  // and is kept. True when the token ends the request.
  bool add_token(RequestOutput& output, TokenSampledEvent ev, double now_ms, double forward_ms, double sample_start_ms);
  // Sampling for `id` failed: an error event, and the request stops with EOS.
  void fail(RequestId id, TokenId eos, const std::string& message);
  bool has_failed(RequestId id) const;
  // The request's format allows no next token: it ends (with EOS as the step's token).
  void dead_end(RequestId id, TokenId eos);
  bool is_dead_end(RequestId id) const;
};

}  // namespace gb
