// Teacher-forced KV eviction cost (see kv_policy_score.h).
#include "runtime/kv_policy_score.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "backend/batch_layout.h"
#include "kv/scheduler.h"
#include "model/model.h"
#include "runtime/step_layout.h"

namespace gb {

Result<TextScore> score_tokens_with_kv_policy(const Model& model, Backend& backend, std::span<const TokenId> tokens,
                                              const KvPolicy& policy, int32_t num_prompt, const ScoreOptions& o,
                                              KvPolicyScoreStats* stats) {
  const ModelConfig& c = model.config;
  const auto n = static_cast<int32_t>(tokens.size());
  const int32_t vocab = c.vocab_size;
  const int32_t bs = o.block_size;
  if (n < 2) return make_error("score: the text has " + std::to_string(n) + " token(s); at least 2 are needed");
  for (TokenId t : tokens)
    if (t < 0 || t >= vocab) return make_error("score: token id " + std::to_string(t) + " is outside the vocabulary");
  if (!policy.active()) return make_error("score: --kv-policy full has nothing to compare with the full cache");
  if (num_prompt < 1 || num_prompt >= n)
    return make_error("score: a prompt of " + std::to_string(num_prompt) + " tokens leaves nothing to score in " +
                      std::to_string(n));
  if (!backend.supports_kv_eviction())
    return make_error("score: the " + backend.device_info().backend + " backend cannot evict KV");
  if (c.kv_release_window() > 0)
    return make_error("score: every layer of " + model.path + " slides already; KV eviction needs global layers");
  const bool window_group = c.has_window_group();
  if (c.sliding_window > 0 && !window_group)
    return make_error("score: KV eviction needs the model's sliding layers in a window group");

  // The full request holds the whole text, the pruned one its budget (a
  // snapkv answer grows past it), each with a block for copies.
  const int32_t num_blocks = ceil_div(n + 1, bs) * 2 + 4;
  SchedulerConfig sc;
  sc.num_blocks = num_blocks;
  sc.block_size = bs;
  sc.max_batch_tokens = std::max(64, 2 * std::min(num_prompt, 512));
  sc.max_seqs = 2;
  sc.max_context = n + 1;
  sc.max_positions = n + 1;
  sc.admission_watermark = 0.0f;
  int32_t num_window_blocks = 0;
  if (window_group) {
    num_window_blocks = 2 * (ceil_div(c.sliding_window, bs) + 2) + 2;
    sc.window_group = {num_window_blocks, c.sliding_window};
  }
  GB_TRY(backend.init_kv_pool({num_blocks, bs, o.k_type, o.v_type, num_window_blocks}));
  Scheduler sched(sc);
  const RequestId full_id{1}, pruned_id{2};
  for (RequestId id : {full_id, pruned_id}) {
    RequestSpec spec;
    spec.id = id;
    spec.prompt_ids.assign(tokens.begin(), tokens.begin() + num_prompt);
    spec.max_tokens = n - num_prompt;
    spec.use_prefix_cache = false;
    if (id == pruned_id) spec.kv_policy = policy;
    GB_TRY(sched.submit(std::move(spec)));
  }

  TextScore out;
  out.token_ids.assign(tokens.begin(), tokens.end());
  std::vector<float> logits;
  std::map<int32_t, std::vector<double>> full_rows, pruned_rows;  // log-probabilities waiting for the other request
  AttentionMass mass;
  KvPolicyScoreStats st;
  while (sched.has_work()) {
    const StepPlan plan = sched.schedule();
    if (plan.empty()) return make_error("score: the scheduler stalled (a bug)");
    const auto copies = std::span<const std::pair<int32_t, int32_t>>(plan.block_copies);
    const auto num_fork = static_cast<size_t>(plan.num_fork_copies);
    Status ok = backend.copy_blocks(copies.first(num_fork));
    if (ok) ok = backend.move_slots(plan.slot_moves);
    if (ok) ok = backend.copy_blocks(copies.subspan(num_fork));
    if (ok && !plan.window_block_copies.empty()) ok = backend.copy_blocks(plan.window_block_copies, KvGroup::Window);
    GB_TRY(ok);
    st.num_moved_rows += static_cast<int64_t>(plan.slot_moves.size());
    st.num_evicted += plan.stats.num_evicted_tokens;
    BatchLayout layout = to_batch_layout(plan);
    mass.seq_offset.assign(1, 0);
    bool want_mass = false;
    for (const ScheduledRequest& r : plan.requests) {
      want_mass = want_mass || r.mass_from >= 0;
      mass.seq_offset.push_back(mass.seq_offset.back() + (r.mass_from >= 0 ? r.num_kv_slots : 0));
      if (r.id == pruned_id) st.max_slots = std::max(st.max_slots, r.num_kv_slots);
    }
    if (want_mass) layout.mass = &mass;
    logits.resize(static_cast<size_t>(layout.num_logits()) * static_cast<size_t>(vocab));
    GB_TRY(backend.forward(layout, logits));
    // Each request's row predicts the text's next token, which is fed to it.
    // During the prompt the pruned request may run behind (its chunks stay
    // within the policy's window): rows wait until both have one.
    std::vector<StepToken> fed;
    int32_t row = 0;
    for (size_t i = 0; i < plan.requests.size(); ++i) {
      const ScheduledRequest& r = plan.requests[i];
      if (r.mass_from >= 0)
        sched.add_kv_mass(r.id, std::span<const float>(mass.sums).subspan(static_cast<size_t>(mass.seq_offset[i]),
                                                                         static_cast<size_t>(r.num_kv_slots)));
      if (!r.needs_logits()) continue;
      const int32_t at = r.start_pos + r.num_new_tokens;  // the position its row predicts
      std::vector<double> lp;
      log_softmax(std::span<const float>(logits.data() + static_cast<size_t>(row++) * static_cast<size_t>(vocab),
                                         static_cast<size_t>(vocab)),
                  lp);
      (r.id == full_id ? full_rows : pruned_rows).emplace(at, std::move(lp));
      fed.push_back({r.id, tokens[static_cast<size_t>(at)], false});
    }
    for (auto it = pruned_rows.begin(); it != pruned_rows.end();) {
      auto f = full_rows.find(it->first);
      if (f == full_rows.end()) {
        ++it;
        continue;
      }
      out.tokens.push_back(score_position(it->first, tokens[static_cast<size_t>(it->first)], it->second, &f->second,
                                          o.top_n));
      full_rows.erase(f);
      it = pruned_rows.erase(it);
    }
    (void)sched.on_step_done(plan, fed);
    if (Status inv = sched.check_invariants(); !inv) return make_error("score: " + inv.error().message);
  }
  if (!full_rows.empty() || !pruned_rows.empty()) return make_error("score: the two requests fell out of step (a bug)");
  summarize_scores(out);
  if (stats) *stats = st;
  return out;
}

}  // namespace gb
