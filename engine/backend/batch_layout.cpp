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
  // The table covers the sequence's slots: its positions, or fewer when KV
  // eviction keeps them elsewhere (add_kv_slots; the backend checks either).
  GB_CHECK(num_blocks >= 0);
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
  // As many entries as the main table, or more when KV eviction keeps the
  // main table's slots fewer than the positions.
  GB_CHECK(s >= 0 && num_blocks >= block_indptr[static_cast<size_t>(s) + 1] - block_indptr[static_cast<size_t>(s)]);
  if (window_block_indptr.empty()) {
    GB_CHECK_MSG(s == 0, "BatchLayout: window tables for every sequence or none");
    window_block_indptr.push_back(0);
  }
  GB_CHECK_MSG(static_cast<int32_t>(window_block_indptr.size()) == s + 1, "BatchLayout: one window table per sequence");
  window_block_ids.insert(window_block_ids.end(), table, table + num_blocks);
  window_block_indptr.push_back(static_cast<int32_t>(window_block_ids.size()));
}

void BatchLayout::add_kv_slots(const int32_t* slot_ids, int32_t num_kv_slots, int32_t from) {
  const int32_t s = num_seqs() - 1;
  GB_CHECK_MSG(s >= 0 && static_cast<int32_t>(seq_kv_slots.size()) == s,
               "BatchLayout: kv slots for every sequence or none, after its add_sequence");
  const auto begin = static_cast<size_t>(seq_token_indptr[static_cast<size_t>(s)]);
  const auto end = static_cast<size_t>(seq_token_indptr[static_cast<size_t>(s) + 1]);
  for (size_t i = begin; i < end; ++i) {
    const int32_t slot = slot_ids ? slot_ids[i - begin] : positions[i];
    kv_slots.push_back(slot);
    // The last token of a decode that reused an evicted slot reads them all.
    kv_visible.push_back(std::max(slot + 1, i + 1 == end ? num_kv_slots : 0));
  }
  seq_kv_slots.push_back(num_kv_slots);
  mass_from.push_back(from);
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
  kv_slots.clear();
  kv_visible.clear();
  seq_kv_slots.clear();
  mass_from.clear();
  mass = nullptr;
  num_layers = -1;
  write_kv = true;
  routing = nullptr;
}

}  // namespace gb
