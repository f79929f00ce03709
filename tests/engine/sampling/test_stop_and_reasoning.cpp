// StopStringMatcher (stop strings across token boundaries, never a partial stop
// string in the output) and ReasoningBudget (forcing the close marker). Worked
// examples spelled out by hand, plus a property test against a simple model:
// "the output is the text up to the first stop occurrence".
#include <string>
#include <vector>

#include "gb_test.h"
#include "sampling/reasoning_budget.h"
#include "sampling/sampler_rng.h"
#include "sampling/stop_string_matcher.h"

using namespace gb;

GB_TEST(stop_string_split_across_tokens) {
  StopStringMatcher m({"World"});
  StopMatch a = m.feed("Hello, Wor");  // "Wor" could become "World": held back
  QCOMPARE(a.text, std::string("Hello, "));
  QVERIFY(!a.stopped);
  QCOMPARE(m.held(), std::string("Wor"));
  StopMatch b = m.feed("ld!");  // completes the stop string; "!" after it is dropped
  QCOMPARE(b.text, std::string(""));
  QVERIFY(b.stopped);
  QCOMPARE(b.stop_index, 0);
  StopMatch c = m.feed("more");  // after a stop nothing more comes out
  QVERIFY(c.stopped);
  QCOMPARE(c.text, std::string(""));
  QCOMPARE(m.flush(), std::string(""));
}

GB_TEST(stop_string_false_alarm_is_released) {
  StopStringMatcher m({"World"});
  QCOMPARE(m.feed("Hello, Wor").text, std::string("Hello, "));
  StopMatch b = m.feed("m");  // "Worm" is no prefix of "World": all released
  QCOMPARE(b.text, std::string("Worm"));
  QVERIFY(!b.stopped);
  QCOMPARE(m.feed("Hi Wo").text, std::string("Hi "));
  QCOMPARE(m.flush(), std::string("Wo"));  // generation ended another way
}

GB_TEST(stop_string_overlapping_prefixes) {
  StopMatch r;
  StopStringMatcher m({"abc"});
  QCOMPARE(m.feed("xab").text, std::string("x"));
  r = m.feed("ab");  // pending "abab": first "ab" can no longer start "abc"
  QCOMPARE(r.text, std::string("ab"));
  QCOMPARE(m.held(), std::string("ab"));
  r = m.feed("c");
  QVERIFY(r.stopped);
  QCOMPARE(r.text, std::string(""));
}

GB_TEST(stop_string_several_and_one_char_chunks) {
  StopStringMatcher m({"\nUser:", "###"});
  QCOMPARE(m.feed("answer\nUs").text, std::string("answer"));
  QCOMPARE(m.feed("e").text, std::string(""));
  StopMatch r = m.feed("r: hi");
  QVERIFY(r.stopped);
  QCOMPARE(r.stop_index, 0);
  QCOMPARE(r.text, std::string(""));
  // Earliest start wins: in "abc", "ab" starts at 0 and "bc" at 1.
  StopStringMatcher e({"bc", "ab"});
  StopMatch s = e.feed("xabc");
  QVERIFY(s.stopped);
  QCOMPARE(s.stop_index, 1);
  QCOMPARE(s.text, std::string("x"));
  // One byte at a time.
  StopStringMatcher one({"END"});
  std::string out;
  bool stopped = false;
  for (char ch : std::string("the ENEND tail")) {
    StopMatch x = one.feed(std::string(1, ch));
    out += x.text;
    stopped = stopped || x.stopped;
  }
  QVERIFY(stopped);
  QCOMPARE(out, std::string("the EN"));
}

GB_TEST(stop_string_property_random_chunks) {
  // Simple model: output == text before the first occurrence of any stop string
  // (earliest start), or the whole text plus flush() if none occurs. Texts over a
  // 3-letter alphabet make near-misses frequent.
  const std::vector<std::string> stops = {"aba", "cc", "bab"};
  SamplerRng rng(99);
  uint64_t k = 0;
  auto next = [&](int n) { return static_cast<int>(rng.uniform_at(k++, 0) * n); };
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int len = 1 + next(30);
    for (int i = 0; i < len; ++i) text += static_cast<char>('a' + next(3));
    size_t first = std::string::npos;
    for (const auto& s : stops) first = std::min(first, text.find(s));
    const std::string expected = first == std::string::npos ? text : text.substr(0, first);

    StopStringMatcher m(stops);
    std::string out;
    bool stopped = false;
    for (size_t pos = 0; pos < text.size() && !stopped;) {
      const size_t n = std::min(text.size() - pos, static_cast<size_t>(1 + next(4)));
      StopMatch r = m.feed(std::string_view(text).substr(pos, n));
      out += r.text;
      stopped = r.stopped;
      for (const auto& s : stops) QVERIFY2(out.find(s) == std::string::npos, text.c_str());
      pos += n;
    }
    if (!stopped) out += m.flush();
    QVERIFY2(out == expected, (text + " -> " + out + ", expected " + expected).c_str());
    QCOMPARE(stopped, first != std::string::npos);
  }
}

GB_TEST(reasoning_budget_forces_close_marker) {
  // Budget 3 tokens; close marker "</think>" tokenizes (say) to ids 90, 91.
  ReasoningBudgetSettings rs;
  rs.max_tokens = 3;
  ReasoningBudget b(rs, {90, 91});
  b.observe(10, "<thi");
  QVERIFY(!b.in_reasoning());
  b.observe(11, "nk>");  // open marker complete (split across two tokens)
  QVERIFY(b.in_reasoning());
  QVERIFY(b.forced_next().empty());
  b.observe(12, "a");
  b.observe(13, "b");
  QVERIFY(b.forced_next().empty());  // 2 of 3 used
  b.observe(14, "c");                 // 3 of 3: the close marker is due
  QCOMPARE(b.forced_next().size(), size_t{2});
  QCOMPARE(b.forced_next()[0], 90);
  b.observe(90, "</th");
  QCOMPARE(b.forced_next().size(), size_t{1});
  QCOMPARE(b.forced_next()[0], 91);
  b.observe(91, "ink>");
  QVERIFY(!b.in_reasoning());
  QVERIFY(b.forced_next().empty());
  for (int i = 0; i < 10; ++i) b.observe(20, "x");  // answer text: never forced
  QVERIFY(b.forced_next().empty());
}

GB_TEST(reasoning_budget_model_closes_itself_and_zero_budget) {
  ReasoningBudgetSettings rs;
  rs.max_tokens = 5;
  ReasoningBudget b(rs, {90, 91});
  b.observe(1, "<think>");
  b.observe(2, "short");
  b.observe(3, "</think>");  // closed within budget
  QVERIFY(!b.in_reasoning());
  for (int i = 0; i < 10; ++i) b.observe(4, "y");
  QVERIFY(b.forced_next().empty());

  rs.max_tokens = 0;  // close right after the open marker
  ReasoningBudget z(rs, {90, 91});
  z.observe(1, "ok <think>");
  QCOMPARE(z.forced_next().size(), size_t{2});

  rs.max_tokens = -1;  // unlimited
  ReasoningBudget u(rs, {90, 91});
  u.observe(1, "<think>");
  for (int i = 0; i < 1000; ++i) u.observe(2, "z");
  QVERIFY(u.forced_next().empty());
}

GB_TEST(reasoning_budget_stateless_form) {
  ReasoningBudgetSettings rs;
  rs.max_tokens = 3;
  ReasoningBudget b(rs, {90, 91});
  QCOMPARE(b.forced_for("x <think> blah", 3), (std::vector<TokenId>{90, 91}));
  QVERIFY(b.forced_for("x <think> blah", 2).empty());          // within budget
  QVERIFY(b.forced_for("<think>a</think> answer", 9).empty());  // already closed
  QVERIFY(b.forced_for("no thinking here", 9).empty());
  QCOMPARE(b.forced_for("<think>a</think><think>again", 3), (std::vector<TokenId>{90, 91}));
}
