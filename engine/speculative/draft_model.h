// DraftModel: a second, smaller model file used as the drafter for requests of
// a target model with the same vocabulary. It owns its own CPU backend and KV
// pool (another model's K/V, so not the target's pool); its blocks are handed
// out by a BlockPool of their own, the same allocator as the target's, without
// events (the draft cache is private: never shared, never prefix-cached). One
// DraftModel serves every request that names its path.
//
// DraftModelProposer: one request's use of it. Its blocks hold the K/V of the
// tokens in `computed_` (a prefix of the request's tokens plus possibly drafted
// tokens that were later rejected). Before each proposal it keeps only the
// longest common prefix of computed_ and the request's current tokens -- that
// is the rollback on rejection, and it also heals after a draft that was never
// verified (budget cut, preemption) -- then catches up in one forward pass and
// drafts k tokens autoregressively (k forward passes in all).
//
//   draft pool blocks of this request: | b0 | b1 | ... |   (ceil(tokens / block_size))
//
// Vocabulary check at load: same number of tokens, and for every id the same
// decoded bytes and kind (control / byte), else an error naming both files and
// the first difference.
//
// Thread: engine thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/block_pool.h"
#include "model/model.h"
#include "speculative/draft_proposer.h"
#include "tokenizer/tokenizer.h"

namespace gb {

class DraftModel {
 public:
  // Loads `path` (tokenizer from tokenizer_path, or found as for any model) and
  // checks its vocabulary against the target's. num_blocks: size of its pool.
  static Result<std::shared_ptr<DraftModel>> load(const std::string& path, const std::string& tokenizer_path,
                                                  const Tokenizer& target_tokenizer, const std::string& target_path,
                                                  int32_t max_context, int32_t num_blocks, int32_t block_size);

  Backend& backend() { return *backend_; }
  const Model& model() const { return *model_; }
  int32_t block_size() const { return block_size_; }
  int32_t max_context() const { return max_context_; }
  // A free block, or -1 when the pool is exhausted (the caller drafts less).
  int32_t allocate_block();
  void free_block(int32_t block);
  int32_t num_free_blocks() const { return pool_->num_available(); }
  const BlockPool& pool() const { return *pool_; }

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Backend> backend_;
  int32_t block_size_ = 16;
  int32_t max_context_ = 0;
  std::unique_ptr<BlockPool> pool_;  // the draft backend's blocks; holders are proposers (kNoRequest)
};

// Compares two vocabularies token by token; the error names both sides.
Status check_same_vocabulary(const Tokenizer& target, const std::string& target_name, const Tokenizer& draft,
                             const std::string& draft_name);

class DraftModelProposer final : public DraftProposer {
 public:
  explicit DraftModelProposer(std::shared_ptr<DraftModel> model) : model_(std::move(model)) {}
  ~DraftModelProposer() override { release(); }
  std::string_view name() const override { return "draft"; }
  Result<Draft> propose(const DraftInput& input) override;
  void release() override;

 private:
  // Forward over tokens[from, to) (already in computed_ order) with logits of the last.
  Status run(std::span<const TokenId> tokens, int32_t start_pos, std::span<float> logits);
  bool ensure_blocks(int32_t num_tokens);

  std::shared_ptr<DraftModel> model_;
  std::vector<int32_t> blocks_;    // (ceil(computed_.size() / block_size)) at least
  std::vector<TokenId> computed_;  // tokens whose K/V is in blocks_
  std::vector<float> logits_;      // (vocab)
};

}  // namespace gb
