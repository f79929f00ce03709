// Regex text -> regex_to_gbnf (anchored and as a JSON Schema pattern inside a
// JSON string) -> compile_gbnf -> a matcher over the pattern's own text. A
// grammar the regex compiler returns must compile (a GBNF error is a compiler
// bug, except a size limit of grammar.h); nothing may crash or hang.
#include <string_view>

#include "fuzz_support.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const bool json_string : {false, true}) {
    gb::RegexGbnfOptions options;
    options.anchored = !json_string;
    options.json_string = json_string;
    auto parts = gb::regex_to_gbnf_parts(text, options);
    if (!parts.ok() || parts->expression.empty()) continue;
    const std::string gbnf = "root ::= " + parts->expression + "\n" + parts->rules;
    auto grammar = gb::compile_gbnf(gbnf);
    if (!grammar.ok()) {
      if (grammar.error().message.find("limit") != std::string::npos) continue;
      gbfuzz::fuzz_fail("the regex's GBNF does not compile: " + grammar.error().message + "\n" + gbnf);
    }
    gb::GrammarMatcher matcher(grammar.value());
    (void)matcher.accept_bytes(text);
    (void)matcher.is_accepting();
  }
  return 0;
}
