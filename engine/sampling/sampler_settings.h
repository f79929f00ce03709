// SamplerSettings: everything one request asks of token selection and of when
// generation stops — the stage parameters a SamplerChain runs, the chain order,
// the seed, stop strings / stop token ids, max tokens and the reasoning budget.
// Plain data: presets and traces carry it as JSON (sampler_settings_json.h).
//
// Conventions (shared with llama.cpp / text-generation-webui where they exist):
//   * a stage whose parameter has its "off" value is a no-op even if it is in
//     `order`: top_k = 0, top_p = 1, min_p = 0, typical_p = 1, repeat_penalty = 1
//     with presence = frequency = 0, dry.multiplier = 0, xtc.probability = 0;
//   * temperature = 0 means greedy (the Temperature stage keeps only the argmax);
//   * penalty windows: -1 = the whole history, 0 = no tokens (stage off),
//     n > 0 = the last n tokens of the history.
// Invariant: settings that passed validate() never make SamplerChain fail; only
// the per-token inputs (logits, history, vocabulary size) can.
// Threads: plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/ids.h"
#include "core/result.h"
#include "sampling/sampler_stage.h"

namespace gb {

// DRY, "Don't Repeat Yourself", as defined by its author p-e-w in
// text-generation-webui PR #5677 (github.com/oobabooga/text-generation-webui/pull/5677):
// if the context ends with a token sequence S that already occurred earlier
// followed by token t, then generating t would extend a repetition of length
// n = |S|. For n >= allowed_length, t's logit is lowered by
//   multiplier * base ^ (n - allowed_length).
// Matches never extend across a sequence-breaker token, and a breaker is never
// itself penalized. Only the last penalty_last_n tokens of the history are searched.
struct DrySettings {
  float multiplier = 0.0f;  // 0 = off; text-generation-webui suggests 0.8
  float base = 1.75f;       // >= 1
  int allowed_length = 2;   // repetitions shorter than this are free; >= 1
  int penalty_last_n = -1;  // -1 = whole history, 0 = off
  // Breakers as text, for presets and display ("\n", ":", "\"", "*" by default).
  std::vector<std::string> sequence_breakers = {"\n", ":", "\"", "*"};
  // The same breakers as token ids; the sampler only sees ids, so the caller fills
  // these with its tokenizer (e.g. the last id of encoding each breaker string).
  std::vector<TokenId> sequence_breaker_ids;
};

// XTC, "Exclude Top Choices", as defined by p-e-w in text-generation-webui PR #6335
// (github.com/oobabooga/text-generation-webui/pull/6335): with chance `probability`
// per token, every candidate whose probability is >= threshold is removed except
// the least probable of them; nothing happens when fewer than two reach the
// threshold. text-generation-webui exempts newline and EOS from removal (if one of
// them would be removed, XTC skips that token); callers list such ids in protected_ids.
struct XtcSettings {
  float threshold = 0.1f;    // in [0, 1]
  float probability = 0.0f;  // in [0, 1]; 0 = off
  std::vector<TokenId> protected_ids;
};

// A cap on the tokens generated between an open and a close thinking marker; see
// ReasoningBudget (reasoning_budget.h), which forces the close marker.
struct ReasoningBudgetSettings {
  int max_tokens = -1;  // -1 = unlimited; 0 closes immediately after the open marker
  std::string open_marker = "<think>";
  std::string close_marker = "</think>";
  // The prompt already opened a thinking region (chat templates such as
  // DeepSeek-R1's end the generation prompt with "<think>\n"): count from the
  // first generated token. Set per request by runtime/chat_request.h.
  bool starts_inside = false;
};

// A format the output must follow (engine/grammar; compiled by the runtime,
// runtime/grammar_constraint.h). `text` is the GBNF grammar, the JSON Schema
// (JSON text) or the regular expression; unused for None and Json.
enum class FormatKind : uint8_t { None, Json, JsonSchema, Gbnf, Regex };
struct FormatSettings {
  FormatKind kind = FormatKind::None;
  std::string text;
  bool operator==(const FormatSettings&) const = default;
};
// "none", "json", "json_schema", "gbnf", "regex".
std::string_view format_kind_name(FormatKind kind);
Result<FormatKind> parse_format_kind(std::string_view name);

struct SamplerSettings {
  float temperature = 1.0f;  // >= 0; 0 = greedy
  int top_k = 40;            // >= 0; 0 = off
  float top_p = 0.95f;       // (0, 1]; 1 = off
  float min_p = 0.05f;       // [0, 1]; 0 = off
  float typical_p = 1.0f;    // (0, 1]; 1 = off

  float repeat_penalty = 1.0f;     // > 0; 1 = off (CTRL: logit/p if > 0, logit*p otherwise)
  float presence_penalty = 0.0f;   // subtracted once from every token present in the window
  float frequency_penalty = 0.0f;  // subtracted once per occurrence in the window
  int penalty_last_n = 64;         // window of the three penalties; -1 = whole history

  // (token id, additive bias); -infinity bans the token. A token may appear more
  // than once: the biases add up.
  std::vector<std::pair<TokenId, float>> logit_bias;

  DrySettings dry;
  XtcSettings xtc;
  std::vector<SamplerStage> order = default_sampler_order();

  uint64_t seed = 0;  // one SamplerRng stream per request is seeded with this
  int top_n_record = 20;  // candidates per TokenRecord (0 = record none)

  // Stopping (applied by the caller, not by SamplerChain).
  std::vector<std::string> stop_strings;  // matched on decoded text; see StopStringMatcher
  std::vector<TokenId> stop_token_ids;    // e.g. EOS; the stop token itself is not emitted
  int max_tokens = 256;                   // >= 0 generated tokens per request
  ReasoningBudgetSettings reasoning;
  FormatSettings format;  // the grammar stage's constraint (None: no grammar stage)

  bool is_greedy() const { return temperature == 0.0f; }
  bool is_stop_token(TokenId id) const;
};

// Checks every field up front; the message names the field and the bad value,
// e.g. "sampler settings: top_p = 0 must be in (0, 1]". Does not know the
// vocabulary size: ids beyond it are reported by SamplerChain::sample.
Status validate(const SamplerSettings& settings);

}  // namespace gb
