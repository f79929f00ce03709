// ReasoningBudget: caps how many tokens a model may spend between a thinking
// open marker ("<think>") and its close marker ("</think>"). When the cap is
// reached inside a thinking region, it tells the caller to append the close
// marker's token ids instead of sampling, one by one, until they are all out.
//
// The sampler works on ids and the markers are text, so the caller does the
// tokenizing: it passes the close marker's ids (e.g. tokenizer.encode("</think>"))
// once, and reports every appended token with its decoded text.
//
// Per generated token the caller does:
//   auto forced = budget.forced_next();
//   TokenId id = forced.empty() ? chain.sample(...).id : forced.front();
//   budget.observe(id, decoder.push(id));
// Counting: the tokens AFTER the one that completes the open marker count
// against max_tokens; with max_tokens = 0 the close marker is forced right after
// the open marker. A new open marker after a close starts a new region with a
// fresh count. max_tokens = -1 never forces anything.
// Threads: one per request; not thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "sampling/sampler_settings.h"

namespace gb {

class ReasoningBudget {
 public:
  ReasoningBudget(ReasoningBudgetSettings settings, std::vector<TokenId> close_marker_ids);

  // Reports one token appended to the output (sampled or forced) and its text.
  void observe(TokenId id, std::string_view decoded_piece);

  // The ids to append next instead of sampling (the rest of the close marker);
  // empty when the model may sample freely.
  std::span<const TokenId> forced_next() const;

  bool in_reasoning() const { return inside_; }
  int num_reasoning_tokens() const { return num_tokens_; }

  // Stateless form for callers that keep their own count: the close ids when
  // `text_so_far` has an open marker not followed by a close marker and
  // num_tokens_since_open >= max_tokens; else empty.
  std::vector<TokenId> forced_for(std::string_view text_so_far, int num_tokens_since_open) const;

 private:
  ReasoningBudgetSettings settings_;
  std::vector<TokenId> close_ids_;
  std::string tail_;         // recent text, enough to find a marker split across pieces
  bool inside_ = false;      // between an open marker and its close
  int num_tokens_ = 0;       // tokens observed inside the current region
  size_t num_forced_ = 0;    // close ids already appended while forcing
};

}  // namespace gb
