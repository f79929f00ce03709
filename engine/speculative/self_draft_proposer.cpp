#include "speculative/self_draft_proposer.h"

#include <algorithm>
#include <utility>

#include "speculative/draft_sampling.h"

namespace gb {

Result<Draft> SelfDraftProposer::propose(const DraftInput& in) {
  Draft draft;
  const auto num_tokens = static_cast<int32_t>(in.tokens.size());
  const int32_t bs = in.block_size;
  const int32_t first_pos = num_tokens - 1;  // the last token: computed by the draft first
  const int32_t first_block = first_pos / bs;
  // Positions first_pos .. first_pos + k - 1 are written; they must fit in the scratch blocks.
  const int32_t room = static_cast<int32_t>(scratch_.size()) * bs - first_pos % bs;
  const int32_t k = std::min(in.k, room);
  if (k < 1 || first_block > static_cast<int32_t>(in.target_block_ids.size())) return draft;

  std::vector<int32_t> table(in.target_block_ids.begin(), in.target_block_ids.begin() + first_block);
  table.insert(table.end(), scratch_.begin(), scratch_.end());
  // A window group: the same over the sliding layers' table and scratch
  // (entries before the window are -1; the draft reads none of them).
  const bool window = !in.target_window_block_ids.empty();
  std::vector<int32_t> window_table;
  if (window) {
    GB_CHECK_MSG(window_scratch_.size() == scratch_.size() &&
                     in.target_window_block_ids.size() == in.target_block_ids.size(),
                 "SelfDraftProposer: a window-group table needs as many scratch blocks of its own");
    window_table.assign(in.target_window_block_ids.begin(), in.target_window_block_ids.begin() + first_block);
    window_table.insert(window_table.end(), window_scratch_.begin(), window_scratch_.end());
  }
  if (first_pos % bs != 0) {
    GB_CHECK(first_block < static_cast<int32_t>(in.target_block_ids.size()));
    const std::pair<int32_t, int32_t> copy{in.target_block_ids[static_cast<size_t>(first_block)], scratch_[0]};
    GB_TRY(target_.copy_blocks(std::span(&copy, 1)));
    if (window) {
      const std::pair<int32_t, int32_t> wcopy{in.target_window_block_ids[static_cast<size_t>(first_block)],
                                              window_scratch_[0]};
      GB_TRY(target_.copy_blocks(std::span(&wcopy, 1), KvGroup::Window));
    }
  }
  logits_.resize(static_cast<size_t>(vocab_size_));
  std::vector<TokenId> history(in.tokens.begin(), in.tokens.end());
  TokenId current = in.tokens.back();
  for (int32_t i = 0; i < k; ++i) {
    BatchLayout layout;
    layout.block_size = bs;
    layout.num_layers = num_layers_;
    layout.add_sequence(&current, 1, first_pos + i, table.data(), static_cast<int32_t>(table.size()), false);
    if (window) layout.add_window_table(window_table.data(), static_cast<int32_t>(window_table.size()));
    GB_TRY(target_.forward(layout, logits_));
    const double u = in.spec_rng.uniform_at(in.first_output_index + static_cast<uint64_t>(i), SamplerRng::kPickLane);
    auto pick = pick_draft_token(logits_, history, in.chain, in.greedy, u);
    if (!pick) return pick.error();
    draft.tokens.push_back(pick->token);
    draft.q.push_back(std::move(pick->q));
    history.push_back(pick->token);
    current = pick->token;
  }
  return draft;
}

}  // namespace gb
