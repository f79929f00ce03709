// JSON Schema text -> json_schema_text_to_gbnf -> compile_gbnf -> a matcher
// over a few JSON texts. Whatever the schema, the compiler answers (a grammar
// or an error) within its limits, and a grammar it returns compiles (a GBNF
// error is a compiler bug, except a size limit of grammar.h).
#include <string_view>

#include "fuzz_support.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gb::JsonSchemaOptions options;
  options.max_rules = 2000;  // keeps a run short under ASan; the limit path is the same
  auto gbnf = gb::json_schema_text_to_gbnf(text, options);
  if (!gbnf.ok()) return 0;
  auto grammar = gb::compile_gbnf(gbnf.value());
  if (!grammar.ok()) {
    if (grammar.error().message.find("limit") != std::string::npos) return 0;
    gbfuzz::fuzz_fail("the compiled schema's GBNF does not compile: " + grammar.error().message + "\n" + gbnf.value());
  }
  for (std::string_view sample : {"{}", "[]", "null", "0", "-1.5", "\"ab\"", "{\"a\":[1,{\"b\":true}]}", "[\"x\",2]"}) {
    gb::GrammarMatcher matcher(grammar.value());
    (void)matcher.accept_bytes(sample);
    (void)matcher.is_accepting();
  }
  return 0;
}
