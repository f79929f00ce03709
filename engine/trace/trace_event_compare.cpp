// trace_events_equal: exact field-by-field comparison of two events. Reals are
// compared by their bits so a round trip that changed the last bit of a float
// (or turned -0 into 0) is caught, and NaN equals itself.
#include <bit>
#include <cstring>

#include "trace/trace_json.h"

namespace gb {
namespace {

bool same(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }
bool same(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }
bool same(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same(a[i], b[i])) return false;
  return true;
}

bool same(const TokenRecord& a, const TokenRecord& b) {
  if (a.stages != b.stages || a.stage_active != b.stage_active ||
      a.num_candidates_after_stage != b.num_candidates_after_stage ||
      a.num_candidates_before != b.num_candidates_before || a.top.size() != b.top.size())
    return false;
  for (size_t i = 0; i < a.top.size(); ++i) {
    const CandidateRecord &x = a.top[i], &y = b.top[i];
    if (x.id != y.id || !same(x.logit, y.logit) || !same(x.prob_before, y.prob_before) ||
        !same(x.prob_after_stage, y.prob_after_stage) || x.removed_by_stage != y.removed_by_stage)
      return false;
  }
  return same(a.entropy_before, b.entropy_before) && same(a.entropy_after, b.entropy_after) &&
         a.chosen == b.chosen && same(a.chosen_logit, b.chosen_logit) &&
         same(a.chosen_prob_before, b.chosen_prob_before) && same(a.chosen_prob, b.chosen_prob) &&
         a.chosen_rank == b.chosen_rank && a.rng_counter == b.rng_counter && same(a.draw, b.draw) &&
         same(a.xtc_draw, b.xtc_draw) && a.xtc_fired == b.xtc_fired && same(a.forward_ms, b.forward_ms) &&
         same(a.sample_ms, b.sample_ms);
}

bool same(const RequestSubmittedEvent& a, const RequestSubmittedEvent& b) {
  return a.request == b.request && a.prompt_ids == b.prompt_ids && a.max_tokens == b.max_tokens &&
         a.priority == b.priority && a.sampler_settings == b.sampler_settings && a.parent == b.parent &&
         a.fork_position == b.fork_position;
}
bool same(const RequestAdmittedEvent& a, const RequestAdmittedEvent& b) {
  return a.request == b.request && a.num_cached_tokens == b.num_cached_tokens && same(a.queue_ms, b.queue_ms);
}
bool same(const PrefillChunkEvent& a, const PrefillChunkEvent& b) {
  return a.request == b.request && a.step == b.step && a.start_position == b.start_position &&
         a.num_tokens == b.num_tokens;
}
bool same(const TokenSampledEvent& a, const TokenSampledEvent& b) {
  return a.request == b.request && a.step == b.step && a.position == b.position && a.index == b.index &&
         a.token == b.token && a.text == b.text && a.origin == b.origin && same(a.record, b.record);
}
bool same(const RequestPreemptedEvent& a, const RequestPreemptedEvent& b) {
  return a.request == b.request && a.step == b.step;
}
bool same(const RequestFinishedEvent& a, const RequestFinishedEvent& b) {
  return a.request == b.request && a.reason == b.reason && a.num_prompt_tokens == b.num_prompt_tokens &&
         a.num_generated == b.num_generated && a.num_cached_tokens == b.num_cached_tokens &&
         same(a.ttft_ms, b.ttft_ms) && same(a.tpot_ms, b.tpot_ms) && same(a.e2e_ms, b.e2e_ms) && a.text == b.text;
}
bool same(const StepEvent& a, const StepEvent& b) {
  return a.step == b.step && same(a.start_ms, b.start_ms) && same(a.schedule_ms, b.schedule_ms) &&
         same(a.forward_ms, b.forward_ms) && same(a.sample_ms, b.sample_ms) && a.num_seqs == b.num_seqs &&
         a.num_prefill_tokens == b.num_prefill_tokens && a.num_decode_tokens == b.num_decode_tokens &&
         a.num_running == b.num_running && a.num_waiting == b.num_waiting &&
         a.num_blocks_owned == b.num_blocks_owned && a.num_blocks_free == b.num_blocks_free &&
         a.num_blocks_cached == b.num_blocks_cached && a.num_blocks_total == b.num_blocks_total &&
         a.num_prefix_hit_tokens == b.num_prefix_hit_tokens && a.num_preemptions == b.num_preemptions;
}
bool same(const KvTraceEvent& a, const KvTraceEvent& b) {
  return a.step == b.step && a.kv.kind == b.kv.kind && a.kv.block == b.kv.block && a.kv.request == b.kv.request &&
         a.kv.other_block == b.kv.other_block && a.kv.ref_count == b.kv.ref_count && a.kv.hash == b.kv.hash;
}
bool same(const SpeculativeEvent& a, const SpeculativeEvent& b) {
  return a.request == b.request && a.step == b.step && a.drafter == b.drafter && a.drafted == b.drafted &&
         same(a.q, b.q) && same(a.p, b.p) && a.num_accepted == b.num_accepted && a.rejected == b.rejected &&
         a.next == b.next && a.bonus == b.bonus && same(a.draft_ms, b.draft_ms) && same(a.verify_ms, b.verify_ms);
}
bool same(const ErrorEvent& a, const ErrorEvent& b) { return a.request == b.request && a.message == b.message; }

}  // namespace

bool trace_events_equal(const TraceEvent& a, const TraceEvent& b) {
  if (a.seq != b.seq || a.t_us != b.t_us || a.body.index() != b.body.index()) return false;
  return std::visit(
      [&b](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        return same(x, std::get<T>(b.body));
      },
      a.body);
}

}  // namespace gb
