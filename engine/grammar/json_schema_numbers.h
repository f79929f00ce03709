// Numbers for the JSON Schema compiler (json_schema_compiler.h): exact decimals parsed
// from JSON number text, their comparison, and GBNF for "a JSON number between
// two bounds" and "a JSON number equal to v".
//
// A bounded number is matched by a DFA over the text written out as GBNF rules
// (one rule per live state: every state can still reach an accepting end, so
// the matcher never walks into a dead end). The text form under bounds is the
// plain decimal one, no exponent: -?(0|[1-9][0-9]*)(.[0-9]+)?; with
// integer_only the fraction may only be zeros ("3.0"). Exact: a text of that
// form is accepted iff its value lies within the bounds.
// Threads: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gb {

struct Decimal {
  bool negative = false;      // never set for zero
  std::string int_digits = "0";  // no leading zeros ("0" for zero)
  std::string frac_digits;    // no trailing zeros

  bool is_integer() const { return frac_digits.empty(); }
  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
};

// JSON number text (as nlohmann::json dumps it: "12", "-1.5", "1e+308"); an
// error for more than `max_digits` digits once the exponent is applied.
Result<Decimal> parse_decimal(std::string_view text, size_t max_digits);
int compare_decimal(const Decimal& a, const Decimal& b);  // -1, 0, 1

struct NumberBounds {
  std::optional<Decimal> lo;
  bool lo_exclusive = false;
  std::optional<Decimal> hi;
  bool hi_exclusive = false;
};

// A GBNF expression for the numbers within `bounds` (helper rules appended to
// `rules`, named <prefix>-n<N>); nullopt when no number is.
std::optional<std::string> number_range_gbnf(const NumberBounds& bounds, bool integer_only, const std::string& prefix,
                                             std::string& rules);

// A GBNF expression for the texts whose value is `value`: "-1.5" also as
// "-1.50"; 2 also as "2.0"; zero also as "-0".
std::string number_literal_gbnf(const Decimal& value);

}  // namespace gb
