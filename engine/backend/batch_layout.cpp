#include "backend/batch_layout.h"

#include <algorithm>

#include "core/check.h"

namespace gb {

void BatchLayout::add_sequence(const TokenId* tokens, int32_t num_new, int32_t start_pos,
                               const int32_t* table, int32_t num_blocks, bool all_logits) {
  add_sequence_rows(tokens, num_new, start_pos, table, num_blocks, all_logits ? num_new : std::min(num_new, 1));
}

void BatchLayout::add_sequence_rows(const TokenId* tokens, int32_t num_new, int32_t start_pos,
                                    const int32_t* table, int32_t num_blocks, int32_t num_logit_rows) {
  GB_CHECK(num_new >= 0 && start_pos >= 0);
  GB_CHECK(num_logit_rows >= 0 && num_logit_rows <= num_new);
  GB_CHECK(static_cast<int64_t>(num_blocks) * block_size >= start_pos + num_new);
  const int32_t first = num_tokens();
  for (int32_t i = 0; i < num_new; ++i) {
    token_ids.push_back(tokens[i]);
    positions.push_back(start_pos + i);
  }
  seq_token_indptr.push_back(num_tokens());
  seq_kv_len.push_back(start_pos + num_new);
  block_ids.insert(block_ids.end(), table, table + num_blocks);
  block_indptr.push_back(static_cast<int32_t>(block_ids.size()));
  for (int32_t i = num_new - num_logit_rows; i < num_new; ++i) logit_token_indices.push_back(first + i);
}

void BatchLayout::add_window_table(const int32_t* table, int32_t num_blocks) {
  const int32_t s = num_seqs() - 1;
  GB_CHECK(s >= 0 && num_blocks == block_indptr[static_cast<size_t>(s) + 1] - block_indptr[static_cast<size_t>(s)]);
  if (window_block_indptr.empty()) {
    GB_CHECK_MSG(s == 0, "BatchLayout: window tables for every sequence or none");
    window_block_indptr.push_back(0);
  }
  GB_CHECK_MSG(static_cast<int32_t>(window_block_indptr.size()) == s + 1, "BatchLayout: one window table per sequence");
  window_block_ids.insert(window_block_ids.end(), table, table + num_blocks);
  window_block_indptr.push_back(static_cast<int32_t>(window_block_ids.size()));
}

void BatchLayout::clear() {
  token_ids.clear();
  positions.clear();
  seq_token_indptr.assign(1, 0);
  seq_kv_len.clear();
  block_indptr.assign(1, 0);
  block_ids.clear();
  window_block_indptr.clear();
  window_block_ids.clear();
  logit_token_indices.clear();
  num_layers = -1;
  write_kv = true;
  routing = nullptr;
}

}  // namespace gb
