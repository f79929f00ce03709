// regex_to_gbnf and json_schema_to_gbnf by hand: accept/reject tables for the
// regex subset (raw and as JSON-string content), the errors each refused
// feature gives (naming it), and the JSON Schema compiler's errors and limits.
#include <string>
#include <vector>

#include "gb_test.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

using namespace gb;

namespace {

std::shared_ptr<const Grammar> units_compile(const std::string& gbnf) {
  GbnfError where;
  auto g = compile_gbnf(gbnf, "root", &where);
  if (!g) qFatal("%s\n%s", where.to_string().c_str(), gbnf.c_str());
  return *g;
}

bool units_accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.is_accepting();
}

struct RegexCase {
  const char* pattern;
  bool anchored;
  std::vector<std::string> accept, reject;
};

}  // namespace

GB_TEST(regex_accept_reject_table) {
  const std::vector<RegexCase> cases = {
      {"abc", true, {"abc"}, {"ab", "abcd", ""}},
      {"a|bc", true, {"a", "bc"}, {"abc", "b"}},
      {"a*b+c?", true, {"b", "aabbc", "abb"}, {"", "a", "ac", "bcc"}},
      {"[a-c]{2,3}", true, {"ab", "cba"}, {"a", "abca", "ad"}},
      {"x{2}", true, {"xx"}, {"x", "xxx"}},
      {"x{2,}", true, {"xx", "xxxxx"}, {"x"}},
      {"x{1,3}?", true, {"x", "xxx"}, {"xxxx"}},
      {"[^a-z]", true, {"A", "\xc3\xa9", "\n"}, {"a", "AB"}},
      {"\\d\\w\\s", true, {"1a ", "9_\t"}, {"a1 ", "11x"}},
      {"\\D\\W\\S", true, {"a-x"}, {"1-x", "a_x", "a- "}},
      {".", true, {"a", "\xe2\x82\xac"}, {"\n", "\r", ""}},
      {"(?:ab)+|(c)", true, {"ab", "abab", "c"}, {"abc", "a"}},
      {"(?<year>\\d{4})-\\d\\d", true, {"2024-01"}, {"24-01"}},
      {"\\x41\\u00e9\\t\\.", true, {"A\xc3\xa9\t."}, {"A\xc3\xa9\tx"}},
      {"a{,2}", true, {"a{,2}"}, {"aa"}},  // Annex B: not a quantifier
      {"^a+$", false, {"a", "aaa"}, {"ba", "ab", ""}},
      {"a+", false, {"a", "xay", "baaab"}, {"", "xyz"}},
      {"^ab", false, {"ab", "abz"}, {"zab"}},
      {"ab$", false, {"ab", "zab"}, {"abz"}},
      {"[0-9]{2,}", false, {"x12", "123"}, {"1x2"}},
      {"(a?b?)*c", true, {"c", "abc", "bac", "aabbc"}, {"ab", "cc"}},
      {"", false, {"", "anything"}, {}},
  };
  for (const RegexCase& c : cases) {
    auto gbnf = regex_to_gbnf(c.pattern, c.anchored);
    QVERIFY2(gbnf.ok(), (std::string(c.pattern) + ": " + (gbnf.ok() ? "" : gbnf.error().message)).c_str());
    auto g = units_compile(gbnf.value());
    for (const std::string& s : c.accept)
      QVERIFY2(units_accepts(g, s), (std::string(c.pattern) + " should accept '" + s + "'\n" + gbnf.value()).c_str());
    for (const std::string& s : c.reject)
      QVERIFY2(!units_accepts(g, s), (std::string(c.pattern) + " should reject '" + s + "'\n" + gbnf.value()).c_str());
  }
}

GB_TEST(regex_errors_name_the_feature) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"(a)\\1", "backreference"},      {"a(?=b)", "lookahead"},      {"(?<!a)b", "lookbehind"},
      {"\\bword", "word boundary"},     {"\\p{Letter}", "Unicode property"}, {"a^b", "anchor '^'"},
      {"(a$)", "anchor '$'"},           {"(ab", "missing ')'"},       {"ab)", "unmatched ')'"},
      {"*a", "nothing to repeat"},      {"a**", "nothing to repeat"}, {"[z-a]", "out of order"},
      {"[]", "matches nothing"},        {"a{3,2}", "min > max"},      {"a{1001}", "limit"},
      {"\\k<x>", "backreference"},      {"\\z", "unsupported escape"}, {"[abc", "missing ']'"},
      {"\\u{41}", "\\u{...}"},          {"\xff", "UTF-8"},
  };
  for (const auto& [pattern, needle] : cases) {
    auto r = regex_to_gbnf(pattern);
    QVERIFY2(!r.ok(), pattern);
    QVERIFY2(r.error().message.find(needle) != std::string::npos, (std::string(pattern) + ": " + r.error().message).c_str());
  }
  QVERIFY(!regex_to_gbnf("^$").ok());  // only the empty text: no grammar to give
}

GB_TEST(regex_json_string_mode_uses_canonical_escapes) {
  RegexGbnfOptions o;
  o.anchored = true;
  o.json_string = true;
  auto parts = regex_to_gbnf_parts("a\"[\\\\\\n]+.", o);
  QVERIFY(parts.ok());
  auto g = units_compile("root ::= " + parts->expression + "\n" + parts->rules);
  QVERIFY(units_accepts(g, "a\\\"\\\\\\nx"));      // a \" \\ \n x
  QVERIFY(units_accepts(g, "a\\\"\\n\\u0001"));    // '.' takes a control character as \u0001
  QVERIFY(!units_accepts(g, "a\"\\nx"));           // a raw quote is not string content
  QVERIFY(!units_accepts(g, "a\\u0022\\nx"));      // non-canonical spelling: refused (a tightening)
}

GB_TEST(json_schema_errors_name_keyword_and_location) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"not": {}})", "keyword 'not' at #"},
      {R"({"properties": {"a": {"format": "date"}}})", "keyword 'format' at #/properties/a"},
      {R"({"items": {"uniqueItems": true}})", "keyword 'uniqueItems' at #/items"},
      {R"({"anyOf": [{"type": "string"}, {"multipleOf": 2}]})", "keyword 'multipleOf' at #/anyOf/1"},
      {R"({"$ref": "#/$defs/missing"})", "keyword '$ref' at #/$ref: '#/$defs/missing' does not resolve"},
      {R"({"$ref": "other.json#/a"})", "remote reference"},
      {R"({"$ref": "#anchor"})", "names an anchor"},
      {R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})", "keyword 'oneOf' at #"},
      {R"({"type": "strin"})", "keyword 'type' at #: unknown type"},
      {R"({"type": "string", "pattern": "a", "maxLength": 3})", "keyword 'pattern'"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "backreference"},
      {R"({"maxLength": 1e9})", "limit"},
      {R"({"minimum": 1e999999})", "not valid JSON"},
      {R"({"$schema": "http://json-schema.org/draft-07/schema#"})", "keyword '$schema'"},
      {R"({"properties": {"a": {"$id": "x"}}})", "keyword '$id' at #/properties/a"},
      {R"(false)", "accepts no value"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "accepts no value"},
      {R"({"required": ["a"], "properties": {"a": false}, "type": "object"})", "accepts no value"},
  };
  for (const auto& [schema, needle] : cases) {
    auto r = json_schema_text_to_gbnf(schema);
    QVERIFY2(!r.ok(), schema);
    QVERIFY2(r.error().message.find(needle) != std::string::npos, (std::string(schema) + ": " + r.error().message).c_str());
  }
}

GB_TEST(json_schema_limits_bound_the_work) {
  // 2^40 anyOf combinations: refused at the rule limit, quickly.
  std::string schema = R"({"allOf": [)";
  for (int i = 0; i < 40; ++i) schema += std::string(i ? "," : "") + R"({"anyOf": [{"minLength": )" + std::to_string(i) + R"(}, {"maxLength": 1000}]})";
  schema += "]}";
  auto r = json_schema_text_to_gbnf(schema);
  QVERIFY(!r.ok());
  QVERIFY2(r.error().message.find("limit") != std::string::npos, r.error().message.c_str());
  // Nesting deeper than the limit.
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += R"({"items": )";
  deep += "true";
  for (int i = 0; i < 200; ++i) deep += "}";
  auto d = json_schema_text_to_gbnf(deep);
  QVERIFY(!d.ok());
  QVERIFY2(d.error().message.find("deeper") != std::string::npos, d.error().message.c_str());
}

GB_TEST(json_schema_shapes) {
  auto check = [](const char* schema, std::vector<std::string> accept, std::vector<std::string> reject, uint32_t ws = 20) {
    JsonSchemaOptions o;
    o.max_whitespace = ws;
    auto gbnf = json_schema_text_to_gbnf(schema, o);
    QVERIFY2(gbnf.ok(), gbnf.ok() ? "" : gbnf.error().message.c_str());
    auto g = units_compile(gbnf.value());
    for (const std::string& s : accept) QVERIFY2(units_accepts(g, s), (std::string(schema) + " should accept " + s + "\n" + gbnf.value()).c_str());
    for (const std::string& s : reject) QVERIFY2(!units_accepts(g, s), (std::string(schema) + " should reject " + s + "\n" + gbnf.value()).c_str());
  };
  // Properties in schema order, optional ones skippable, extras after them.
  check(R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},"required":["a"]})",
        {R"({"a":"x"})", R"({"b":1,"a":"x"})", R"({ "b" : 1 , "a" : "x" })", R"({"b":1,"a":"x","zz":[1,{}]})"},
        {R"({"a":"x","b":1})", R"({"b":1})", R"({"a":"x","a":"y"})", R"({"a":"x","b":2})", " {\"a\":\"x\"}"});
  // Whitespace is bounded.
  check(R"({"type":"array"})", {"[ 1 ]", "[" + std::string(20, ' ') + "]"}, {"[" + std::string(21, ' ') + "]"});
  check(R"({"type":"array"})", {"[1,2]"}, {"[ 1]"}, 0);
  // Exact integer and decimal ranges.
  check(R"({"type":"integer","minimum":-15,"exclusiveMaximum":120})", {"-15", "-0", "0", "119", "7", "119.0"},
        {"-16", "120", "1000", "05", "1.5", "1e2"});
  check(R"({"type":"number","exclusiveMinimum":-1.25,"maximum":3.5})", {"-1.2", "-1.249", "3.5", "3.50", "0", "-0.0"},
        {"-1.25", "-1.3", "3.51", "4"});
  // Strings: length in code points, escapes count as one.
  check(R"({"type":"string","minLength":2,"maxLength":3})", {"\"ab\"", "\"\xc3\xa9\xc3\xa9\"", "\"\\n\\u00e9x\"", "\"\\ud83d\\ude00a\""},
        {"\"a\"", "\"abcd\"", "\"\\ud83d\"", "\"a\nb\""});
  // const / enum: numbers by value, strings canonical.
  check(R"({"enum":[1, "a\"b", null, [1,{"k":2.5}]]})", {"1", "1.0", "\"a\\\"b\"", "null", "[1,{\"k\":2.50}]"},
        {"2", "\"a\\u0022b\"", "[1,{\"k\":2}]"});
  // Recursion through $ref.
  check(R"({"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":false}},"$ref":"#/$defs/node"})",
        {R"({})", R"({"kids":[{},{"kids":[]}]})"}, {R"({"kids":[1]})", R"({"x":1})"});
  // oneOf with a discriminator.
  check(R"({"oneOf":[{"properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k"],"type":"object"},{"properties":{"k":{"const":"b"}},"required":["k"],"type":"object"}]})",
        {R"({"k":"a","x":1})", R"({"k":"b","x":"s"})"}, {R"({"k":"c"})", R"({"k":"a","x":"s"})"});
  // The any-object grammar.
  auto any = units_compile(json_any_value_gbnf());
  QVERIFY(units_accepts(any, R"({"a":[1,2.5e-3,true,null,{"b":"\u00e9"}]})"));
  QVERIFY(!units_accepts(any, "[1]"));
}
