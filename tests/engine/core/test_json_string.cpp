// append_json_string (engine/core/json_string.h) against independent writers:
// without ensure_ascii it must give nlohmann's dump bytes (what the trace files
// held before the direct writer) for every byte value and random UTF-8 text;
// with ensure_ascii, Python's json.dumps output for known strings (the tojson
// filter of chat templates); a multi-byte sequence cut short at the end of the
// text must not read past it.
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/json_string.h"
#include "gb_test.h"

namespace {

std::string quoted(std::string_view s, bool ensure_ascii) {
  std::string out = "x";  // appends, never replaces
  gb::append_json_string(out, s, ensure_ascii);
  return out.substr(1);
}

}  // namespace

GB_TEST(json_string_equals_nlohmann_dump_for_utf8_text) {
  // Every ASCII byte alone, then random strings of ASCII, controls and
  // multi-byte code points.
  for (int c = 0; c < 0x80; ++c) {
    const std::string s(1, static_cast<char>(c));
    QCOMPARE(quoted(s, false), nlohmann::json(s).dump());
  }
  std::mt19937 rng(7);
  const std::string pieces[] = {"a", "\"", "\\", "\n", "\t", "\x01", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
                                "\xf0\x9f\x98\x80", " ", "/", "\r", "\b", "\f"};
  for (int round = 0; round < 500; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) s += pieces[rng() % std::size(pieces)];
    QCOMPARE(quoted(s, false), nlohmann::json(s).dump());
  }
}

GB_TEST(json_string_ensure_ascii_matches_python_json_dumps) {
  // json.dumps(s) with Python's default ensure_ascii=True.
  QCOMPARE(quoted("caf\xc3\xa9", true), std::string(R"("caf\u00e9")"));
  QCOMPARE(quoted("\xe2\x82\xac 5", true), std::string(R"("\u20ac 5")"));
  QCOMPARE(quoted("\xf0\x9f\x98\x80!", true), std::string(R"("\ud83d\ude00!")"));
  QCOMPARE(quoted("a\"b\\c\nd\x01", true), std::string(R"("a\"b\\c\nd\u0001")"));
  QCOMPARE(quoted("caf\xc3\xa9", false), std::string("\"caf\xc3\xa9\""));
  // Cut short: the lead byte of a 3-byte sequence with one continuation byte.
  const std::string cut = quoted("ab\xe2\x82", true);
  QVERIFY(cut.rfind("\"ab\\u", 0) == 0);
  QCOMPARE(cut.back(), '"');
}
