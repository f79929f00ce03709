// TraceEvent -> JSON. One writer per event type; the key names here are the
// documented schema (docs/trace-format.md) and the readers in
// trace_json_parse.cpp mirror them.
#include "trace/trace_json.h"

#include <cstdio>

#include "trace/json_fields.h"

namespace gb {
namespace {

using nlohmann::json;
using trace_json::put_text;
using trace_json::real;

json optional_request(const std::optional<RequestId>& id) {
  return id ? json(id->value) : json(nullptr);
}

json reals(const std::vector<float>& values) {
  json a = json::array();
  for (float v : values) a.push_back(real(static_cast<double>(v)));
  return a;
}

std::string hash_hex(uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

struct BodyWriter {
  json& j;

  void operator()(const RequestSubmittedEvent& e) const {
    j["request"] = e.request.value;
    j["prompt_ids"] = e.prompt_ids;
    j["max_tokens"] = e.max_tokens;
    j["priority"] = e.priority;
    put_text(j, "sampler_settings", e.sampler_settings);
    j["parent"] = optional_request(e.parent);
    j["fork_position"] = e.fork_position;
  }
  void operator()(const RequestAdmittedEvent& e) const {
    j["request"] = e.request.value;
    j["num_cached_tokens"] = e.num_cached_tokens;
    j["queue_ms"] = real(e.queue_ms);
  }
  void operator()(const PrefillChunkEvent& e) const {
    j["request"] = e.request.value;
    j["step"] = e.step;
    j["start_position"] = e.start_position;
    j["num_tokens"] = e.num_tokens;
  }
  void operator()(const TokenSampledEvent& e) const {
    j["request"] = e.request.value;
    j["step"] = e.step;
    j["position"] = e.position;
    j["index"] = e.index;
    j["token"] = e.token;
    put_text(j, "text", e.text);
    j["origin"] = token_origin_name(e.origin);
    j["record"] = token_record_to_json(e.record);
  }
  void operator()(const RequestPreemptedEvent& e) const {
    j["request"] = e.request.value;
    j["step"] = e.step;
  }
  void operator()(const RequestFinishedEvent& e) const {
    j["request"] = e.request.value;
    j["reason"] = e.reason;
    j["num_prompt_tokens"] = e.num_prompt_tokens;
    j["num_generated"] = e.num_generated;
    j["num_cached_tokens"] = e.num_cached_tokens;
    j["ttft_ms"] = real(e.ttft_ms);
    j["tpot_ms"] = real(e.tpot_ms);
    j["e2e_ms"] = real(e.e2e_ms);
    put_text(j, "text", e.text);
  }
  void operator()(const StepEvent& e) const {
    j["step"] = e.step;
    j["start_ms"] = real(e.start_ms);
    j["schedule_ms"] = real(e.schedule_ms);
    j["forward_ms"] = real(e.forward_ms);
    j["sample_ms"] = real(e.sample_ms);
    j["num_seqs"] = e.num_seqs;
    j["num_prefill_tokens"] = e.num_prefill_tokens;
    j["num_decode_tokens"] = e.num_decode_tokens;
    j["num_running"] = e.num_running;
    j["num_waiting"] = e.num_waiting;
    j["num_blocks_owned"] = e.num_blocks_owned;
    j["num_blocks_free"] = e.num_blocks_free;
    j["num_blocks_cached"] = e.num_blocks_cached;
    j["num_blocks_total"] = e.num_blocks_total;
    j["num_prefix_hit_tokens"] = e.num_prefix_hit_tokens;
    j["num_preemptions"] = e.num_preemptions;
  }
  void operator()(const KvTraceEvent& e) const {
    j["step"] = e.step;
    j["kind"] = kv_event_kind_name(e.kv.kind);
    j["block"] = e.kv.block.value;
    j["request"] = e.kv.request == kNoRequest ? json(nullptr) : json(e.kv.request.value);
    j["other_block"] = e.kv.other_block.value;
    j["ref_count"] = e.kv.ref_count;
    j["hash"] = hash_hex(e.kv.hash);
  }
  void operator()(const SpeculativeEvent& e) const {
    j["request"] = e.request.value;
    j["step"] = e.step;
    j["drafter"] = e.drafter;
    j["drafted"] = e.drafted;
    j["q"] = reals(e.q);
    j["p"] = reals(e.p);
    j["num_accepted"] = e.num_accepted;
    j["rejected"] = e.rejected ? json(*e.rejected) : json(nullptr);
    j["next"] = e.next;
    j["bonus"] = e.bonus;
    j["draft_ms"] = real(e.draft_ms);
    j["verify_ms"] = real(e.verify_ms);
  }
  void operator()(const ErrorEvent& e) const {
    j["request"] = optional_request(e.request);
    put_text(j, "message", e.message);
  }
};

}  // namespace

json token_record_to_json(const TokenRecord& r) {
  json j = json::object();
  json stages = json::array();
  for (SamplerStage s : r.stages) stages.push_back(std::string(sampler_stage_name(s)));
  j["stages"] = stages;
  json active = json::array();
  for (uint8_t a : r.stage_active) active.push_back(static_cast<int>(a));
  j["stage_active"] = active;
  j["num_candidates_after_stage"] = r.num_candidates_after_stage;
  j["num_candidates_before"] = r.num_candidates_before;
  json top = json::array();
  for (const CandidateRecord& c : r.top) {
    top.push_back({{"id", c.id},
                   {"logit", real(static_cast<double>(c.logit))},
                   {"prob_before", real(static_cast<double>(c.prob_before))},
                   {"prob_after_stage", reals(c.prob_after_stage)},
                   {"removed_by_stage", c.removed_by_stage}});
  }
  j["top"] = top;
  j["entropy_before"] = real(static_cast<double>(r.entropy_before));
  j["entropy_after"] = real(static_cast<double>(r.entropy_after));
  j["chosen"] = r.chosen;
  j["chosen_logit"] = real(static_cast<double>(r.chosen_logit));
  j["chosen_prob_before"] = real(static_cast<double>(r.chosen_prob_before));
  j["chosen_prob"] = real(static_cast<double>(r.chosen_prob));
  j["chosen_rank"] = r.chosen_rank;
  j["rng_counter"] = r.rng_counter;
  j["draw"] = real(r.draw);
  j["xtc_draw"] = real(r.xtc_draw);
  j["xtc_fired"] = r.xtc_fired;
  j["forward_ms"] = real(r.forward_ms);
  j["sample_ms"] = real(r.sample_ms);
  return j;
}

json to_json(const TraceEvent& event) {
  json j = json::object();
  j["type"] = trace_event_type(event.body);
  j["seq"] = event.seq;
  j["t_us"] = event.t_us;
  std::visit(BodyWriter{j}, event.body);
  return j;
}

std::optional<TokenOrigin> parse_token_origin(std::string_view name) {
  for (auto o : {TokenOrigin::Plain, TokenOrigin::Accepted, TokenOrigin::Resampled, TokenOrigin::Bonus,
                 TokenOrigin::Forced})
    if (name == token_origin_name(o)) return o;
  return std::nullopt;
}

std::optional<KvEventKind> parse_kv_event_kind(std::string_view name) {
  for (int k = 0; k <= static_cast<int>(KvEventKind::Uncached); ++k)
    if (name == kv_event_kind_name(static_cast<KvEventKind>(k))) return static_cast<KvEventKind>(k);
  return std::nullopt;
}

}  // namespace gb
