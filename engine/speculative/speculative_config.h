// SpeculativeConfig: how one request drafts and verifies (see docs/speculative.md).
// A request with no SpeculativeConfig decodes plainly, one target forward per token.
//
// Three drafters:
//   ngram  prompt lookup: match the last n tokens against the prompt and the text
//          so far, propose the k tokens that followed the most recent match;
//   draft  another model file sharing the target's vocabulary, with its own
//          backend and KV pool;
//   self   the target's own first `self_layers` layers plus its final norm and
//          classifier (layer skipping; no extra file).
//
// Text form (parse_speculative_spec, the CLI's --speculative):
//   ngram[:n=N,k=K]   draft:PATH[:k=K]   self:LAYERS[:k=K]
// Extra keys accepted by every form: k_min=, k_max= (bounds of the adaptive K),
// fallback=timing|accept|off (see timing_fallback / adaptive below).
// A draft PATH containing ':' is allowed; the options part is the text after
// the last ':' only when it parses as key=value pairs.
//
// Plain value; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gb {

class DraftProposer;

enum class DrafterKind : uint8_t {
  Ngram,
  DraftModel,
  SelfDraft,
  Custom,  // tests and tools: SpeculativeConfig::make_custom builds the proposer
};
const char* drafter_kind_name(DrafterKind kind);  // "ngram", "draft", "self", "custom"

struct SpeculativeConfig {
  DrafterKind kind = DrafterKind::Ngram;
  int32_t k = 4;            // draft length to start with
  int32_t k_min = 1;        // adaptive K stays within [k_min, k_max]
  int32_t k_max = 8;
  int32_t ngram_n = 3;      // ngram: longest suffix tried (then n-1 ... 1)
  std::string draft_path;   // draft: model file (its tokenizer is found as for the target)
  std::string draft_tokenizer_path;  // draft: explicit tokenizer file ("" = find it)
  int32_t self_layers = 0;  // self: layers the draft runs (1 .. target layers - 1)
  // Fall back to plain decoding when speculation does not pay. With
  // timing_fallback the decision compares measured milliseconds per emitted
  // token (speculative vs plain); without it only the acceptance decides, so
  // seeded sampled runs repeat exactly (timings never change the tokens).
  bool adaptive = true;
  bool timing_fallback = true;
  // Custom drafter (kind == Custom): called once per request.
  std::function<std::unique_ptr<DraftProposer>()> make_custom;
  std::string custom_name = "custom";
};

// Parses `ngram[:n=N,k=K] | draft:PATH[:k=K] | self:LAYERS[:k=K]`; the error
// names the offending part. Bounds that need the model (self layers below the
// target's layer count) are checked when the request is submitted.
Result<SpeculativeConfig> parse_speculative_spec(std::string_view spec);

// A short description for logs and the CLI, e.g. "ngram n=3 k=4 [1,8]".
std::string describe(const SpeculativeConfig& config);

}  // namespace gb
