// JSON form of trace events: every event type survives to_json -> dump -> parse
// -> from_json bit for bit; floats of every class (random bit patterns, -0,
// denormals, NaN, infinities) come back with the same bits; text that is not
// UTF-8 comes back byte-exact; the strict validator accepts every line we write
// and rejects missing, extra, mistyped and out-of-range fields; the reader's
// errors name the field. Floats are written in their shortest round-trip form.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "gb_test.h"
#include "trace/json_fields.h"
#include "trace/trace_json.h"
#include "trace/trace_schema.h"
#include "trace_test_events.h"

namespace {

using nlohmann::json;

// Through text, as a file would carry it.
json through_text(const json& j) { return json::parse(j.dump(-1, ' ', false, json::error_handler_t::strict)); }

}  // namespace

GB_TEST(every_event_type_round_trips_exactly) {
  const auto events = gbtest::every_event_type();
  QCOMPARE(events.size(), size_t{17});
  std::vector<std::string> types_seen;
  for (const gb::TraceEvent& e : events) {
    const json j = through_text(gb::to_json(e));
    types_seen.push_back(j["type"].get<std::string>());
    auto back = gb::trace_event_from_json(j);
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
    QVERIFY2(gb::trace_events_equal(e, back.value()), j.dump().c_str());
  }
  for (const char* t : {"request_submitted", "request_admitted", "prefill_chunk", "token_sampled", "request_preempted",
                        "request_finished", "step", "kv", "speculative", "error"})
    QVERIFY2(std::find(types_seen.begin(), types_seen.end(), t) != types_seen.end(), t);
}

// The optional records (a format's grammar, a mixture's routing) round trip,
// are left out of the JSON when absent (so older traces stay as they were),
// and pass the strict schema.
GB_TEST(optional_records_round_trip_and_are_omitted_when_absent) {
  gb::TraceEvent e = gbtest::every_event_type()[4];
  auto& rec = std::get<gb::TokenSampledEvent>(e.body).record;
  const json plain = through_text(gb::to_json(e));
  QVERIFY(!plain["record"].contains("routing") && !plain["record"].contains("grammar"));
  rec.routing = gb::RoutingRecord{2, {6, 1, 0, 3}, {0.75f, 0.25f, 1.0f / 3.0f, 2.0f / 3.0f}};
  rec.grammar = gb::GrammarRecord{0.5f, 3, false, "root: '{' _"};
  const json j = through_text(gb::to_json(e));
  QCOMPARE(j["record"]["routing"]["experts"], json({6, 1, 0, 3}));
  QVERIFY2(gb::validate_trace_json_line(j).ok(), j.dump().c_str());
  auto back = gb::trace_event_from_json(j);
  QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
  QVERIFY(gb::trace_events_equal(e, back.value()));
  gb::TraceEvent other = e;
  std::get<gb::TokenSampledEvent>(other.body).record.routing->experts[3] = 4;
  QVERIFY(!gb::trace_events_equal(e, other));
}

GB_TEST(equality_helper_notices_a_one_bit_change) {
  // Guards the round-trip test above: trace_events_equal must not be lenient.
  auto events = gbtest::every_event_type();
  gb::TraceEvent changed = events[4];
  auto& rec = std::get<gb::TokenSampledEvent>(changed.body).record;
  rec.top[0].logit = std::nextafter(rec.top[0].logit, 1.0f);
  QVERIFY(!gb::trace_events_equal(events[4], changed));
  gb::TraceEvent zero = events[4];
  std::get<gb::TokenSampledEvent>(zero.body).record.top[0].prob_after_stage[2] = 0.0f;  // was -0
  QVERIFY(!gb::trace_events_equal(events[4], zero));
}

GB_TEST(random_float_bit_patterns_round_trip) {
  std::mt19937 rng(1234);
  gb::SpeculativeEvent spec;
  spec.request = gb::RequestId{3};
  // Every non-NaN bit pattern must survive; NaN is written as "nan" and reads back
  // as the default quiet NaN (payload and sign are not kept, see the format doc).
  while (spec.q.size() < 20000) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(f)) spec.q.push_back(f);
  }
  spec.q.push_back(std::numeric_limits<float>::quiet_NaN());
  for (int i = 0; i < 2000; ++i) spec.p.push_back(static_cast<float>(i) / 2000.0f);
  gb::StepEvent step;
  step.start_ms = std::bit_cast<double>((uint64_t{rng()} << 32) | rng());
  if (std::isnan(step.start_ms)) step.start_ms = 1.0 / 3.0;
  step.schedule_ms = std::numeric_limits<double>::max();
  step.forward_ms = -0.0;
  step.sample_ms = std::numeric_limits<double>::denorm_min();
  for (gb::TraceEventBody body : {gb::TraceEventBody{spec}, gb::TraceEventBody{step}}) {
    const gb::TraceEvent e{7, 99, body};
    auto back = gb::trace_event_from_json(through_text(gb::to_json(e)));
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
    QVERIFY(gb::trace_events_equal(e, back.value()));
  }
  gb::StepEvent odd_nan;
  odd_nan.forward_ms = -std::numeric_limits<double>::quiet_NaN();
  auto back = gb::trace_event_from_json(through_text(gb::to_json(gb::TraceEvent{0, 0, odd_nan})));
  QVERIFY(back.ok() && std::isnan(std::get<gb::StepEvent>(back.value().body).forward_ms));
}

// The significant digits of a JSON number ("0.00125" -> 3, "16777216.0" -> 8).
int significant_digits(const std::string& number) {
  std::string d;
  for (char c : number) {
    if (c == 'e') break;
    if (c >= '0' && c <= '9') d += c;
  }
  const size_t first = d.find_first_not_of('0'), last = d.find_last_not_of('0');
  return first == std::string::npos ? 1 : static_cast<int>(last - first + 1);
}

float read_back(const std::string& text) { return static_cast<float>(std::strtod(text.c_str(), nullptr)); }

std::string written(float f) {
  char buf[gb::trace_json::kMaxFloatChars];
  return std::string(buf, gb::trace_json::write_float(buf, f));
}

// A float is written with the fewest digits that read back (through double,
// as nlohmann and every JSON reader parse) as the same bits, laid out as
// nlohmann lays out a double, and the JSON tree's number dumps as the same text.
GB_TEST(floats_are_written_in_their_shortest_form) {
  const std::pair<float, const char*> known[] = {
      {0.1f, "0.1"}, {1.0f, "1.0"}, {-0.0f, "-0.0"}, {0.0f, "0.0"}, {0.5f, "0.5"}, {-2.75f, "-2.75"},
      {1.5e-5f, "1.5e-05"}, {0.0001f, "0.0001"}, {0.00012345f, "0.00012345"}, {1e20f, "1e+20"},
      {16777216.0f, "16777216.0"}, {123456792.0f, "123456790.0"}, {1e15f, "1e+15"}, {1e16f, "1e+16"},
      {3.4028235e38f, "3.4028235e+38"}, {-1.17549435e-38f, "-1.1754944e-38"}, {1e-45f, "1e-45"},
      {0.333333343f, "0.33333334"}, {100.0f, "100.0"}, {12.5f, "12.5"},
      // Its shortest digits, 7.038531e-26, name a double halfway between two
      // floats that narrows to the other one: written widened instead.
      {std::bit_cast<float>(0x15ae43fdu), "7.038530691851209e-26"},
      {std::bit_cast<float>(0x95ae43fdu), "-7.038530691851209e-26"}};
  for (const auto& [f, text] : known) {
    QCOMPARE(written(f), std::string(text));
    QVERIFY2(std::bit_cast<uint32_t>(read_back(text)) == std::bit_cast<uint32_t>(f), text);
    QCOMPARE(gb::trace_json::real(f).dump(), std::string(text));
  }
  std::mt19937 rng(20261202);
  int checked = 0;
  while (checked < 200000) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isfinite(f)) continue;
    ++checked;
    const std::string t = written(f);
    QVERIFY2(std::bit_cast<uint32_t>(read_back(t)) == std::bit_cast<uint32_t>(f), t.c_str());
    // One digit fewer, rounded to nearest by printf, does not read back as f.
    const int k = significant_digits(t);
    if (k > 1) {
      char shorter[64];
      std::snprintf(shorter, sizeof shorter, "%.*e", k - 2, static_cast<double>(f));
      QVERIFY2(read_back(shorter) != f, (t + " could be " + shorter).c_str());
    }
    // The tree's number is the double those digits name (nlohmann's dump may
    // print it with more digits: Grisu2 is not always shortest).
    QCOMPARE(gb::trace_json::real(f).get<double>(), std::strtod(t.c_str(), nullptr));
  }
}

GB_TEST(text_that_is_not_utf8_is_written_valid_and_read_back_exact) {
  const auto events = gbtest::every_event_type();
  const json j = gb::to_json(events[4]);  // token text ends in half a character
  QCOMPARE(j["text"].get<std::string>(), std::string("caf\xc3\xa9 \xef\xbf\xbd"));
  QCOMPARE(j["text_hex"].get<std::string>(), std::string("636166c3a920e296"));
  const json valid = gb::to_json(events[0]);
  QVERIFY(!valid.contains("sampler_settings_hex"));  // valid UTF-8 carries no hex twin
  // strict dumping would throw on invalid UTF-8; it must not for anything we write
  for (const gb::TraceEvent& e : events) (void)gb::to_json(e).dump(-1, ' ', false, json::error_handler_t::strict);
}

GB_TEST(optional_ids_are_null_when_absent) {
  const auto events = gbtest::every_event_type();
  QVERIFY(gb::to_json(events[0])["parent"].is_null());
  QCOMPARE(gb::to_json(events[1])["parent"].get<uint64_t>(), uint64_t{1});
  QVERIFY(gb::to_json(events[9])["request"].is_null());  // pool-internal eviction
  QCOMPARE(gb::to_json(events[9])["hash"].get<std::string>(), std::string("ffffffffffffffff"));
  QCOMPARE(gb::to_json(events[8])["hash"].get<std::string>(), std::string("0123456789abcdef"));
  QVERIFY(gb::to_json(events[11])["rejected"].is_null());
  QCOMPARE(gb::to_json(events[4])["record"]["top"][1]["logit"].get<std::string>(), std::string("-inf"));
}

GB_TEST(validator_accepts_every_written_event) {
  for (const gb::TraceEvent& e : gbtest::every_event_type()) {
    const gb::Status s = gb::validate_trace_json_line(through_text(gb::to_json(e)));
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
  }
}

GB_TEST(validator_rejects_schema_violations) {
  const auto events = gbtest::every_event_type();
  struct Case {
    size_t event;
    void (*mutate)(json&);
    const char* expect;
  };
  const Case cases[] = {
      {7, [](json& j) { j.erase("forward_ms"); }, "step: forward_ms: missing field"},
      {7, [](json& j) { j["num_seqs"] = "2"; }, "step: num_seqs: expected a 32-bit integer"},
      {7, [](json& j) { j["num_seqs"] = 1ll << 40; }, "step: num_seqs: expected a 32-bit integer"},
      {7, [](json& j) { j["extra"] = 1; }, "step: extra: field not in the documented schema"},
      {0, [](json& j) { j["priority"] = "urgent"; }, "request_submitted: priority: unexpected value"},
      {0, [](json& j) { j["seq"] = -1; }, "request_submitted: seq: expected an integer >= 0"},
      {4, [](json& j) { j["record"]["top"][1]["logit"] = "-infinity"; }, "record.top[1].logit: expected a number"},
      {4, [](json& j) { j["record"]["stages"][0] = "nucleus"; }, "record.stages: unexpected element"},
      {4, [](json& j) { j["text_hex"] = "ABC"; }, "token_sampled: text_hex: expected lowercase hex"},
      {8, [](json& j) { j["hash"] = "123"; }, "kv: hash: expected 16 lowercase hex digits"},
      {8, [](json& j) { j["kind"] = "moved"; }, "kv: kind: unexpected value"},
      {11, [](json& j) { j["bonus"] = 1; }, "speculative: bonus: expected true or false"},
  };
  for (const Case& c : cases) {
    json j = gb::to_json(events[c.event]);
    c.mutate(j);
    const gb::Status s = gb::validate_trace_json_line(j);
    QVERIFY2(!s.ok(), c.expect);
    QVERIFY2(s.error().message.find(c.expect) != std::string::npos, s.error().message.c_str());
  }
  QVERIFY(!gb::validate_trace_json_line(json{{"type", "warp"}, {"seq", 0}, {"t_us", 0}}).ok());
  QVERIFY(!gb::validate_trace_json_line(json::array()).ok());
}

GB_TEST(reader_errors_name_the_field) {
  const auto events = gbtest::every_event_type();
  struct Case {
    size_t event;
    void (*mutate)(json&);
    const char* expect;
  };
  const Case cases[] = {
      {2, [](json& j) { j.erase("queue_ms"); }, "request_admitted: queue_ms: missing field"},
      {3, [](json& j) { j["num_tokens"] = 3.5; }, "prefill_chunk: num_tokens: expected an integer"},
      {4, [](json& j) { j["record"]["top"][0]["prob_before"] = true; }, "token_sampled: record.top[0].prob_before"},
      {4, [](json& j) { j["origin"] = "magic"; }, "token_sampled: origin: unknown token origin \"magic\""},
      {4, [](json& j) { j["record"]["chosen_prob"] = 1e300; }, "record.chosen_prob: number out of range"},
      // The first double that would narrow to +inf (halfway above FLT_MAX), and an array element.
      {4, [](json& j) { j["record"]["chosen_prob"] = -(2.0 - 0x1p-24) * 0x1p127; },
       "record.chosen_prob: number out of range"},
      {10, [](json& j) { j["q"][0] = 1e39; }, "speculative: q[0]: expected a number in 32-bit float range"},
      {6, [](json& j) { j["text_hex"] = "zz"; }, "request_finished: text_hex"},
      {8, [](json& j) { j["kind"] = "moved"; }, "kv: kind: unknown KV event kind"},
      {10, [](json& j) { j["q"][1] = "x"; }, "speculative: q[1]: expected a number"},
      {0, [](json& j) { j["type"] = "warp"; }, "unknown event type \"warp\""},
  };
  for (const Case& c : cases) {
    json j = gb::to_json(events[c.event]);
    c.mutate(j);
    auto r = gb::trace_event_from_json(j);
    QVERIFY2(!r.ok(), c.expect);
    QVERIFY2(r.error().message.find(c.expect) != std::string::npos, r.error().message.c_str());
  }
}

// Just below the overflow midpoint a number narrows to FLT_MAX, as the
// shortest form of FLT_MAX (3.4028235e+38, above FLT_MAX as a double) must.
GB_TEST(reader_accepts_every_number_that_narrows_to_a_finite_float) {
  const auto events = gbtest::every_event_type();
  for (double v : {3.4028235e38, std::nextafter((2.0 - 0x1p-24) * 0x1p127, 0.0), -3.4028235e38}) {
    json j = gb::to_json(events[4]);
    j["record"]["chosen_prob"] = v;
    auto r = gb::trace_event_from_json(j);
    QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
    const float read = std::get<gb::TokenSampledEvent>(r.value().body).record.chosen_prob;
    QCOMPARE(std::fabs(read), std::numeric_limits<float>::max());
  }
}

GB_TEST(reader_ignores_unknown_fields) {
  // Compatibility rule: a newer writer of the same schema version may add fields.
  const auto events = gbtest::every_event_type();
  json j = gb::to_json(events[7]);
  j["num_experts_active"] = 8;
  auto r = gb::trace_event_from_json(j);
  QVERIFY(r.ok());
  QVERIFY(gb::trace_events_equal(events[7], r.value()));
}
