// Inside the model (docs/inside.md): for one position of a token sequence, the
// attention weights of every query head over the positions its layer sees,
// the logit lens of every layer (its output residual through the model's own
// epilogue) and a few signals of the residual stream. Engine::inspect makes
// an InsideReport; inside_to_json writes it (schema glassbox-inside-v1).
//
// Plain data; the math that turns captured rows into a report
// (inside_attention_rows, make_inside_layers) is here so tests can run it on
// rows of their own.
#pragma once

#include <cmath>
#include <limits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/ids.h"
#include "core/result.h"
#include "model/model_config.h"

namespace gb {

class Tokenizer;

struct InsideOptions {
  int32_t first_layer = 0;   // the layers reported: first_layer .. last_layer
  int32_t last_layer = -1;   // -1: the last one
  int32_t top_k = 5;         // lens and final top-k (1 .. 100)
  bool attention = true;     // the attention rows (the bulk of a report)
  bool lens = true;          // the logit lens (one epilogue row per layer)
  bool residuals = false;    // the raw residual vectors (tests against references)
};
// "a-b", "a" or "" (all): first/last layer; an error names the text.
Status parse_inside_layers(const std::string& text, InsideOptions& options);

struct InsideTop {
  TokenId id = 0;
  double prob = 0.0;
};

struct InsideLayer {
  int32_t layer = 0;
  int32_t window = 0;           // > 0: the layer slides over this many positions
  int32_t first_position = 0;   // the first position the attention rows cover
  // (num_heads) rows over first_position .. position; each sums to 1.
  std::vector<std::vector<float>> attention;
  std::vector<double> head_entropy;    // nats
  std::vector<double> head_sink_mass;  // weight on position 0 (0 when outside the window)
  double residual_norm = 0.0, attention_norm = 0.0, mlp_norm = 0.0, cosine_to_previous = 0.0;
  std::vector<InsideTop> lens_top;     // empty without the lens
  int32_t target_rank = -1;            // 0 = the lens' top choice; -1 without the lens
  double target_prob = 0.0;
  std::vector<float> residual_in, residual_out;  // (dim) with InsideOptions::residuals
  // A mixture of experts: the experts the position went to, best first, and
  // their weights (renormalized to sum 1); empty for a dense layer.
  std::vector<int32_t> experts;
  std::vector<float> expert_weights;
};

struct InsideReport {
  std::string architecture;
  int32_t num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, dim = 0;
  int32_t position = 0;
  std::vector<TokenId> context;   // tokens 0 .. position
  TokenId target = 0;             // what the lens ranks
  bool target_is_next = false;    // true: the sequence's token at position + 1; false: the model's argmax
  std::vector<InsideTop> final_top;
  std::vector<float> logits;      // (vocab) the model's logits at the position
  int32_t reused_tokens = 0, recomputed_tokens = 0;
  std::string k_type, v_type;
  double prefill_ms = 0.0, capture_ms = 0.0, lens_ms = 0.0, total_ms = 0.0;
  std::string lens_error;         // non-empty: the backend could not run the lens (why)
  std::vector<InsideLayer> layers;
};

// Softmax weights of each query head over positions first .. position, from
// the captured query (num_heads x head_dim) and each position's cached key
// (key(p) returns num_kv_heads x head_dim floats), as the attention step
// scores them: q . k x scale (0: 1/sqrt(head_dim)), soft-capped when softcap > 0.
// sinks (num_heads, or null): gpt-oss's per-head sink logits, which join each
// head's softmax with no position, so that head's weights sum to less than 1.
template <typename KeyOf>
std::vector<std::vector<float>> inside_attention_rows(const ModelConfig& c, const float* query, int32_t first,
                                                      int32_t position, float scale, float softcap, KeyOf&& key,
                                                      const float* sinks = nullptr);

// Top-k of a logits row as probabilities (softmax in double); ties: lower id first.
std::vector<InsideTop> inside_top_k(const float* logits, int32_t vocab, int32_t k);
// Rank (0 = top) and probability of `id` in a logits row whose top choice
// (inside_top_k's first entry) is `best`: the probability comes from best's,
// p(id) = p(best) exp(logit(id) - logit(best)), without a second pass for the
// softmax's normaliser.
std::pair<int32_t, double> inside_rank(const float* logits, int32_t vocab, TokenId id, const InsideTop& best);

struct InsideJsonOptions {
  bool context = true;  // the context tokens with their text
};
std::string inside_to_json(const InsideReport& report, const Tokenizer& tok, const InsideJsonOptions& o = {});

// ---- implementation of the template ----

// sink: a logit in the normaliser with no entry of its own (-infinity: none).
std::vector<float> inside_softmax_row(std::vector<double>& scores,
                                      double sink = -std::numeric_limits<double>::infinity());

template <typename KeyOf>
std::vector<std::vector<float>> inside_attention_rows(const ModelConfig& c, const float* query, int32_t first,
                                                      int32_t position, float scale, float softcap, KeyOf&& key,
                                                      const float* sinks) {
  const int32_t group = c.num_heads / c.num_kv_heads;
  const double s = scale > 0.0f ? scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  std::vector<std::vector<double>> scores(static_cast<size_t>(c.num_heads));
  for (int32_t p = first; p <= position; ++p) {
    const float* k = key(p);
    for (int32_t h = 0; h < c.num_heads; ++h) {
      const float* q = query + static_cast<size_t>(h) * static_cast<size_t>(c.head_dim);
      const float* kh = k + static_cast<size_t>(h / group) * static_cast<size_t>(c.head_dim);
      double dot = 0.0;
      for (int32_t d = 0; d < c.head_dim; ++d) dot += static_cast<double>(q[d]) * static_cast<double>(kh[d]);
      double v = dot * s;
      if (softcap > 0.0f) v = softcap * std::tanh(v / softcap);
      scores[static_cast<size_t>(h)].push_back(v);
    }
  }
  std::vector<std::vector<float>> rows;
  for (size_t h = 0; h < scores.size(); ++h)
    rows.push_back(sinks != nullptr ? inside_softmax_row(scores[h], sinks[h]) : inside_softmax_row(scores[h]));
  return rows;
}

}  // namespace gb
