// Generator: one sequence, start to finish, on one backend — the simplest path
// from prompt to tokens (the CLI's `generate`, the golden tests, benchmarks).
// It allocates KV blocks in order through a block table (the same paged layout the
// scheduler uses), prefills the prompt in one forward pass, then decodes one
// token per step. Requests that share a batch go through the Engine instead.
//
// Thread-safety: a Generator belongs to one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/ids.h"
#include "core/result.h"
#include "kv/request.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace gb {

struct LogitCandidate {
  TokenId id = 0;
  float logit = 0.0f;
  float logprob = 0.0f;  // log softmax of the raw logits
};

// What the generator reports for each generated token.
struct GeneratedToken {
  TokenId id = 0;
  int32_t position = 0;          // position whose logits chose this token
  float logprob = 0.0f;          // log probability of `id` under the raw logits
  std::string text;              // complete UTF-8 text this token made available
  std::vector<LogitCandidate> top;    // top-N by logit, descending
  double step_ms = 0.0;          // forward + sampling time that produced this token
};

struct GenerateOptions {
  int32_t max_tokens = 256;   // tokens to generate at most
  float temperature = 0.0f;   // 0 = greedy (argmax)
  uint64_t seed = 0;
  int32_t top_n = 10;         // candidates reported per token
  int32_t block_size = 16;
  bool stop_on_eos = true;    // stop when the model emits EOS (or BOS, as llama2.c does)
};


struct GenerateStats {
  FinishReason reason = FinishReason::MaxTokens;
  int32_t num_prompt_tokens = 0;
  int32_t num_generated = 0;
  double ttft_ms = 0.0;        // start to first token (prefill + first sample)
  double tpot_ms = 0.0;        // mean time per output token after the first
  double tokens_per_s = 0.0;   // generated tokens / decode time
  double prefill_ms = 0.0;
  std::string trailing_text;   // bytes the streaming decoder still held at the end
};

class Generator {
 public:
  Generator(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer, Backend& backend,
            int32_t context_length);

  // Runs prompt_ids (BOS included if wanted) and generates. on_token returns
  // false to cancel. Errors: prompt longer than the context, backend failures.
  Result<GenerateStats> generate(std::span<const TokenId> prompt_ids, const GenerateOptions& options,
                                 const std::function<bool(const GeneratedToken&)>& on_token);

 private:
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  Backend& backend_;
  int32_t context_length_;
};

// Top-n candidates of one logits row (partial selection, no full sort) with
// log-softmax values.                                    logits: (vocab_size)
std::vector<LogitCandidate> top_candidates(std::span<const float> logits, int32_t n);

}  // namespace gb
