// JSON -> TraceEvent, the mirror of trace_json.cpp. Every field is checked for
// presence, type and range through FieldReader, so a damaged or hand-edited
// trace gives "<type>: <field>: <problem>" rather than an exception. Unknown
// keys are ignored (forward compatibility within one schema version).
#include <cstdlib>

#include "trace/json_fields.h"
#include "trace/trace_json.h"

namespace gb {
namespace {

using nlohmann::json;
using trace_json::FieldReader;

constexpr int64_t kI32Min = INT32_MIN;
constexpr int64_t kI32Max = INT32_MAX;

RequestId request_id(FieldReader& r) { return RequestId{r.u64("request")}; }

std::optional<RequestId> optional_request(FieldReader& r, const char* key) {
  if (auto v = r.optional_u64(key)) return RequestId{*v};
  return std::nullopt;
}

uint64_t parse_hash(FieldReader& r, const char* key) {
  const std::string s = r.str(key);
  if (!r.ok()) return 0;
  bool good = s.size() == 16;
  for (char c : s) good = good && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!good) {
    r.fail(key, "expected 16 lowercase hex digits, got \"" + s + "\"");
    return 0;
  }
  return std::strtoull(s.c_str(), nullptr, 16);
}

void read_body(FieldReader& r, RequestSubmittedEvent& e) {
  e.request = request_id(r);
  e.prompt_ids = r.i32_array("prompt_ids");
  e.max_tokens = r.i32("max_tokens");
  e.priority = r.str("priority");
  e.sampler_settings = r.text("sampler_settings");
  e.parent = optional_request(r, "parent");
  e.fork_position = r.i32("fork_position");
}

void read_body(FieldReader& r, RequestAdmittedEvent& e) {
  e.request = request_id(r);
  e.num_cached_tokens = r.i32("num_cached_tokens");
  e.queue_ms = r.f64("queue_ms");
}

void read_body(FieldReader& r, PrefillChunkEvent& e) {
  e.request = request_id(r);
  e.step = r.i64("step");
  e.start_position = r.i32("start_position");
  e.num_tokens = r.i32("num_tokens");
}

void read_body(FieldReader& r, TokenSampledEvent& e) {
  e.request = request_id(r);
  e.step = r.i64("step");
  e.position = r.i32("position");
  e.index = r.i32("index");
  e.token = r.i32("token");
  e.text = r.text("text");
  const std::string origin = r.str("origin");
  if (auto o = parse_token_origin(origin)) e.origin = *o;
  else if (r.ok()) r.fail("origin", "unknown token origin \"" + origin + "\"");
  if (const json* rec = r.object("record")) {
    auto record = token_record_from_json(*rec);
    if (record.ok()) e.record = std::move(record.value());
    else r.fail_with(record.error().message);
  }
}

void read_body(FieldReader& r, RequestPreemptedEvent& e) {
  e.request = request_id(r);
  e.step = r.i64("step");
}

void read_body(FieldReader& r, RequestFinishedEvent& e) {
  e.request = request_id(r);
  e.reason = r.str("reason");
  e.num_prompt_tokens = r.i32("num_prompt_tokens");
  e.num_generated = r.i32("num_generated");
  e.num_cached_tokens = r.i32("num_cached_tokens");
  e.ttft_ms = r.f64("ttft_ms");
  e.tpot_ms = r.f64("tpot_ms");
  e.e2e_ms = r.f64("e2e_ms");
  e.text = r.text("text");
}

void read_body(FieldReader& r, StepEvent& e) {
  e.step = r.i64("step");
  e.start_ms = r.f64("start_ms");
  e.schedule_ms = r.f64("schedule_ms");
  e.forward_ms = r.f64("forward_ms");
  e.sample_ms = r.f64("sample_ms");
  e.num_seqs = r.i32("num_seqs");
  e.num_prefill_tokens = r.i32("num_prefill_tokens");
  e.num_decode_tokens = r.i32("num_decode_tokens");
  e.num_running = r.i32("num_running");
  e.num_waiting = r.i32("num_waiting");
  e.num_blocks_owned = r.i32("num_blocks_owned");
  e.num_blocks_free = r.i32("num_blocks_free");
  e.num_blocks_cached = r.i32("num_blocks_cached");
  e.num_blocks_total = r.i32("num_blocks_total");
  e.num_prefix_hit_tokens = r.i32("num_prefix_hit_tokens");
  e.num_preemptions = r.i32("num_preemptions");
}

void read_body(FieldReader& r, KvTraceEvent& e) {
  e.step = r.i64("step");
  const std::string kind = r.str("kind");
  if (auto k = parse_kv_event_kind(kind)) e.kv.kind = *k;
  else if (r.ok()) r.fail("kind", "unknown KV event kind \"" + kind + "\"");
  e.kv.block = BlockId{r.i32("block")};
  e.kv.request = optional_request(r, "request").value_or(kNoRequest);
  e.kv.other_block = BlockId{r.i32("other_block")};
  e.kv.ref_count = r.i32("ref_count");
  e.kv.hash = parse_hash(r, "hash");
}

void read_body(FieldReader& r, SpeculativeEvent& e) {
  e.request = request_id(r);
  e.step = r.i64("step");
  e.drafter = r.str("drafter");
  e.drafted = r.i32_array("drafted");
  e.q = r.f32_array("q");
  e.p = r.f32_array("p");
  e.num_accepted = r.i32("num_accepted");
  if (auto rejected = r.optional_i64("rejected", kI32Min, kI32Max)) e.rejected = static_cast<TokenId>(*rejected);
  e.next = r.i32("next");
  e.bonus = r.boolean("bonus");
  e.draft_ms = r.f64("draft_ms");
  e.verify_ms = r.f64("verify_ms");
}

void read_body(FieldReader& r, ErrorEvent& e) {
  e.request = optional_request(r, "request");
  e.message = r.text("message");
}

template <class Body>
Result<TraceEvent> read_event(const json& j, const std::string& type) {
  FieldReader r(j, "");
  TraceEvent event;
  event.seq = r.u64("seq");
  event.t_us = r.i64("t_us");
  Body body;
  read_body(r, body);
  if (!r.ok()) return make_error(type + ": " + r.error());
  event.body = std::move(body);
  return event;
}

}  // namespace

Result<TokenRecord> token_record_from_json(const json& j) {
  FieldReader r(j, "record");
  TokenRecord rec;
  if (const json* stages = r.array("stages")) {
    for (size_t i = 0; i < stages->size() && r.ok(); ++i) {
      const json& s = (*stages)[i];
      auto stage = s.is_string() ? parse_sampler_stage(s.get<std::string>()) : Result<SamplerStage>(make_error(""));
      if (stage.ok()) rec.stages.push_back(stage.value());
      else r.fail("stages[" + std::to_string(i) + "]", "expected a sampler stage name, got " + s.dump());
    }
  }
  for (int32_t a : r.i32_array("stage_active")) {
    if (a < 0 || a > 255) r.fail("stage_active", "expected values in [0, 255]");
    rec.stage_active.push_back(static_cast<uint8_t>(a));
  }
  rec.num_candidates_after_stage = r.i32_array("num_candidates_after_stage");
  rec.num_candidates_before = r.i32("num_candidates_before");
  if (const json* top = r.array("top")) {
    for (size_t i = 0; i < top->size() && r.ok(); ++i) {
      FieldReader c((*top)[i], r.field_path("top[" + std::to_string(i) + "]"));
      CandidateRecord cand;
      cand.id = c.i32("id");
      cand.logit = c.f32("logit");
      cand.prob_before = c.f32("prob_before");
      cand.prob_after_stage = c.f32_array("prob_after_stage");
      cand.removed_by_stage = c.i32("removed_by_stage");
      r.absorb(c);
      rec.top.push_back(std::move(cand));
    }
  }
  rec.entropy_before = r.f32("entropy_before");
  rec.entropy_after = r.f32("entropy_after");
  rec.chosen = r.i32("chosen");
  rec.chosen_logit = r.f32("chosen_logit");
  rec.chosen_prob_before = r.f32("chosen_prob_before");
  rec.chosen_prob = r.f32("chosen_prob");
  rec.chosen_rank = r.i32("chosen_rank");
  rec.rng_counter = r.u64("rng_counter");
  rec.draw = r.f64("draw");
  rec.xtc_draw = r.f64("xtc_draw");
  rec.xtc_fired = r.boolean("xtc_fired");
  rec.forward_ms = r.f64("forward_ms");
  rec.sample_ms = r.f64("sample_ms");
  if (!r.ok()) return make_error(r.error());
  return rec;
}

Result<TraceEvent> trace_event_from_json(const json& j) {
  if (!j.is_object()) return make_error("expected a JSON object, got " + std::string(j.type_name()));
  const auto it = j.find("type");
  if (it == j.end() || !it->is_string()) return make_error("missing string field \"type\"");
  const std::string type = it->get<std::string>();
  if (type == "request_submitted") return read_event<RequestSubmittedEvent>(j, type);
  if (type == "request_admitted") return read_event<RequestAdmittedEvent>(j, type);
  if (type == "prefill_chunk") return read_event<PrefillChunkEvent>(j, type);
  if (type == "token_sampled") return read_event<TokenSampledEvent>(j, type);
  if (type == "request_preempted") return read_event<RequestPreemptedEvent>(j, type);
  if (type == "request_finished") return read_event<RequestFinishedEvent>(j, type);
  if (type == "step") return read_event<StepEvent>(j, type);
  if (type == "kv") return read_event<KvTraceEvent>(j, type);
  if (type == "speculative") return read_event<SpeculativeEvent>(j, type);
  if (type == "error") return read_event<ErrorEvent>(j, type);
  return make_error("unknown event type \"" + type + "\"");
}

}  // namespace gb
