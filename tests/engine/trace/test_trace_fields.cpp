// The field lists (engine/trace/trace_fields.h) against the structs they describe.
// For every event type: set every listed member to a distinct non-default value
// through the list, then look at the struct through a structured binding (which
// does not use the list) and require every member to be non-default, so a member
// listed twice or not at all fails here; write, validate, read and compare; and
// change each member alone to show that equality sees it. The frozen trace written
// by the hand-listed code before the lists existed must still validate, read and
// re-export byte for byte (docs/trace-format.md is the contract; old files open).
#include <fstream>
#include <set>
#include <sstream>

#include "gb_test.h"
#include "trace/trace_fields.h"
#include "trace/trace_json.h"
#include "trace/trace_jsonl.h"
#include "trace/trace_schema.h"
#include "trace_test_events.h"

namespace {

using namespace gb;
using trace_fields::Form;

// Fills members with values that differ from the defaults and from each other.
struct Filler {
  int k = 1;

  template <class T>
  void fill_fields(T& value) {
    trace_fields::for_each_field<T>([&](const auto& entry) {
      using Entry = std::remove_cvref_t<decltype(entry)>;
      if constexpr (trace_fields::is_inline<Entry>) fill_fields(value.*entry.ptr);
      else fill(value.*entry.ptr, entry.form, entry.allowed);
    });
  }

  template <class M>
  void fill(M& m, Form form, std::span<const std::string_view> allowed) {
    ++k;
    if constexpr (std::is_same_v<M, bool>) m = true;
    else if constexpr (std::is_same_v<M, float>) m = static_cast<float>(k) + 0.1f;  // 0.1f: not a short decimal
    else if constexpr (std::is_same_v<M, double>) m = k + 0.1;
    else if constexpr (std::is_same_v<M, RequestId>) m = RequestId{1000u + static_cast<uint64_t>(k)};
    else if constexpr (std::is_same_v<M, BlockId>) m = BlockId{2000 + k};
    else if constexpr (std::is_same_v<M, uint64_t>) m = (uint64_t{1} << 40) + static_cast<uint64_t>(k);
    else if constexpr (std::is_integral_v<M>) m = static_cast<M>(3000 + k);
    else if constexpr (std::is_enum_v<M>) m = static_cast<M>(trace_fields::EnumInfo<M>::count - 1);
    else if constexpr (std::is_same_v<M, std::string>) {
      m = allowed.empty() ? "v" + std::to_string(k) : std::string(allowed.back());
      if (form == Form::Text) m += "\xff";  // not UTF-8: exercises `<key>_hex`
    } else if constexpr (is_optional<M>) {
      typename M::value_type v{};
      fill(v, form, allowed);
      m = v;
    } else if constexpr (std::is_same_v<M, std::vector<uint8_t>>) m = {1, static_cast<uint8_t>(k % 200 + 2)};
    else if constexpr (is_vector<M>) {
      m.resize(2);
      for (auto& x : m) fill(x, form, allowed);
    } else {
      fill_fields(m);
    }
  }
};

// Every member of `value`, seen through a structured binding, differs from a
// default-constructed one (recursing into nested structs and vector elements).
template <class M>
bool is_set(const M& m) {
  if constexpr (trace_fields::HasFields<M>) {
    M copy = m;
    return std::apply([](const auto&... member) { return (is_set(member) && ...); }, trace_fields::members_of(copy));
  } else if constexpr (is_vector<M>) {
    if (m.empty()) return false;
    for (const auto& x : m)
      if constexpr (trace_fields::HasFields<typename M::value_type>) {
        if (!is_set(x)) return false;
      }
    return true;
  } else if constexpr (is_optional<M>) {
    if constexpr (trace_fields::HasFields<typename M::value_type>) return m.has_value() && is_set(*m);
    else return m.has_value();
  } else {
    return !(m == M{});
  }
}

template <class Body>
TraceEvent filled_event() {
  Filler filler;
  Body body{};
  filler.fill_fields(body);
  return TraceEvent{77, 123456, body};
}

template <class Body>
void check_round_trip() {
  const TraceEvent event = filled_event<Body>();
  const auto& body = std::get<Body>(event.body);
  const std::string type(trace_fields::FieldsOf<Body>::type);
  QVERIFY2(is_set(body), ("a member of " + type + " is not in its field list (or listed twice)").c_str());

  const nlohmann::json j = nlohmann::json::parse(to_json(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  const Status valid = validate_trace_json_line(j);
  QVERIFY2(valid.ok(), valid.ok() ? "" : valid.error().message.c_str());
  auto back = trace_event_from_json(j);
  QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
  QVERIFY2(trace_events_equal(event, back.value()), type.c_str());
  QVERIFY(is_set(std::get<Body>(back.value().body)));

  // Each member alone set back to its default: equality must notice, and the
  // JSON must differ (so the writer saw it too).
  std::string missed;
  for (size_t which = 0; which < trace_fields::num_fields<Body>; ++which) {
    TraceEvent changed = event;
    size_t i = 0;
    std::apply([&](auto&... m) { ((i++ == which ? void(m = std::remove_cvref_t<decltype(m)>{}) : void()), ...); },
               trace_fields::members_of(std::get<Body>(changed.body)));
    if (trace_events_equal(event, changed) || to_json(event) == to_json(changed))
      missed += type + " member " + std::to_string(which) + "; ";
  }
  QVERIFY2(missed.empty(), missed.c_str());
}

}  // namespace

GB_TEST(every_listed_field_is_written_read_validated_and_compared) {
  trace_fields::for_each_alternative<TraceEventBody>([](size_t, auto alternative) {
    using Body = typename decltype(alternative)::type;
    if (!QTest::currentTestFailed()) check_round_trip<Body>();
  });
}

GB_TEST(nested_records_list_every_member) {
  Filler filler;
  TokenRecord record;
  filler.fill_fields(record);
  QVERIFY(is_set(record));
  QCOMPARE(record.top.size(), size_t{2});
  KvEvent kv;
  filler.fill_fields(kv);
  QVERIFY(is_set(kv));
  QVERIFY(!is_set(TokenRecord{}));  // the check itself can fail
}

GB_TEST(enum_names_are_distinct_and_parse_back) {
  auto check = []<class E>(std::type_identity<E>) {
    std::set<std::string> seen;
    for (size_t i = 0; i < trace_fields::EnumInfo<E>::count; ++i) {
      const E e = static_cast<E>(i);
      const std::string name(trace_fields::EnumInfo<E>::name(e));
      QVERIFY2(!name.empty() && name != "?", name.c_str());
      QVERIFY2(seen.insert(name).second, name.c_str());
      QVERIFY(trace_fields::parse_enum<E>(name) == e);
    }
    QVERIFY(!trace_fields::parse_enum<E>("no-such-name").has_value());
  };
  check(std::type_identity<TokenOrigin>{});
  check(std::type_identity<KvEventKind>{});
  check(std::type_identity<SamplerStage>{});
}

GB_TEST(trace_written_before_the_field_lists_still_reads_and_reexports_the_same) {
  const std::string path = std::string(GLASSBOX_TRACE_DATA_DIR) + "/every_event_v1.jsonl";
  const std::string text = gbtest::read_text(path);
  QVERIFY2(!text.empty(), path.c_str());
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const Status s = validate_trace_json_line(nlohmann::json::parse(line));
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
  }
  auto file = parse_trace_jsonl(text, path);
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  // Event types added after the file was written (same schema version:
  // adding an event type is allowed) are not in it.
  auto expected = gbtest::every_event_type();
  std::erase_if(expected, [](const TraceEvent& e) {
    return std::holds_alternative<KvEvictionEvent>(e.body) || std::holds_alternative<KvShadowEvent>(e.body);
  });
  QCOMPARE(file.value().events.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) QVERIFY(trace_events_equal(expected[i], file.value().events[i]));
  // Re-exported, the lines are the same up to how floats are spelt: this file
  // predates the shortest float form (0.1f was "0.10000000149011612", now "0.1").
  std::istringstream old_lines(text), new_lines(format_trace_jsonl(file.value().header, file.value().events));
  int count = 0;
  for (std::string a, b; std::getline(old_lines, a);) {
    QVERIFY(static_cast<bool>(std::getline(new_lines, b)));
    QVERIFY2(gbtest::same_json_line(a, b), (a + "\n" + b).c_str());
    ++count;
  }
  QCOMPARE(count, static_cast<int>(expected.size()) + 1);
  std::string extra;
  QVERIFY(!std::getline(new_lines, extra));
}
