#include "speculative/draft_model.h"

#include <algorithm>

#include "backend/cpu_backend.h"
#include "speculative/draft_sampling.h"

namespace gb {

Status check_same_vocabulary(const Tokenizer& target, const std::string& target_name, const Tokenizer& draft,
                             const std::string& draft_name) {
  if (target.vocab_size() != draft.vocab_size())
    return make_error(draft_name + ": cannot draft for " + target_name + ": its vocabulary has " +
                      std::to_string(draft.vocab_size()) + " tokens, the target's has " +
                      std::to_string(target.vocab_size()) + " (a draft model must share the target's vocabulary)");
  // Same token = same bytes in decoded text and the same kind (control, byte
  // fallback). Stored pieces are not compared: the llama2.c tokenizer stores
  // BOS as "\n<s>\n" and spaces as ' ', a GGUF vocabulary "<s>" and U+2581,
  // for the very same vocabulary.
  for (TokenId id = 0; id < target.vocab_size(); ++id) {
    if (target.token_bytes(id) != draft.token_bytes(id) || target.is_control(id) != draft.is_control(id) ||
        target.is_byte(id) != draft.is_byte(id))
      return make_error(draft_name + ": cannot draft for " + target_name + ": token " + std::to_string(id) + " is '" +
                        draft.token_piece(id) + "' in the draft but '" + target.token_piece(id) +
                        "' in the target (a draft model must share the target's vocabulary)");
  }
  if (target.bos_id() != draft.bos_id() || target.eos_id() != draft.eos_id())
    return make_error(draft_name + ": cannot draft for " + target_name + ": BOS/EOS ids differ");
  return {};
}

Result<std::shared_ptr<DraftModel>> DraftModel::load(const std::string& path, const std::string& tokenizer_path,
                                                     const Tokenizer& target_tokenizer, const std::string& target_path,
                                                     int32_t max_context, int32_t num_blocks, int32_t block_size) {
  LoadOptions options;
  options.context_length = max_context;
  auto model = load_model(path, options);
  if (!model) return make_error("draft model: " + model.error().message);
  auto tokenizer = load_tokenizer(**model, tokenizer_path);
  if (!tokenizer) return make_error("draft model: " + tokenizer.error().message);
  GB_TRY(check_same_vocabulary(target_tokenizer, target_path, **tokenizer, path));
  if ((*model)->config.vocab_size != target_tokenizer.vocab_size())
    return make_error(path + ": its classifier has " + std::to_string((*model)->config.vocab_size) +
                      " rows, the target's vocabulary " + std::to_string(target_tokenizer.vocab_size()));
  auto dm = std::shared_ptr<DraftModel>(new DraftModel());
  dm->model_ = *model;
  // The CPU backend by name, not runtime's make_backend: speculative sits below
  // runtime in the layering, and the draft model runs on the host by design.
  // One thread: draft forwards are single tokens of a small model, where
  // thread hand-offs cost more than they save (and the target keeps the cores).
  CpuBackendOptions cpu;
  cpu.num_threads = 1;
  dm->backend_ = make_cpu_backend(dm->model_, cpu);
  dm->block_size_ = block_size;
  dm->max_context_ = max_context;
  GB_TRY(dm->backend_->init_kv_pool({num_blocks, block_size}));
  dm->pool_ = std::make_unique<BlockPool>(num_blocks, block_size, /*record_events=*/false);
  return dm;
}

// Draft blocks carry no token record (the proposer keeps its computed tokens),
// so they are owned, empty, and free again when released: a plain allocator.
int32_t DraftModel::allocate_block() {
  const std::optional<BlockId> b = pool_->allocate(kNoRequest);
  return b ? b->value : -1;
}

void DraftModel::free_block(int32_t block) { pool_->release(BlockId{block}, kNoRequest); }

void DraftModelProposer::release() {
  for (int32_t b : blocks_) model_->free_block(b);
  blocks_.clear();
  computed_.clear();
}

bool DraftModelProposer::ensure_blocks(int32_t num_tokens) {
  const int32_t bs = model_->block_size();
  while (static_cast<int32_t>(blocks_.size()) * bs < num_tokens) {
    const int32_t b = model_->allocate_block();
    if (b < 0) return false;
    blocks_.push_back(b);
  }
  return true;
}

Status DraftModelProposer::run(std::span<const TokenId> tokens, int32_t start_pos, std::span<float> logits) {
  BatchLayout layout;
  layout.block_size = model_->block_size();
  layout.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), start_pos, blocks_.data(),
                      static_cast<int32_t>(blocks_.size()), /*all_logits=*/false);
  return model_->backend().forward(layout, logits);
}

Result<Draft> DraftModelProposer::propose(const DraftInput& in) {
  Draft draft;
  const auto num_tokens = static_cast<int32_t>(in.tokens.size());
  // Rollback: keep the K/V of the longest prefix still in the request.
  size_t keep = 0;
  while (keep < computed_.size() && keep < in.tokens.size() && computed_[keep] == in.tokens[keep]) ++keep;
  computed_.resize(keep);
  // Positions up to num_tokens - 1 + k - 1 get written (d_k is never computed).
  const int32_t k = std::min(in.k, model_->max_context() - num_tokens);
  if (k < 1 || !ensure_blocks(num_tokens + k - 1)) return draft;
  logits_.resize(static_cast<size_t>(model_->model().config.vocab_size));

  std::vector<TokenId> history(in.tokens.begin(), in.tokens.end());
  // Catch up: everything the draft has not computed, ending with the last token.
  // computed_ never covers the last token (its logits are what we need), so
  // at least one token runs.
  if (static_cast<int32_t>(computed_.size()) >= num_tokens) computed_.resize(static_cast<size_t>(num_tokens - 1));
  const auto from = static_cast<int32_t>(computed_.size());
  GB_TRY(run(in.tokens.subspan(static_cast<size_t>(from)), from, logits_));
  computed_.assign(in.tokens.begin(), in.tokens.end());
  for (int32_t i = 0; i < k; ++i) {
    const double u = in.spec_rng.uniform_at(in.first_output_index + static_cast<uint64_t>(i), SamplerRng::kPickLane);
    auto pick = pick_draft_token(logits_, history, in.chain, in.greedy, u);
    if (!pick) return pick.error();
    draft.tokens.push_back(pick->token);
    draft.q.push_back(std::move(pick->q));
    history.push_back(pick->token);
    if (i + 1 == k) break;
    const TokenId t = pick->token;
    GB_TRY(run(std::span<const TokenId>(&t, 1), static_cast<int32_t>(computed_.size()), logits_));
    computed_.push_back(t);
  }
  return draft;
}

}  // namespace gb
