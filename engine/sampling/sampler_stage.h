// SamplerStage: the names of the stages a SamplerChain can run, their string
// spellings (presets, traces, the CLI's --samplers option) and the default order.
//
// Invariants: every stage has exactly one canonical name; parse_sampler_order
// accepts canonical names (and a few common aliases), rejects unknown names and
// duplicates with a message naming the offending entry.
// Threads: pure functions, any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gb {

enum class SamplerStage {
  Penalties,    // repetition (CTRL), presence and frequency penalties over penalty_last_n
  Dry,          // "Don't Repeat Yourself" sequence penalty (p-e-w)
  LogitBias,    // per-token additive bias; -inf bans a token
  TopK,         // keep the k highest logits
  TypicalP,     // locally typical sampling (Meister et al. 2022)
  TopP,         // nucleus sampling (Holtzman et al. 2019)
  MinP,         // keep p >= min_p * p_max
  Xtc,          // "Exclude Top Choices" (p-e-w)
  Temperature,  // divide logits by T; T = 0 keeps only the argmax (greedy)
  Grammar,      // keep the tokens the request's format (grammar, JSON Schema, regex) allows
};

inline constexpr int kNumSamplerStages = 10;

// Canonical name: "penalties", "dry", "logit_bias", "top_k", "typical_p", "top_p",
// "min_p", "xtc", "temperature", "grammar".
std::string_view sampler_stage_name(SamplerStage stage);

// Parses one name. Aliases accepted: "typical" (typical_p), "temp" (temperature),
// "bias" (logit_bias), "repetition"/"penalty" (penalties), "topk", "topp", "minp".
Result<SamplerStage> parse_sampler_stage(std::string_view name);

// Parses a comma-separated order such as
// "penalties,dry,top_k,typical_p,top_p,min_p,xtc,temperature". Spaces around names
// are ignored; an empty string gives an empty order (plain softmax sampling).
// Duplicates are an error because the per-token record names each stage once.
Result<std::vector<SamplerStage>> parse_sampler_order(std::string_view text);

// Inverse of parse_sampler_order: canonical names joined by ",".
std::string format_sampler_order(std::span<const SamplerStage> order);

// penalties -> dry -> logit_bias -> top_k -> typical_p -> top_p -> min_p -> xtc ->
// temperature: penalties act on raw logits, truncation sees temperature-1
// probabilities, and temperature only reshapes what survived (llama.cpp's and
// text-generation-webui's usual priority). The grammar stage is not in it: a
// chain whose settings carry a format puts it first unless the order names it
// (SamplerChain's constructor), so a request without a format records no
// grammar column.
std::vector<SamplerStage> default_sampler_order();

}  // namespace gb
