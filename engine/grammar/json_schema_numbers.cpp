// Decimals and number grammars for the JSON Schema compiler; see json_schema_numbers.h.
#include "grammar/json_schema_numbers.h"

#include <algorithm>
#include <bitset>
#include <map>
#include <tuple>
#include <vector>

#include "grammar/code_point_set.h"
#include "grammar/json_schema.h"

namespace gb {

Result<Decimal> parse_decimal(std::string_view text, size_t max_digits) {
  Decimal d;
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') negative = true, ++i;
  std::string digits;  // mantissa digits without the point
  long long point = -1;  // digits before the point
  for (; i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (point >= 0) return make_error("bad number '" + std::string(text) + "'");
      point = static_cast<long long>(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (digits.empty()) return make_error("bad number '" + std::string(text) + "'");
  if (point < 0) point = static_cast<long long>(digits.size());
  long long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) exp_negative = text[i] == '-', ++i;
    if (i >= text.size()) return make_error("bad number '" + std::string(text) + "'");
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      exponent = std::min<long long>(exponent * 10 + (text[i] - '0'), 1'000'000'000);
    }
    if (exp_negative) exponent = -exponent;
  }
  if (i != text.size()) return make_error("bad number '" + std::string(text) + "'");
  point += exponent;
  // Place the point: pad with zeros on either side.
  const long long n = static_cast<long long>(digits.size());
  if (point > n + static_cast<long long>(max_digits) || point < -static_cast<long long>(max_digits))
    return make_error("number '" + std::string(text) + "' has more than " + std::to_string(max_digits) + " digits");
  std::string int_part, frac_part;
  if (point <= 0) {
    frac_part = std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (point >= n) {
    int_part = digits + std::string(static_cast<size_t>(point - n), '0');
  } else {
    int_part = digits.substr(0, static_cast<size_t>(point));
    frac_part = digits.substr(static_cast<size_t>(point));
  }
  int_part.erase(0, std::min(int_part.find_first_not_of('0'), int_part.size()));
  while (!frac_part.empty() && frac_part.back() == '0') frac_part.pop_back();
  if (int_part.size() + frac_part.size() > max_digits)
    return make_error("number '" + std::string(text) + "' has more than " + std::to_string(max_digits) + " digits");
  d.int_digits = int_part.empty() ? "0" : int_part;
  d.frac_digits = frac_part;
  d.negative = negative && !d.is_zero();
  return d;
}

namespace {

// Compares magnitudes.
int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.int_digits.size() != b.int_digits.size()) return a.int_digits.size() < b.int_digits.size() ? -1 : 1;
  if (const int c = a.int_digits.compare(b.int_digits); c != 0) return c < 0 ? -1 : 1;
  const int c = a.frac_digits.compare(b.frac_digits);  // no trailing zeros: plain string order is numeric order
  return c == 0 ? 0 : (c < 0 ? -1 : 1);
}

// Where a number text stands against one bound B, read left to right.
// rel: the digits so far against B's (-1 / 0 / +1); decided: the comparison
// no longer depends on what follows (then rel is final).
struct BoundCursor {
  int pos = 0;        // digits of the current part read (capped)
  int rel = 0;
  bool decided = false;
  auto tie() const { return std::make_tuple(pos, rel, decided); }
};

enum class NumPhase : uint8_t { Start, Zero, Int, Dot, Frac };

struct NumState {
  NumPhase phase = NumPhase::Start;
  BoundCursor lo, hi;
  int num_int_digits = 0;   // digits before the point (capped: see MagnitudeDfa)
  int num_frac_digits = 0;  // digits after it
  auto tie() const {
    return std::make_tuple(static_cast<int>(phase), lo.tie(), hi.tie(), num_int_digits, num_frac_digits);
  }
  bool operator<(const NumState& o) const { return tie() < o.tie(); }
};

// The number-text DFA for magnitudes in [lo, hi] (either side optional).
class MagnitudeDfa {
 public:
  // Digit runs are bounded so that a sampled number cannot loop: at most
  // kJsonNumberMaxIntDigits before the point and kJsonNumberMaxFracDigits after
  // it (more when a bound itself has more).
  MagnitudeDfa(const Decimal* lo, bool lo_excl, const Decimal* hi, bool hi_excl, bool integer_only)
      : lo_(lo), hi_(hi), lo_excl_(lo_excl), hi_excl_(hi_excl), integer_only_(integer_only) {
    for (const Decimal* b : {lo, hi}) {
      if (!b) continue;
      max_int_ = std::max(max_int_, static_cast<int>(b->int_digits.size()));
      max_frac_ = std::max(max_frac_, static_cast<int>(b->frac_digits.size()));
    }
  }

  // Advances on one byte; false if the text cannot continue that way.
  bool step(const NumState& s, char c, NumState& out) const {
    out = s;
    const bool digit = c >= '0' && c <= '9';
    switch (s.phase) {
      case NumPhase::Start:
        if (!digit) return false;
        out.phase = c == '0' ? NumPhase::Zero : NumPhase::Int;
        out.num_int_digits = 1;
        int_digit(out.lo, lo_, c);
        int_digit(out.hi, hi_, c);
        return true;
      case NumPhase::Int:
        if (digit) {
          if (++out.num_int_digits > max_int_) return false;
          int_digit(out.lo, lo_, c);
          int_digit(out.hi, hi_, c);
          return true;
        }
        [[fallthrough]];
      case NumPhase::Zero:
        if (c != '.') return false;
        out.phase = NumPhase::Dot;
        end_int(out.lo, lo_);
        end_int(out.hi, hi_);
        return true;
      case NumPhase::Dot:
      case NumPhase::Frac:
        if (!digit || (integer_only_ && c != '0')) return false;
        if (++out.num_frac_digits > max_frac_) return false;
        out.phase = NumPhase::Frac;
        frac_digit(out.lo, lo_, c);
        frac_digit(out.hi, hi_, c);
        return true;
    }
    return false;
  }

  bool accepting(const NumState& s) const {
    if (s.phase != NumPhase::Zero && s.phase != NumPhase::Int && s.phase != NumPhase::Frac) return false;
    if (lo_) {
      const int r = final_rel(s.lo, lo_, s.phase);
      if (r < 0 || (r == 0 && lo_excl_)) return false;
    }
    if (hi_) {
      const int r = final_rel(s.hi, hi_, s.phase);
      if (r > 0 || (r == 0 && hi_excl_)) return false;
    }
    return true;
  }

 private:
  static void int_digit(BoundCursor& c, const Decimal* b, char d) {
    if (!b || c.decided) return;
    const int n = static_cast<int>(b->int_digits.size());
    if (c.pos >= n) {  // more integer digits than the bound: greater, whatever follows
      c.rel = 1;
      c.decided = true;
      return;
    }
    if (c.rel == 0) c.rel = d < b->int_digits[static_cast<size_t>(c.pos)] ? -1 : (d > b->int_digits[static_cast<size_t>(c.pos)] ? 1 : 0);
    ++c.pos;
  }
  // The integer part ended (at '.' or the end of the text).
  static void end_int(BoundCursor& c, const Decimal* b) {
    if (!b || c.decided) return;
    if (c.pos < static_cast<int>(b->int_digits.size())) {
      c.rel = -1;
      c.decided = true;
    } else if (c.rel != 0) {
      c.decided = true;
    } else {
      c.pos = 0;  // equal so far: the fraction decides
    }
  }
  static void frac_digit(BoundCursor& c, const Decimal* b, char d) {
    if (!b || c.decided) return;
    const int n = static_cast<int>(b->frac_digits.size());
    const char bd = c.pos < n ? b->frac_digits[static_cast<size_t>(c.pos)] : '0';
    if (d != bd) {
      c.rel = d < bd ? -1 : 1;
      c.decided = true;
      return;
    }
    if (c.pos < n) ++c.pos;
  }
  static int final_rel(BoundCursor c, const Decimal* b, NumPhase phase) {
    if (c.decided) return c.rel;
    if (phase != NumPhase::Frac) {
      end_int(c, b);
      if (c.decided) return c.rel;
    }
    // Equal so far in the fraction: less if the bound has digits left (its last is non-zero).
    return c.pos < static_cast<int>(b->frac_digits.size()) ? -1 : 0;
  }

  const Decimal* lo_;
  const Decimal* hi_;
  int max_int_ = kJsonNumberMaxIntDigits;
  int max_frac_ = kJsonNumberMaxFracDigits;
  bool lo_excl_, hi_excl_, integer_only_;
};

// Writes the DFA's live states as rules; the start state's rule name, or nullopt.
std::optional<std::string> emit_dfa(const MagnitudeDfa& dfa, const std::string& prefix, std::string& rules) {
  std::map<NumState, int> ids;
  std::vector<NumState> states;
  std::vector<std::vector<std::pair<char, int>>> edges;
  auto intern = [&](const NumState& s) {
    auto [it, fresh] = ids.emplace(s, static_cast<int>(states.size()));
    if (fresh) {
      states.push_back(s);
      edges.emplace_back();
    }
    return it->second;
  };
  intern(NumState{});
  static constexpr char kAlphabet[] = "0123456789.";
  for (size_t i = 0; i < states.size(); ++i) {
    for (const char* c = kAlphabet; *c; ++c) {
      NumState next;
      if (dfa.step(states[i], *c, next)) {
        const int id = intern(next);
        edges[i].emplace_back(*c, id);
      }
    }
  }
  // Live: can reach an accepting state (fixed point over the edges).
  std::vector<bool> live(states.size(), false);
  for (size_t i = 0; i < states.size(); ++i) live[i] = dfa.accepting(states[i]);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < states.size(); ++i) {
      if (live[i]) continue;
      for (const auto& e : edges[i])
        if (live[static_cast<size_t>(e.second)]) { live[i] = true, changed = true; break; }
    }
  }
  if (!live[0]) return std::nullopt;
  auto has_edges = [&](size_t i) {
    for (const auto& e : edges[i])
      if (live[static_cast<size_t>(e.second)]) return true;
    return false;
  };
  auto name = [&](size_t i) { return prefix + "-n" + std::to_string(i); };
  for (size_t i = 0; i < states.size(); ++i) {
    if (!live[i] || !has_edges(i)) continue;
    std::map<int, CodePointSet> by_target;
    for (const auto& [c, t] : edges[i])
      if (live[static_cast<size_t>(t)]) by_target[t].add(static_cast<uint32_t>(c), static_cast<uint32_t>(c));
    std::string body;
    for (const auto& [t, set] : by_target) {
      if (!body.empty()) body += " | ";
      body += set.gbnf_class();
      // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict
      // inside `"literal" + std::string` here (as in other unity batches).
      if (has_edges(static_cast<size_t>(t))) {
        body += ' ';
        body += name(static_cast<size_t>(t));
      }
    }
    if (i != 0 && dfa.accepting(states[i])) {
      body.insert(0, 1, '(');
      body += ")?";
    }
    rules += name(i);
    rules += " ::= ";
    rules += body;
    rules += '\n';
  }
  return name(0);
}

}  // namespace

int compare_decimal(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int m = compare_magnitude(a, b);
  return a.negative ? -m : m;
}

std::optional<std::string> number_range_gbnf(const NumberBounds& bounds, bool integer_only, const std::string& prefix,
                                             std::string& rules) {
  const Decimal zero;
  auto negated = [](Decimal d) {
    d.negative = !d.negative && !d.is_zero();
    return d;
  };
  std::vector<std::string> parts;
  // Non-negative values: magnitudes in [max(lo, 0), hi].
  {
    const bool lo_above_zero = bounds.lo && compare_decimal(*bounds.lo, zero) >= 0;
    const Decimal lo = lo_above_zero ? *bounds.lo : zero;
    const bool lo_excl = lo_above_zero && bounds.lo_exclusive;
    const bool empty = bounds.hi && compare_decimal(*bounds.hi, zero) < 0;
    if (!empty) {
      MagnitudeDfa dfa(&lo, lo_excl, bounds.hi ? &*bounds.hi : nullptr, bounds.hi_exclusive, integer_only);
      if (auto e = emit_dfa(dfa, prefix + "p", rules)) parts.push_back(*e);
    }
  }
  // Non-positive values, written with '-': magnitudes in [max(-hi, 0), -lo].
  {
    const bool hi_below_zero = bounds.hi && compare_decimal(*bounds.hi, zero) <= 0;
    const Decimal lo = hi_below_zero ? negated(*bounds.hi) : zero;
    const bool lo_excl = hi_below_zero && bounds.hi_exclusive;
    const bool empty = bounds.lo && compare_decimal(*bounds.lo, zero) > 0;
    std::optional<Decimal> hi;
    if (bounds.lo) hi = negated(*bounds.lo);
    if (!empty) {
      MagnitudeDfa dfa(&lo, lo_excl, hi ? &*hi : nullptr, bounds.lo_exclusive, integer_only);
      if (auto e = emit_dfa(dfa, prefix + "m", rules)) parts.push_back("\"-\" " + *e);
    }
  }
  if (parts.empty()) return std::nullopt;
  if (parts.size() == 1) return parts[0];
  return "(" + parts[0] + " | " + parts[1] + ")";
}

std::string number_literal_gbnf(const Decimal& value) {
  std::string out;
  if (value.is_zero()) return "\"-\"? \"0\" (\".\" \"0\"+)?";
  if (value.negative) out += "\"-\" ";
  out += "\"" + value.int_digits;
  if (value.frac_digits.empty()) return out + "\" (\".\" \"0\"{1," + std::to_string(kJsonNumberMaxFracDigits) + "})?";
  return out + "." + value.frac_digits + "\" \"0\"{0," + std::to_string(kJsonNumberMaxFracDigits) + "}";
}

}  // namespace gb
