// Text scoring by teacher forcing: one prefill over a given token sequence with
// logits at every position, so each token gets the log-probability, rank and
// entropy the model gave it, its top alternatives, and the text's perplexity.
// With a second (base) model over the same tokens, each position also gets
// KL(base || model) of the two next-token distributions and whether their
// argmax agree -- the numbers llama.cpp's perplexity tool reports with
// --kl-divergence (docs/compare.md, "Scoring").
//
// Position k (1 <= k < n) scores token k from the logits after tokens 0..k-1;
// token 0 (normally BOS) is context only. The prefill runs in chunks of
// `chunk` tokens through the KV cache, so memory is chunk x vocab logits.
//
// Thread: the caller's; it owns the backends for the duration of the call
// (their KV pools are re-initialised).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/ids.h"
#include "core/result.h"
#include "sampling/token_record.h"

namespace gb {

struct Model;
class Tokenizer;

struct TokenScore {
  int32_t position = 0;      // index in the scored sequence (>= 1)
  TokenId id = 0;
  double logprob = 0.0;      // natural log
  int32_t rank = 0;          // 0 = the model's top choice (ties: lower id first)
  double entropy = 0.0;      // nats, the model's next-token distribution at this position
  std::vector<std::pair<TokenId, double>> top;  // (top_n) id and logprob, best first
  // With a base model:
  std::optional<double> kl;          // KL(base || model), nats
  std::optional<bool> top1_agree;    // argmax of base == argmax of model
  std::optional<double> base_logprob;
  // A mixture of experts: the routing of the pass that scored the token (over
  // position - 1), per layer, best first (TokenRecord's form).
  std::optional<RoutingRecord> routing;
};

struct KlSummary {
  double mean = 0.0;
  double p50 = 0.0, p90 = 0.0, p95 = 0.0, p99 = 0.0, max = 0.0;
  double min = 0.0, p01 = 0.0, p05 = 0.0, p10 = 0.0, p999 = 0.0;  // the rest of llama-perplexity's table
  double top1_agreement = 0.0;  // fraction of positions whose argmax agree
};

struct TextScore {
  std::vector<TokenId> token_ids;  // (n) the whole sequence, token 0 included
  std::vector<TokenScore> tokens;  // (n - 1) positions 1 .. n-1
  double mean_logprob = 0.0;
  double perplexity = 0.0;         // exp(-mean_logprob)
  std::optional<KlSummary> kl;     // with a base model
};

struct ScoreOptions {
  int32_t top_n = 10;
  int32_t chunk = 64;       // tokens per forward pass
  int32_t block_size = 16;
  // The KV types of the model's and the base's pools (the CLI's --kv-type-k/-v
  // and --base-kv-type-k/-v): quantized KV against an F32 base measures what
  // the KV type costs.
  WeightType k_type = WeightType::F32, v_type = WeightType::F32;
  WeightType base_k_type = WeightType::F32, base_v_type = WeightType::F32;
};

// The model (and optional base) run over `tokens` (>= 2, within both models'
// context). Errors: too few / too many tokens, ids outside the vocabulary,
// vocabularies of different sizes, a failed forward pass.
Result<TextScore> score_tokens(const Model& model, Backend& backend, const Model* base, Backend* base_backend,
                               std::span<const TokenId> tokens, const ScoreOptions& options = {});

// Scores the tokens the way llama.cpp's perplexity tool does (so the two can
// be compared on the same tokens): consecutive windows of `window` tokens (a
// trailing partial window is left out), each window's first token replaced by
// `bos_id`, each window run from an empty cache, and only the second half of
// each window counted -- tokens window/2 + 1 .. window - 1, each predicted
// from at least window/2 tokens of context. TokenScore::position is the index in
// `tokens`; token_ids holds the scored sequence as given. Errors as
// score_tokens, and a window < 4 or longer than the text.
Result<TextScore> score_tokens_in_windows(const Model& model, Backend& backend, const Model* base,
                                          Backend* base_backend, std::span<const TokenId> tokens, int32_t window,
                                          TokenId bos_id, const ScoreOptions& options = {});

// log-softmax of one logits row, in double: (vocab) log-probabilities.
void log_softmax(std::span<const float> logits, std::vector<double>& out);
// Scores one position from the model's (and the base's) log-probabilities.
TokenScore score_position(int32_t position, TokenId id, std::span<const double> lp,
                          const std::vector<double>* base_lp, int32_t top_n);

// Fills mean_logprob, perplexity and (when the tokens have KL) the KL summary
// from score.tokens.
void summarize_scores(TextScore& score);

// Same vocabulary = same size, and every token decodes to the same bytes with
// the same kind (control, byte fallback), and the same BOS/EOS (the check the
// speculative drafter uses). The message names both files and the first token
// that differs.
Status check_comparable_vocabularies(const Tokenizer& a, const std::string& a_name, const Tokenizer& b,
                                     const std::string& b_name);

// Linear interpolation between closest ranks; q in [0, 1]; 0 for an empty list.
double percentile(std::vector<double> values, double q);

}  // namespace gb
