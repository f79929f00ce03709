// Shared by the architecture reference tests: run a prompt greedily through the
// Engine on the CPU backend, recording each step's top-20 (id, logit), and compare
// a step with a reference's top_ids / top_logits.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace archref {

using nlohmann::json;

inline constexpr double kLogitTolerance = 1e-3;

struct Step {
  gb::TokenId token;
  std::vector<std::pair<gb::TokenId, float>> top;  // (id, raw logit), best first
  std::optional<gb::RoutingRecord> routing;        // a mixture of experts: the step's routing
};

// The engine the references run through: the CPU backend, float32 K/V
// (transformers' arithmetic), a 256-token context, invariants swept.
inline std::unique_ptr<gb::Engine> make_ref_engine(const std::shared_ptr<const gb::Model>& model,
                                                   const std::shared_ptr<const gb::Tokenizer>& tokenizer,
                                                   int32_t max_seqs = 1, int32_t threads = 0) {
  gb::EngineConfig config;
  config.kv_types = {gb::WeightType::F32, gb::WeightType::F32};
  config.max_seqs = max_seqs;
  config.max_context = 256;
  config.check_invariants = true;
  return std::make_unique<gb::Engine>(model, tokenizer, gb::make_cpu_backend(model, {.num_threads = threads}), config);
}

inline std::vector<Step> run_greedy(const std::shared_ptr<const gb::Model>& model,
                             const std::shared_ptr<const gb::Tokenizer>& tokenizer,
                             const std::vector<gb::TokenId>& prompt, int max_tokens, std::string& error, int32_t top_n = 20) {
  const std::unique_ptr<gb::Engine> made = make_ref_engine(model, tokenizer);
  gb::Engine& engine = *made;
  std::vector<Step> steps;
  if (auto st = engine.start(); !st) {
    error = st.error().message;
    return steps;
  }
  gb::GenerationRequest request;
  request.prompt_ids = prompt;
  request.sampling.temperature = 0.0f;
  request.sampling.max_tokens = max_tokens;
  request.sampling.top_n_record = top_n;
  request.ignore_eos = true;
  if (auto id = engine.submit(request); !id) {
    error = id.error().message;
    return steps;
  }
  if (auto st = engine.run_until_idle(); !st) error = st.error().message;
  for (const gb::TraceEvent& e : engine.drain_events())
    if (const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body)) {
      Step s{t->token, {}, t->record.routing};
      for (const auto& c : t->record.top) s.top.emplace_back(c.id, c.logit);
      steps.push_back(std::move(s));
    }
  return steps;
}

// Every reference top-20 id must be among ours with a logit within tolerance
// (order may differ only between logits closer than the tolerance).
inline std::string compare_top(const std::vector<std::pair<gb::TokenId, float>>& ours, const json& ref) {
  const auto ids = ref["top_ids"].get<std::vector<gb::TokenId>>();
  const auto logits = ref["top_logits"].get<std::vector<double>>();
  double worst = 0.0;
  for (size_t k = 0; k < ids.size(); ++k) {
    const auto it = std::find_if(ours.begin(), ours.end(), [&](const auto& p) { return p.first == ids[k]; });
    if (it == ours.end()) {
      // A tail id may be replaced by one whose logit ties it within tolerance.
      if (k + 1 == ids.size() && !ours.empty() && std::abs(ours.back().second - logits[k]) <= kLogitTolerance) continue;
      return "reference top id " + std::to_string(ids[k]) + " missing from ours";
    }
    worst = std::max(worst, std::abs(static_cast<double>(it->second) - logits[k]));
  }
  if (worst > kLogitTolerance) return "top-20 logit off by " + std::to_string(worst);
  return {};
}

}  // namespace archref
