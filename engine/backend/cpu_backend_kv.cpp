// The CPU backend's side of KV eviction (backend.h, batch_layout.h "KV
// eviction"): checking a batch's slots, moving rows, and the attention mass
// in a fixed order.
#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cpu_backend_impl.h"
#include "cpu/ops.h"

namespace gb {

// KV eviction's slots (batch_layout.h): one per token, inside the sequence's
// table, reads within what the sequence holds; no main-table layer slides.
Status CpuBackend::validate_kv_slots(const BatchLayout& batch) const {
  const ModelConfig& c = model_->config;
  const auto n = static_cast<size_t>(batch.num_tokens());
  if (batch.kv_slots.size() != n || batch.kv_visible.size() != n ||
      batch.seq_kv_slots.size() != static_cast<size_t>(batch.num_seqs()) ||
      batch.mass_from.size() != static_cast<size_t>(batch.num_seqs()))
    return make_error("the batch's KV slots do not cover every token and sequence");
  for (int32_t l = 0; l < c.num_layers; ++l)
    if (!in_window_group(l) && c.is_sliding(l))
      return make_error("KV eviction needs every sliding layer in a window group; layer " + std::to_string(l) +
                        " slides over the main table");
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const auto su = static_cast<size_t>(s);
    const int32_t held = batch.seq_kv_slots[su];
    const int32_t capacity = (batch.block_indptr[su + 1] - batch.block_indptr[su]) * batch.block_size;
    if (held < 0 || held > capacity)
      return make_error("sequence " + std::to_string(s) + " holds " + std::to_string(held) +
                        " KV slots, more than its table's " + std::to_string(capacity));
    for (int32_t i = batch.seq_token_indptr[su]; i < batch.seq_token_indptr[su + 1]; ++i) {
      const int32_t slot = batch.kv_slots[static_cast<size_t>(i)], seen = batch.kv_visible[static_cast<size_t>(i)];
      if (slot < 0 || slot >= held || seen <= slot || seen > held)
        return make_error("token " + std::to_string(i) + " of the batch writes KV slot " + std::to_string(slot) +
                          " and reads " + std::to_string(seen) + " of its sequence's " + std::to_string(held));
    }
  }
  if (batch.mass != nullptr) {
    const AttentionMass& m = *batch.mass;
    if (m.seq_offset.size() != static_cast<size_t>(batch.num_seqs()) + 1)
      return make_error("the attention mass has no offset per sequence");
    for (int32_t s = 0; s < batch.num_seqs(); ++s)
      if (batch.mass_from[static_cast<size_t>(s)] >= 0 &&
          m.seq_offset[static_cast<size_t>(s) + 1] - m.seq_offset[static_cast<size_t>(s)] <
              batch.seq_kv_slots[static_cast<size_t>(s)])
        return make_error("the attention mass of sequence " + std::to_string(s) + " is shorter than its slots");
  }
  return {};
}

// The attention tiles (attention_tiles, kAttentionQueries) that hold a query
// wanting the mass get rows of their own (see cpu_backend_impl.h).
void CpuBackend::plan_attention_mass(const BatchLayout& batch) {
  const ModelConfig& c = model_->config;
  const int32_t group = c.num_heads / c.num_kv_heads;
  const int32_t per_tile = std::max(1, kAttentionQueries / group);
  const int32_t rows_per_tile = c.num_kv_heads * ((group + kAttentionQueries - 1) / kAttentionQueries);
  mass_tile_offset_.assign(static_cast<size_t>(batch.num_tokens()), -1);
  int64_t total = 0;
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t from = batch.mass_from[static_cast<size_t>(s)];
    if (from < 0) continue;
    const int32_t end = batch.seq_token_indptr[static_cast<size_t>(s) + 1];
    for (int32_t i = batch.seq_token_indptr[static_cast<size_t>(s)]; i < end; i += per_tile) {
      const int32_t last = std::min(i + per_tile, end) - 1;
      if (batch.positions[static_cast<size_t>(last)] < from) continue;  // positions rise within a sequence
      mass_tile_offset_[static_cast<size_t>(i)] = total;
      total += int64_t{rows_per_tile} * batch.kv_slots_of(s);
    }
  }
  mass_partial_.assign(static_cast<size_t>(total), 0.0f);
  batch.mass->sums.assign(static_cast<size_t>(batch.mass->seq_offset.back()), 0.0f);
}

void CpuBackend::sum_attention_mass(const BatchLayout& batch) {
  const ModelConfig& c = model_->config;
  const int32_t group = c.num_heads / c.num_kv_heads;
  const int32_t per_tile = std::max(1, kAttentionQueries / group);
  const int32_t rows_per_tile = c.num_kv_heads * ((group + kAttentionQueries - 1) / kAttentionQueries);
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t end = batch.seq_token_indptr[static_cast<size_t>(s) + 1];
    const int64_t slots = batch.kv_slots_of(s);
    float* sums = batch.mass->sums.data() + batch.mass->seq_offset[static_cast<size_t>(s)];
    for (int32_t i = batch.seq_token_indptr[static_cast<size_t>(s)]; i < end; i += per_tile) {
      const int64_t at = mass_tile_offset_[static_cast<size_t>(i)];
      if (at < 0) continue;
      for (int32_t r = 0; r < rows_per_tile; ++r) kernels::add_inplace(sums, mass_partial_.data() + at + r * slots, slots);
    }
  }
}

Status CpuBackend::move_slots(std::span<const std::pair<int32_t, int32_t>> src_dst) {
  const int64_t num_slots = int64_t{kv_spec_.num_blocks} * kv_spec_.block_size;
  for (const auto& [src, dst] : src_dst) {
    if (src < 0 || src >= num_slots || dst < 0 || dst >= num_slots)
      return make_error("move_slots: slot " + std::to_string(src < 0 || src >= num_slots ? src : dst) +
                        " is outside the KV pool of " + std::to_string(num_slots));
    for (int32_t l = 0; l < model_->config.num_layers; ++l) {
      if (in_window_group(l)) continue;
      for (const auto& [base, row] : {std::pair{k_layer(l), k_row_bytes_}, std::pair{v_layer(l), v_row_bytes_}})
        std::memcpy(base + static_cast<size_t>(dst) * row, base + static_cast<size_t>(src) * row, row);
    }
  }
  return {};
}

}  // namespace gb
