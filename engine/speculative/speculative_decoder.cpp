#include "speculative/speculative_decoder.h"

#include <algorithm>
#include <chrono>

#include "sampling/sampler_chain.h"
#include "speculative/draft_model.h"
#include "speculative/ngram_proposer.h"
#include "speculative/self_draft_proposer.h"

namespace gb {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
// The speculative stream's seed: unrelated to the request's own stream.
constexpr uint64_t kSpecSeedSalt = 0xD1B54A32D192ED03ULL;
}  // namespace

int32_t self_draft_scratch_blocks(int32_t k_max, int32_t block_size) {
  // Positions N-1 .. N+k-2 may start anywhere in a block: one partial block
  // plus enough whole blocks for the rest.
  return 1 + (k_max + block_size - 1) / block_size;
}

struct SpeculativeDecoder::PerRequest {
  SpeculativeConfig config;
  std::unique_ptr<DraftProposer> proposer;
  std::unique_ptr<SamplerChain> draft_chain;  // the request's settings, the drafter's own scratch
  bool greedy = true;
  SamplerRng spec_rng;
  AdaptiveK adaptive{4, 1, 8, true, true};
  SpeculativeStats stats;
  Draft pending;          // the last proposal, verified after the forward pass
  double pending_draft_ms = 0.0;
  // Self-draft: lookahead blocks borrowed from the pool's reserve at the first
  // draft and held until the request finishes (more requests than the reserve
  // serves: the rest decode plainly until some finish).
  SelfDraftProposer* self_draft = nullptr;
  int32_t num_scratch_needed = 0;
  std::vector<int32_t> scratch;
  std::vector<int32_t> window_scratch;  // as many in the window group's pool, when there is one
};

SpeculativeDecoder::SpeculativeDecoder(std::shared_ptr<const Model> target, std::shared_ptr<const Tokenizer> tokenizer,
                                       Backend& target_backend, KvCacheManager& kv, const SpeculativeLimits& limits,
                                       KvCacheManager* window_kv)
    : target_(std::move(target)),
      tokenizer_(std::move(tokenizer)),
      backend_(target_backend),
      kv_(kv),
      window_kv_(window_kv),
      limits_(limits) {}

SpeculativeDecoder::~SpeculativeDecoder() = default;

Result<std::shared_ptr<DraftModel>> SpeculativeDecoder::draft_model(const SpeculativeConfig& config) {
  if (auto it = draft_models_.find(config.draft_path); it != draft_models_.end()) return it->second;
  const int32_t bs = limits_.block_size;
  const int32_t per_request = (limits_.max_context + 64 + bs - 1) / bs;  // + room for a draft past the end
  auto dm = DraftModel::load(config.draft_path, config.draft_tokenizer_path, *tokenizer_, target_->path,
                             limits_.max_context + 64, per_request * std::max(1, limits_.max_seqs), bs);
  if (!dm) return dm.error();
  draft_models_.emplace(config.draft_path, *dm);
  return *dm;
}

std::vector<int32_t> SpeculativeDecoder::take_scratch(RequestId id, int32_t n) {
  std::vector<int32_t> out;
  const std::optional<std::vector<BlockId>> blocks = kv_.allocate_lookahead(id, n);
  if (!blocks) return out;
  for (BlockId b : *blocks) out.push_back(b.value);
  return out;
}

Status SpeculativeDecoder::add_request(RequestId id, const SpeculativeConfig& config, const SamplerSettings& settings) {
  GB_CHECK_MSG(!requests_.contains(id), "SpeculativeDecoder::add_request: request already added");
  if (config.k_min < 1 || config.k_max < config.k_min || config.k < config.k_min || config.k > config.k_max)
    return make_error("speculative: need 1 <= k_min <= k <= k_max, got k=" + std::to_string(config.k) + " k_min=" +
                      std::to_string(config.k_min) + " k_max=" + std::to_string(config.k_max));
  auto pr = std::make_unique<PerRequest>();
  pr->config = config;
  switch (config.kind) {
    case DrafterKind::Ngram:
      if (config.ngram_n < 1) return make_error("speculative: ngram n must be at least 1");
      pr->proposer = std::make_unique<NgramProposer>(config.ngram_n);
      break;
    case DrafterKind::DraftModel: {
      auto dm = draft_model(config);
      if (!dm) return dm.error();
      pr->proposer = std::make_unique<DraftModelProposer>(*dm);
      break;
    }
    case DrafterKind::SelfDraft: {
      const int32_t num_layers = target_->config.num_layers;
      if (config.self_layers < 1 || config.self_layers >= num_layers)
        return make_error("speculative: self-draft layers must be in 1.." + std::to_string(num_layers - 1) + " for " +
                          target_->path + " (" + std::to_string(num_layers) + " layers), got " +
                          std::to_string(config.self_layers));
      // Scratch blocks are lent per drafting step while the request runs (see
      // propose()); here only check that the engine has any to lend.
      const int32_t need = self_draft_scratch_blocks(config.k_max, limits_.block_size);
      if (kv_.num_lookahead_blocks() < need)
        return make_error("speculative: self-draft needs EngineConfig::num_scratch_blocks >= " + std::to_string(need) +
                          " (self_draft_scratch_blocks(k_max, block_size)), the engine has " +
                          std::to_string(kv_.num_lookahead_blocks()));
      pr->proposer = std::make_unique<SelfDraftProposer>(backend_, config.self_layers, target_->config.vocab_size,
                                                         std::vector<int32_t>{});
      pr->self_draft = static_cast<SelfDraftProposer*>(pr->proposer.get());
      pr->num_scratch_needed = need;
      break;
    }
    case DrafterKind::Custom:
      if (!config.make_custom) return make_error("speculative: custom drafter without make_custom");
      pr->proposer = config.make_custom();
      break;
  }
  pr->draft_chain = std::make_unique<SamplerChain>(settings);
  pr->greedy = settings.temperature <= 0.0f;
  pr->spec_rng = SamplerRng(settings.seed ^ kSpecSeedSalt);
  pr->adaptive = AdaptiveK(config.k, config.k_min, config.k_max, config.adaptive, config.timing_fallback);
  pr->stats.drafter = config.kind == DrafterKind::Custom ? config.custom_name : drafter_kind_name(config.kind);
  pr->stats.current_k = pr->adaptive.k();
  requests_.emplace(id, std::move(pr));
  return {};
}

void SpeculativeDecoder::set_sampler_settings(RequestId id, const SamplerSettings& settings) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  it->second->draft_chain = std::make_unique<SamplerChain>(settings);
  it->second->greedy = settings.temperature <= 0.0f;
  it->second->spec_rng = SamplerRng(settings.seed ^ kSpecSeedSalt);
}

Result<std::vector<TokenId>> SpeculativeDecoder::propose(RequestId id, std::span<const TokenId> tokens,
                                                         int32_t num_prompt, int32_t max_k,
                                                         std::span<const int32_t> block_ids, uint64_t output_index,
                                                         std::span<const int32_t> window_block_ids) {
  PerRequest& pr = *requests_.at(id);
  pr.pending = Draft{};
  pr.pending_draft_ms = 0.0;
  const int32_t k = std::min(max_k, pr.adaptive.next_k());
  if (k < 1) return std::vector<TokenId>{};
  if (pr.self_draft != nullptr && pr.scratch.empty()) {
    pr.scratch = take_scratch(id, pr.num_scratch_needed);
    if (pr.scratch.empty()) return std::vector<TokenId>{};  // none free now: decode plainly
    if (window_kv_ != nullptr) {
      const std::optional<std::vector<BlockId>> blocks = window_kv_->allocate_lookahead(id, pr.num_scratch_needed);
      if (!blocks) {  // both pools or neither
        kv_.free_lookahead(id);
        pr.scratch.clear();
        return std::vector<TokenId>{};
      }
      for (BlockId b : *blocks) pr.window_scratch.push_back(b.value);
    }
    pr.self_draft->set_scratch_blocks(pr.scratch, pr.window_scratch);
  }
  DraftInput in;
  in.tokens = tokens;
  in.num_prompt = num_prompt;
  in.k = k;
  in.chain = pr.draft_chain.get();
  in.greedy = pr.greedy;
  in.spec_rng = pr.spec_rng;
  in.first_output_index = output_index;
  in.target_block_ids = block_ids;
  in.target_window_block_ids = window_block_ids;
  in.block_size = limits_.block_size;
  const auto t0 = Clock::now();
  auto draft = pr.proposer->propose(in);
  pr.pending_draft_ms = ms_since(t0);
  pr.stats.draft_ms += pr.pending_draft_ms;
  if (!draft) return draft.error();
  GB_CHECK_MSG(draft->tokens.size() == draft->q.size() && static_cast<int32_t>(draft->tokens.size()) <= k,
               "DraftProposer: one q row per drafted token, at most k tokens");
  pr.pending = std::move(*draft);
  return pr.pending.tokens;
}

Result<VerifyOutcome> SpeculativeDecoder::verify(RequestId id, std::span<const float> logits, int32_t num_drafted,
                                                 std::span<const TokenId> history, SamplerChain& chain,
                                                 SamplerRng& rng, double forward_ms, int64_t step,
                                                 const BeforeRow& before_row) {
  PerRequest& pr = *requests_.at(id);
  GB_CHECK_MSG(num_drafted >= 1 && num_drafted <= static_cast<int32_t>(pr.pending.tokens.size()),
               "SpeculativeDecoder::verify: more drafted tokens than were proposed");
  const auto t0 = Clock::now();
  const size_t vocab = logits.size() / static_cast<size_t>(num_drafted + 1);
  const std::span<const TokenId> drafted(pr.pending.tokens.data(), static_cast<size_t>(num_drafted));
  const uint64_t base = rng.counter();
  std::vector<double> u_accept, u_final;
  for (int32_t i = 0; i <= num_drafted; ++i) {
    if (i < num_drafted) u_accept.push_back(pr.spec_rng.uniform_at(base + static_cast<uint64_t>(i), SamplerRng::kXtcLane));
    u_final.push_back(rng.uniform_at(base + static_cast<uint64_t>(i), SamplerRng::kPickLane));
  }
  // p_i sees the accepted drafted tokens before position i in its history, so
  // history-dependent stages (penalties, DRY) see what plain decoding would.
  std::vector<TokenId> hist(history.begin(), history.end());
  VerifyInput in;
  in.drafted = drafted;
  in.q = std::span<const std::vector<double>>(pr.pending.q.data(), static_cast<size_t>(num_drafted));
  in.u_accept = u_accept;
  in.u_final = u_final;
  in.p = [&](int32_t i) -> Result<std::vector<double>> {
    hist.resize(history.size() + static_cast<size_t>(i));
    for (int32_t j = 0; j < i; ++j) hist[history.size() + static_cast<size_t>(j)] = drafted[static_cast<size_t>(j)];
    if (before_row) before_row(i, drafted.first(static_cast<size_t>(i)));
    return chain.distribution(logits.subspan(static_cast<size_t>(i) * vocab, vocab), hist);
  };
  auto res = verify_draft(in);
  if (!res) return res.error();
  const double verify_ms = forward_ms + ms_since(t0);

  VerifyOutcome out;
  for (int32_t i = 0; i < res->num_accepted; ++i) out.tokens.push_back({drafted[static_cast<size_t>(i)], TokenOrigin::Accepted});
  out.tokens.push_back({res->next, res->bonus ? TokenOrigin::Bonus : TokenOrigin::Resampled});
  for (size_t i = 0; i < out.tokens.size(); ++i) rng.advance();

  SpeculativeEvent& ev = out.event;
  ev.request = id;
  ev.step = step;
  ev.drafter = std::string(pr.stats.drafter);
  ev.drafted.assign(drafted.begin(), drafted.end());
  // q and p for every drafted token the verifier examined (later ones were
  // never compared: the first rejection ends the walk).
  ev.q = res->q_of_draft;
  ev.p = res->p_of_draft;
  ev.num_accepted = res->num_accepted;
  ev.rejected = res->rejected;
  ev.next = res->next;
  ev.bonus = res->bonus;
  ev.draft_ms = pr.pending_draft_ms;
  ev.verify_ms = verify_ms;

  SpeculativeStats& s = pr.stats;
  s.drafted += num_drafted;
  s.accepted += res->num_accepted;
  ++s.num_verifications;
  ++s.target_forwards;
  s.num_emitted += res->num_accepted + 1;
  s.verify_ms += verify_ms;
  if (static_cast<int32_t>(s.drafted_by_position.size()) < num_drafted) {
    s.drafted_by_position.resize(static_cast<size_t>(num_drafted), 0);
    s.accepted_by_position.resize(static_cast<size_t>(num_drafted), 0);
  }
  for (int32_t i = 0; i < num_drafted; ++i) {
    ++s.drafted_by_position[static_cast<size_t>(i)];
    if (i < res->num_accepted) ++s.accepted_by_position[static_cast<size_t>(i)];
  }
  const bool was_fallback = pr.adaptive.in_fallback();
  pr.adaptive.on_verified(num_drafted, res->num_accepted, pr.pending_draft_ms + verify_ms);
  if (!was_fallback && pr.adaptive.in_fallback()) ++s.num_fallbacks;
  s.current_k = pr.adaptive.k();
  pr.pending = Draft{};
  return out;
}

std::vector<RequestId> SpeculativeDecoder::live_requests() const {
  std::vector<RequestId> out;
  for (const auto& [id, pr] : requests_) out.push_back(id);
  std::sort(out.begin(), out.end(), [](RequestId a, RequestId b) { return a.value < b.value; });
  return out;
}

void SpeculativeDecoder::on_plain_step(RequestId id, double ms, bool decode) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  PerRequest& pr = *it->second;
  ++pr.stats.target_forwards;
  if (!decode) return;
  // A proposal the scheduler dropped (budget, preemption) was never verified.
  pr.pending = Draft{};
  pr.adaptive.on_plain(ms + pr.pending_draft_ms);
  ++pr.stats.num_plain_steps;
  pr.stats.plain_ms += ms;
}

void SpeculativeDecoder::finish(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  PerRequest& pr = *it->second;
  pr.proposer->release();
  kv_.free_lookahead(id);
  if (window_kv_ != nullptr) window_kv_->free_lookahead(id);
  finished_[id] = pr.stats;
  requests_.erase(it);
}

std::optional<SpeculativeStats> SpeculativeDecoder::stats(RequestId id) const {
  if (auto it = requests_.find(id); it != requests_.end()) return it->second->stats;
  if (auto it = finished_.find(id); it != finished_.end()) return it->second;
  return std::nullopt;
}

}  // namespace gb
