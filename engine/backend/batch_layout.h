// BatchLayout: everything a backend needs to run one step over a ragged batch,
// as flat arrays (CSR style, after FlashInfer's page tables). The scheduler fills
// it once per step ("plan"); the backend reads it for every layer ("run"). No
// engine object crosses this seam.
//
//   tokens:     | seq 0 new tokens | seq 1 new tokens | ... |      (num_tokens)
//   seq_token_indptr: [0, n0, n0+n1, ...]                         (num_seqs + 1)
//   positions:  absolute position of each new token in its sequence
//   seq_kv_len: tokens in the sequence's KV after this step        (num_seqs)
//   block tables: block_indptr (num_seqs + 1) into block_ids; token at position p
//               of sequence s lives in block block_ids[block_indptr[s] + p / block_size],
//               slot p % block_size.
//
//   window tables: models whose sliding layers keep a pool of their own (a
//               window group, kv/scheduler.h) give each sequence a second
//               table, window_block_indptr / window_block_ids, read and written
//               by the sliding layers (ModelConfig::is_sliding) only; entries
//               before the window are -1. Empty when every layer uses block_ids.
//
// A sequence's new tokens occupy the positions seq_kv_len - n_new ... seq_kv_len - 1;
// the older positions must already be in the KV cache.
//
//   KV eviction (kv/scheduler.h): when kv_slots is set, the main tables' slots
//               are not positions. Token i is written to slot kv_slots[i] of its
//               sequence's main table and its query reads slots
//               0 .. kv_visible[i] - 1 there (the positions still go to RoPE);
//               a sequence holds seq_kv_slots slots after the step. Window
//               tables keep positions. A model whose main-table layers slide
//               cannot run such a batch.
//   attention mass: sequences with mass_from[s] >= 0 get, in mass->sums, each
//               slot's attention weight summed over every query of position
//               >= mass_from[s], every query head and every main-table layer.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ids.h"

namespace gb {

// A mixture of experts' routing of a step's logit rows, filled by the backend
// when BatchLayout::routing points here: for logit row r and layer l, the
// experts_per_token experts (best first) and their weights at
// ((r * layers) + l) * experts_per_token.
struct RoutingRows {
  int32_t layers = 0;
  int32_t experts_per_token = 0;
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Where a backend writes the attention mass (BatchLayout::mass): sequence s's
// slots 0 .. seq_kv_slots[s] - 1 at sums[seq_offset[s] + slot].
struct AttentionMass {
  std::vector<int32_t> seq_offset;  // (num_seqs + 1)
  std::vector<float> sums;
};

struct BatchLayout {
  std::vector<TokenId> token_ids;            // (num_tokens)
  std::vector<int32_t> positions;            // (num_tokens)
  std::vector<int32_t> seq_token_indptr{0};  // (num_seqs + 1)
  std::vector<int32_t> seq_kv_len;           // (num_seqs)
  std::vector<int32_t> block_indptr{0};      // (num_seqs + 1)
  std::vector<int32_t> block_ids;            // (block_indptr.back())
  std::vector<int32_t> window_block_indptr;  // (num_seqs + 1) or empty: no window group
  std::vector<int32_t> window_block_ids;     // (window_block_indptr.back())
  std::vector<int32_t> kv_slots;             // (num_tokens) or empty: slot == position
  std::vector<int32_t> kv_visible;           // (num_tokens) or empty: position + 1
  std::vector<int32_t> seq_kv_slots;         // (num_seqs) or empty: seq_kv_len
  std::vector<int32_t> mass_from;            // (num_seqs) or empty: no mass wanted
  AttentionMass* mass = nullptr;             // not owned; see above
  // Rows of the logits output, in order: indices into token_ids (num_logits).
  std::vector<int32_t> logit_token_indices;
  int32_t block_size = 16;
  // Run only the first num_layers layers, then the final norm and classifier
  // (self-drafting by layer skipping); -1 runs every layer.
  int32_t num_layers = -1;
  // false: the KvWrite steps write nothing; the step's tokens must already be
  // in the cache (an inspection re-running a computed position, which must not
  // touch blocks others may share).
  bool write_kv = true;
  // Where the backend writes the logit rows' routing (a mixture of experts),
  // or null: not wanted. Not owned.
  RoutingRows* routing = nullptr;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_kv_len.size()); }
  int32_t num_logits() const { return static_cast<int32_t>(logit_token_indices.size()); }

  // Appends one sequence: its new tokens (at positions start_pos ...), its block
  // table, and whether to return logits for its last new token only or for all.
  void add_sequence(const TokenId* tokens, int32_t num_new, int32_t start_pos,
                    const int32_t* table, int32_t num_blocks, bool all_logits);
  // The same with logits for the last num_logit_rows new tokens (0 ... num_new).
  void add_sequence_rows(const TokenId* tokens, int32_t num_new, int32_t start_pos,
                         const int32_t* table, int32_t num_blocks, int32_t num_logit_rows);
  // The sequence just added keeps its main-table K/V in `slot_ids` (one per new
  // token; null: slot == position), holds num_kv_slots slots after the step,
  // and wants the attention mass of its queries from position mass_from on
  // (-1: none). Called for every sequence once any needs it.
  void add_kv_slots(const int32_t* slot_ids, int32_t num_kv_slots, int32_t mass_from);
  bool has_kv_slots() const { return !kv_slots.empty(); }
  // Slots of sequence s's main table a step reads and writes (seq_kv_len without eviction).
  int32_t kv_slots_of(int32_t s) const {
    return seq_kv_slots.empty() ? seq_kv_len[static_cast<size_t>(s)] : seq_kv_slots[static_cast<size_t>(s)];
  }
  // The sequence just added also has a window group table (as many entries,
  // or more under KV eviction).
  void add_window_table(const int32_t* table, int32_t num_blocks);
  bool has_window_tables() const { return !window_block_indptr.empty(); }
  // Sequence s's table for a layer: the window group's when `window` and the
  // batch has one, else the main one.
  const int32_t* table(int32_t s, bool window) const {
    const auto su = static_cast<size_t>(s);
    return window && has_window_tables() ? window_block_ids.data() + window_block_indptr[su]
                                         : block_ids.data() + block_indptr[su];
  }
  void clear();
};

}  // namespace gb
