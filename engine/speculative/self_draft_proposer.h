// SelfDraftProposer: drafts with the target itself, running only its first
// `num_layers` layers and then the final norm and classifier (layer skipping;
// BatchLayout::num_layers). The context's K/V for those layers is already in
// the target's blocks (the full forward passes wrote every layer), so drafting
// needs no prefill and no extra weights.
//
// Drafted positions must not be written into the request's own blocks: a block
// may be shared (prefix cache, forks, truncation into a shared block), and
// verification has not happened yet. They go to scratch blocks instead -- a few
// lookahead blocks of the scheduler's own pool (KvCacheManager::allocate_lookahead),
// borrowed by the SpeculativeDecoder for this request:
//
//   draft table: | target block 0 | ... | target block f-1 | scratch 0 | scratch 1 | ...
//   f = (N - 1) / block_size, N = tokens; when position N - 1 is inside a block,
//   that block is first copied to scratch 0 (Backend::copy_blocks) so the
//   positions before N - 1 in it stay visible.
//
// Verification then rewrites the same positions in the request's real blocks
// with all layers, so nothing from drafting survives in the target's cache.
//
// Thread: engine thread only.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "speculative/draft_proposer.h"

namespace gb {

class SelfDraftProposer final : public DraftProposer {
 public:
  // scratch: block ids in the target's pool lent to this request
  // (self_draft_scratch_blocks(k_max, block_size) of them), may start empty.
  SelfDraftProposer(Backend& target, int32_t num_layers, int32_t vocab_size, std::vector<int32_t> scratch)
      : target_(target), num_layers_(num_layers), vocab_size_(vocab_size), scratch_(std::move(scratch)) {}
  std::string_view name() const override { return "self"; }
  Result<Draft> propose(const DraftInput& input) override;
  // Scratch is lent while the request drafts (SpeculativeDecoder); without
  // any, propose() drafts nothing.
  const std::vector<int32_t>& scratch_blocks() const { return scratch_; }
  // window_scratch: as many blocks of the window group's pool, when the
  // target keeps one (its sliding layers' drafts go there).
  void set_scratch_blocks(std::vector<int32_t> scratch, std::vector<int32_t> window_scratch = {}) {
    scratch_ = std::move(scratch);
    window_scratch_ = std::move(window_scratch);
  }

 private:
  Backend& target_;
  int32_t num_layers_;
  int32_t vocab_size_;
  std::vector<int32_t> scratch_;
  std::vector<int32_t> window_scratch_;
  std::vector<float> logits_;  // (vocab)
};

}  // namespace gb
