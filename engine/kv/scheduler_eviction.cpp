// The Scheduler's KV eviction (kv/scheduler.h, "KV eviction"; the policies
// are kv/kv_policy.h): what an evicting request drops before each step, its
// fixed prefill chunks, the attention mass it ranks by, what a fork of it may
// share, and the promises its cache keeps between steps.
#include <algorithm>
#include <string>

#include "core/check.h"
#include "kv/scheduler.h"

namespace gb {

int32_t Scheduler::fixed_chunk(const Request& r) const {
  const int32_t c = r.num_tokens_computed;
  const int32_t left = r.num_tokens_total() - c;
  // Outputs (a recompute after preemption, a branch's forced tokens) go one
  // at a time, as they were decoded.
  if (c >= r.num_prompt) return std::min(left, 1);
  int32_t cap = std::max(1, config_.max_batch_tokens - config_.max_seqs);
  if (config_.max_prefill_chunk > 0) cap = std::min(cap, config_.max_prefill_chunk);
  if (window_chunk_cap_ > 0) cap = std::min(cap, window_chunk_cap_);
  if (const int32_t policy_cap = kv_policy_chunk_limit(r.kv_policy); policy_cap > 0) cap = std::min(cap, policy_cap);
  int32_t n = std::min(cap, r.num_prompt - c);
  // snapkv: the observation window (the prompt's last W tokens) in one chunk
  // when it fits, so its attention mass adds up in one fixed order.
  if (r.kv_policy.kind == KvPolicyKind::SnapKV) {
    const int32_t window_start = std::max(0, r.num_prompt - r.kv_policy.window);
    if (c < window_start && r.kv_policy.window <= cap) n = std::min(n, window_start - c);
  }
  return std::max(1, n);
}

int32_t Scheduler::position_limit(const Request& r) const {
  return kv_policy_row(r.kv_policy.kind).evicts_while_running ? position_limit_ : max_total_tokens_;
}

std::optional<int32_t> Scheduler::evict_for(Request& r, int32_t n, StepState& step) {
  const KvPolicy& p = r.kv_policy;
  if (!p.active()) return -1;
  if (r.kv_reuse_slot >= 0) return r.kv_reuse_slot;  // decided earlier in this step
  const KvPolicyRow& row = kv_policy_row(p.kind);
  const int32_t slots = r.num_kv_slots();
  const int32_t pos = r.num_tokens_computed;
  const bool prune_prompt = row.prunes_after_prompt && !r.kv_pruned && pos >= r.num_prompt;
  if (!(row.evicts_while_running && slots + n > p.budget) && !prune_prompt) return -1;
  if (row.evicts_while_running && n == 1 && slots == p.budget) {
    // The one slot the policy drops takes the new token (no row moves).
    const int32_t victim = kv_select_victim(p, r.kv_positions, r.kv_mass, pos + 1);
    auto moves = kv_.reuse_slot(r.id, victim, r.token_at(pos));
    if (!moves) return std::nullopt;
    EvictedTokens gone{r.id, {r.kv_positions[static_cast<size_t>(victim)]}, {}};
    if (!r.kv_mass.empty()) gone.mass.push_back(r.kv_mass[static_cast<size_t>(victim)]);
    step.plan->evictions.push_back(std::move(gone));
    for (const SlotMove& m : *moves) step.moves.push_back({r.id, m});
    r.kv_reuse_slot = victim;
    ++r.num_evicted;
    ++step.plan->stats.num_evicted_tokens;
    return victim;
  }
  // Compaction: sink and h2o keep budget - n before a chunk, snapkv the budget
  // of the prompt (its recent window is the prompt's last W tokens).
  const int32_t keep = prune_prompt ? p.budget : p.budget - n;
  const int32_t end_pos = prune_prompt ? r.num_prompt : pos + n;
  GB_CHECK_MSG(keep >= 0, "Scheduler: a chunk larger than the KV budget");
  std::vector<int32_t> kept;
  if (prune_prompt) {
    // Only prompt tokens are pruned; answer tokens computed already (a
    // recompute after preemption) stay.
    std::vector<int32_t> prompt_slots, prompt_positions;
    std::vector<float> prompt_mass;
    for (int32_t i = 0; i < slots; ++i) {
      if (r.kv_positions[static_cast<size_t>(i)] >= r.num_prompt) continue;
      prompt_slots.push_back(i);
      prompt_positions.push_back(r.kv_positions[static_cast<size_t>(i)]);
      if (!r.kv_mass.empty()) prompt_mass.push_back(r.kv_mass[static_cast<size_t>(i)]);
    }
    std::vector<char> keep_slot(static_cast<size_t>(slots), 1);
    for (int32_t i : prompt_slots) keep_slot[static_cast<size_t>(i)] = 0;
    for (int32_t k : kv_select_kept(p, prompt_positions, prompt_mass, keep, end_pos))
      keep_slot[static_cast<size_t>(prompt_slots[static_cast<size_t>(k)])] = 1;
    for (int32_t i = 0; i < slots; ++i)
      if (keep_slot[static_cast<size_t>(i)]) kept.push_back(i);
  } else if (keep < slots) {
    kept = kv_select_kept(p, r.kv_positions, r.kv_mass, keep, end_pos);
  }
  if (static_cast<int32_t>(kept.size()) < slots && (prune_prompt || keep < slots)) {
    std::vector<TokenId> kept_tokens;
    for (int32_t i : kept) kept_tokens.push_back(r.token_at(r.kv_positions[static_cast<size_t>(i)]));
    auto moves = kv_.compact(r.id, kept, kept_tokens);
    if (!moves) return std::nullopt;
    for (const SlotMove& m : *moves) step.moves.push_back({r.id, m});
    std::vector<int32_t> positions;
    std::vector<float> mass;
    EvictedTokens gone{r.id, {}, {}};
    for (int32_t i = 0, k = 0; i < slots; ++i) {
      const bool keep_it = k < static_cast<int32_t>(kept.size()) && kept[static_cast<size_t>(k)] == i;
      k += keep_it ? 1 : 0;
      (keep_it ? positions : gone.positions).push_back(r.kv_positions[static_cast<size_t>(i)]);
      if (!r.kv_mass.empty()) (keep_it ? mass : gone.mass).push_back(r.kv_mass[static_cast<size_t>(i)]);
    }
    step.plan->evictions.push_back(std::move(gone));
    const int32_t dropped = slots - static_cast<int32_t>(kept.size());
    r.num_evicted += dropped;
    step.plan->stats.num_evicted_tokens += dropped;
    r.kv_positions = std::move(positions);
    r.kv_mass = std::move(mass);
  }
  if (prune_prompt) r.kv_pruned = true;
  return -1;
}

void Scheduler::add_kv_mass(RequestId id, std::span<const float> mass) {
  GB_CHECK_MSG(in_flight_, "Scheduler::add_kv_mass outside a step");
  Request& r = at(id);
  if (r.kv_mass.empty()) return;  // a policy that does not rank by it
  GB_CHECK_MSG(mass.size() == r.kv_mass.size(), "Scheduler::add_kv_mass: one value per slot");
  for (size_t i = 0; i < mass.size(); ++i) r.kv_mass[i] += mass[i];
}

int32_t Scheduler::shared_slots(RequestId parent, int32_t num_tokens) const {
  const std::vector<int32_t>* positions = nullptr;
  if (auto it = retained_.find(parent); it != retained_.end()) positions = &it->second.kv_positions;
  else if (const Request* r = find(parent)) positions = &r->kv_positions;
  if (positions == nullptr || positions->empty()) return num_tokens;
  int32_t n = 0;
  for (int32_t p : *positions) n += p < num_tokens ? 1 : 0;
  for (int32_t i = 0; i < n; ++i)
    if ((*positions)[static_cast<size_t>(i)] >= num_tokens) return -1;
  return n;
}

// KV eviction's promises for a running request between steps: its slots hold
// distinct computed positions, at most the budget (sink, h2o; snapkv after
// the prompt: the budget plus the answer), every sink and every position of the
// recent window (snapkv: the prompt's last W) among them.
Status Scheduler::check_kv_policy(const Request& r) const {
  auto fail = [&](const std::string& what) {
    return Status(make_error("Scheduler invariant: request " + std::to_string(r.id.value) + ": " + what));
  };
  if (r.kv_positions.empty()) return {};
  const int32_t computed = r.num_tokens_computed;
  std::vector<char> held(static_cast<size_t>(computed), 0);
  for (int32_t p : r.kv_positions) {
    if (p < 0 || p >= computed) return fail("a slot holds position " + std::to_string(p) + ", not a computed one");
    if (held[static_cast<size_t>(p)]++) return fail("two slots hold position " + std::to_string(p));
  }
  if (!r.kv_mass.empty() && r.kv_mass.size() != r.kv_positions.size()) return fail("attention mass per slot drifted");
  const KvPolicy& p = r.kv_policy;
  if (!p.active()) return {};
  const KvPolicyRow& row = kv_policy_row(p.kind);
  const auto slots = static_cast<int32_t>(r.kv_positions.size());
  int32_t recent_from = computed;
  if (row.evicts_while_running) {
    if (slots > p.budget && computed > r.kv_fork_point)
      return fail("holds " + std::to_string(slots) + " slots, over its budget");
    recent_from = computed - p.recent;
  } else if (r.kv_pruned) {
    if (slots > p.budget + computed - r.num_prompt) return fail("holds more than its budget after the prompt");
    recent_from = r.num_prompt - p.window;
  }
  for (int32_t q = 0; q < computed; ++q)
    if (!held[static_cast<size_t>(q)] && q >= r.kv_inherited && (q < p.sinks || q >= recent_from))
      return fail("evicted position " + std::to_string(q) + ", a sink or in the recent window (" +
                  describe_kv_policy(p) + ", " + std::to_string(computed) + " computed, prompt " +
                  std::to_string(r.num_prompt) + ", fork " + std::to_string(r.kv_fork_point) + ")");
  return {};
}

}  // namespace gb
