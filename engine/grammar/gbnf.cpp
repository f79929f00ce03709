// GBNF parsing and compilation to a byte-level Grammar (see gbnf.h, grammar.h).
//
// One pass: the parser emits elements as it reads. A rule name gets its index
// the first time it is seen (defined or referenced); helper rules (groups,
// classes, repetitions) are appended as they are needed. After parsing: every
// referenced rule must be defined, the root must exist, and no rule may reach
// itself without consuming a byte (checked over the "may start with" graph,
// through rules that can match the empty string).
#include "grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "grammar/utf8_ranges.h"

namespace gb {

std::string GbnfError::to_string() const {
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message;
}

std::string gbnf_literal(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (b < 0x20 || b == 0x7F) {
          out += "\\x";
          out += kHex[b >> 4];
          out += kHex[b & 15];
        } else {
          out += ch;  // printable ASCII, or UTF-8 text (kept as is)
        }
    }
  }
  out += '"';
  return out;
}

namespace {

struct GbnfFailure {
  size_t offset;
  std::string message;
};

using Sequence = std::vector<GrammarElement>;

class GbnfCompiler {
 public:
  explicit GbnfCompiler(std::string_view text) : text_(text) {}

  // Throws GbnfFailure (internal only; compile_gbnf turns it into an Error).
  std::shared_ptr<Grammar> compile(std::string_view root_name) {
    if (text_.size() > Grammar::kMaxSourceBytes)
      fail(0, "grammar is " + std::to_string(text_.size()) + " bytes, more than the limit of " +
                  std::to_string(Grammar::kMaxSourceBytes));
    skip_space(true);
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (size_t r = 0; r < rules_.size(); ++r)
      if (!defined_[r])
        fail(first_use_[r], "undefined rule '" + rules_[r].name + "'");
    auto root = names_.find(std::string(root_name));
    if (root == names_.end() || !defined_[root->second])
      fail(text_.size(), "no rule named '" + std::string(root_name) + "' (the start rule)");
    auto g = std::make_shared<Grammar>();
    g->root = root->second;
    g->source = std::string(text_);
    lay_out(*g);
    check_left_recursion(*g);
    check_can_finish(*g);
    return g;
  }

 private:
  [[noreturn]] void fail(size_t offset, std::string message) const {
    throw GbnfFailure{std::min(offset, text_.size()), std::move(message)};
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Spaces, tabs and # comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && text_[pos_] != '\n' && text_[pos_] != '\r') ++pos_;
      } else if (newlines && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) {
      if (at_end()) fail(pos_, "expected a rule name, found the end of the grammar");
      fail(pos_, std::string("expected a rule name, found '") + describe_char() + "'");
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string describe_char() const {
    if (at_end()) return "end of grammar";
    const char c = text_[pos_];
    if (c == '\n' || c == '\r') return "end of line";
    return std::string(1, c);
  }

  uint32_t rule_index(const std::string& name, size_t use_offset) {
    auto [it, inserted] = names_.try_emplace(name, static_cast<uint32_t>(rules_.size()));
    if (inserted) new_rule(name, use_offset);
    return it->second;
  }

  uint32_t new_rule(std::string name, size_t offset) {
    if (rules_.size() >= Grammar::kMaxRules)
      fail(offset, "more than " + std::to_string(Grammar::kMaxRules) + " rules (after expanding repetitions)");
    rules_.push_back(GrammarRule{std::move(name), {}});
    bodies_.emplace_back();
    defined_.push_back(false);
    first_use_.push_back(offset);
    defined_at_.push_back(offset);
    helper_.push_back(0);
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  // A helper rule "<parent>-<n>" with the given alternatives.
  uint32_t helper_rule(std::vector<Sequence> alternatives, size_t offset) {
    const uint32_t r = new_rule(current_rule_ + "-" + std::to_string(++num_helpers_), offset);
    helper_[r] = 1;
    count_elements(alternatives, offset);
    bodies_[r] = std::move(alternatives);
    defined_[r] = true;
    return r;
  }

  void count_elements(const std::vector<Sequence>& alternatives, size_t offset) {
    for (const Sequence& s : alternatives) num_elements_ += s.size() + 1;
    if (num_elements_ > Grammar::kMaxElements)
      fail(offset, "the grammar expands to more than " + std::to_string(Grammar::kMaxElements) +
                       " elements (large repetition counts multiply)");
  }

  uint32_t byte_set_index(const std::bitset<256>& set) {
    auto key = set.to_string();
    auto [it, inserted] = byte_set_ids_.try_emplace(std::move(key), static_cast<uint32_t>(byte_sets_.size()));
    if (inserted) byte_sets_.push_back(set);
    return it->second;
  }

  GrammarElement bytes_element(const std::bitset<256>& set) {
    return {GrammarElement::Kind::Bytes, byte_set_index(set)};
  }
  GrammarElement byte_element(uint8_t b) {
    std::bitset<256> set;
    set.set(b);
    return bytes_element(set);
  }

  void parse_rule() {
    const size_t name_offset = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=")
      fail(pos_, "expected '::=' after rule name '" + name + "', found '" + describe_char() + "'");
    pos_ += 3;
    skip_space(true);
    const uint32_t r = rule_index(name, name_offset);
    if (defined_[r]) fail(name_offset, "rule '" + name + "' is defined twice");
    defined_[r] = true;
    defined_at_[r] = name_offset;
    current_rule_ = name;
    num_helpers_ = 0;
    std::vector<Sequence> alternatives = parse_alternates(false);
    count_elements(alternatives, name_offset);
    bodies_[r] = std::move(alternatives);
    skip_space(false);
    if (!at_end() && text_[pos_] != '\n' && text_[pos_] != '\r')
      fail(pos_, std::string("unexpected '") + describe_char() + "' in rule '" + name + "'");
  }

  // At top level, a line break ends the rule unless the next line goes on with '|'.
  std::vector<Sequence> parse_alternates(bool nested) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence(nested));
    for (;;) {
      const size_t save = pos_;
      skip_space(true);
      if (peek() != '|') {
        pos_ = save;
        break;
      }
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(nested));
    }
    return alternatives;
  }

  Sequence parse_sequence(bool nested) {
    Sequence seq;
    size_t item_start = 0;  // where the last item's elements begin in seq
    bool have_item = false;
    for (;;) {
      const char c = peek();
      const size_t offset = pos_;
      if (c == '"') {
        ++pos_;
        item_start = seq.size();
        parse_literal(seq);
        have_item = true;
      } else if (c == '[') {
        ++pos_;
        item_start = seq.size();
        parse_class(seq, offset);
        have_item = true;
      } else if (c == '.') {
        ++pos_;
        item_start = seq.size();
        emit_code_points(seq, {{0, 0x10FFFF}}, offset);
        have_item = true;
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        std::vector<Sequence> alternatives = parse_alternates(true);
        skip_space(true);
        if (peek() != ')') fail(pos_, std::string("expected ')' to close the group, found '") + describe_char() + "'");
        ++pos_;
        item_start = seq.size();
        seq.push_back({GrammarElement::Kind::Rule, helper_rule(std::move(alternatives), offset)});
        have_item = true;
      } else if (c == '<') {
        fail(pos_, "token references (<...>) are not supported; write the token's text as a literal");
      } else if (is_name_char(c)) {
        const std::string name = parse_name();
        item_start = seq.size();
        seq.push_back({GrammarElement::Kind::Rule, rule_index(name, offset)});
        have_item = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_item) fail(pos_, std::string("'") + c + "' has nothing to repeat");
        apply_repetition(seq, item_start, offset);
        have_item = false;  // "a**" is an error, as in regular expressions
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  // Reads one code point of a literal or class: an escape or a UTF-8 character.
  uint32_t parse_char() {
    if (at_end()) fail(pos_, "unexpected end of grammar inside a literal or class");
    const auto b = static_cast<uint8_t>(text_[pos_]);
    if (b == '\\') return parse_escape();
    if (b == '\n' || b == '\r') fail(pos_, "line break inside a literal or class (write \\n)");
    const int length = utf8_sequence_length(b);
    if (length == 0 || pos_ + static_cast<size_t>(length) > text_.size())
      fail(pos_, "invalid UTF-8 in the grammar text");
    uint32_t cp = length == 1 ? b : b & (0xFFu >> (length + 1));
    for (int k = 1; k < length; ++k) {
      const auto cb = static_cast<uint8_t>(text_[pos_ + static_cast<size_t>(k)]);
      if ((cb & 0xC0) != 0x80) fail(pos_, "invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (cb & 0x3F);
    }
    if (!valid_scalar(cp) || utf8_length(cp) != length) fail(pos_, "invalid UTF-8 in the grammar text");
    pos_ += static_cast<size_t>(length);
    return cp;
  }

  uint32_t parse_escape() {
    const size_t start = pos_;
    ++pos_;  // the backslash
    if (at_end()) fail(start, "unfinished escape at the end of the grammar");
    const char c = text_[pos_++];
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return static_cast<uint8_t>(c);
      case 'x': return parse_hex(2, start);
      case 'u': return parse_hex(4, start);
      case 'U': return parse_hex(8, start);
      default: fail(start, std::string("unknown escape '\\") + c + "'");
    }
  }

  uint32_t parse_hex(int digits, size_t start) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
      else fail(pos_, "escape needs " + std::to_string(digits) + " hexadecimal digits");
      if (v > 0x0FFFFFFFu) fail(start, "escape value out of range");
      v = v * 16 + d;
      ++pos_;
    }
    if (!valid_scalar(v)) fail(start, "escape names no Unicode scalar value (surrogate or above U+10FFFF)");
    return v;
  }

  void parse_literal(Sequence& seq) {
    const size_t start = pos_ - 1;
    for (;;) {
      if (at_end()) fail(start, "unterminated string literal");
      if (text_[pos_] == '"') {
        ++pos_;
        return;
      }
      const uint32_t cp = parse_char();
      uint8_t buf[4];
      const int n = encode_utf8(cp, buf);
      for (int k = 0; k < n; ++k) seq.push_back(byte_element(buf[k]));
    }
  }

  void parse_class(Sequence& seq, size_t offset) {
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    for (;;) {
      if (at_end()) fail(offset, "unterminated character class");
      if (text_[pos_] == ']') {
        ++pos_;
        break;
      }
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail(offset, "character class range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ranges = normalize_ranges(std::move(ranges));
    if (negated) ranges = complement_ranges(ranges);
    if (ranges.empty()) fail(offset, "character class matches nothing");
    emit_code_points(seq, ranges, offset);
  }

  // The UTF-8 encodings of `ranges` (normalized, no surrogates): one Bytes
  // element when every code point is ASCII, else a helper rule with one
  // alternative per byte-range run (all one-byte runs merged into one).
  void emit_code_points(Sequence& seq, const std::vector<CodePointRange>& ranges, size_t offset) {
    const std::vector<CodePointRange> valid = remove_surrogates(ranges);
    std::bitset<256> ascii;
    std::vector<Sequence> alternatives;
    for (const Utf8ByteRun& run : utf8_byte_runs(valid)) {
      if (run.size() == 1) {
        for (uint32_t b = run[0].lo; b <= run[0].hi; ++b) ascii.set(b);
        continue;
      }
      Sequence s;
      for (const ByteRange& br : run) {
        std::bitset<256> set;
        for (uint32_t b = br.lo; b <= br.hi; ++b) set.set(b);
        s.push_back(bytes_element(set));
      }
      alternatives.push_back(std::move(s));
    }
    if (alternatives.empty()) {
      seq.push_back(bytes_element(ascii));
      return;
    }
    if (ascii.any()) alternatives.insert(alternatives.begin(), Sequence{bytes_element(ascii)});
    const std::string key = ranges_key(valid);
    auto it = class_rules_.find(key);
    if (it == class_rules_.end()) it = class_rules_.emplace(key, helper_rule(std::move(alternatives), offset)).first;
    seq.push_back({GrammarElement::Kind::Rule, it->second});
  }

  static std::string ranges_key(const std::vector<CodePointRange>& ranges) {
    std::string key;
    for (const CodePointRange& r : ranges) key += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
    return key;
  }

  // *, +, ?, {m}, {m,}, {m,n}, {,n} applied to seq[item_start..]. The item
  // becomes one element first (a helper rule when it is longer), then:
  //   x*  -> R ::= x R | ""          x+ -> x R (R as x*)      x? -> R ::= x | ""
  //   x{m,n} -> m copies of x, then n - m nested optionals:  O ::= x O' | ""
  void apply_repetition(Sequence& seq, size_t item_start, size_t offset) {
    uint32_t min_count = 0;
    uint32_t max_count = 0;  // kUnbounded for none
    constexpr uint32_t kUnbounded = UINT32_MAX;
    const char c = text_[pos_++];
    if (c == '*') {
      max_count = kUnbounded;
    } else if (c == '+') {
      min_count = 1;
      max_count = kUnbounded;
    } else if (c == '?') {
      max_count = 1;
    } else {  // '{'
      skip_space(false);
      const bool has_min = peek() >= '0' && peek() <= '9';
      if (has_min) min_count = parse_count(offset);
      skip_space(false);
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        max_count = (peek() >= '0' && peek() <= '9') ? parse_count(offset) : kUnbounded;
        if (!has_min && max_count == kUnbounded) fail(offset, "'{,}' needs a count");
      } else {
        if (!has_min) fail(pos_, "expected a count after '{'");
        max_count = min_count;
      }
      skip_space(false);
      if (peek() != '}') fail(pos_, std::string("expected '}' to close the repetition, found '") + describe_char() + "'");
      ++pos_;
      if (max_count < min_count) fail(offset, "repetition {m,n} with n < m");
    }
    Sequence item(seq.begin() + static_cast<std::ptrdiff_t>(item_start), seq.end());
    seq.resize(item_start);
    if (item.empty()) return;  // "" repeated is still ""
    GrammarElement x = item.front();
    if (item.size() > 1) x = {GrammarElement::Kind::Rule, helper_rule({item}, offset)};
    for (uint32_t k = 0; k < min_count; ++k) seq.push_back(x);
    if (max_count == kUnbounded) {
      const uint32_t r = new_rule(current_rule_ + "-" + std::to_string(++num_helpers_), offset);
      helper_[r] = 1;
      bodies_[r] = {Sequence{x, {GrammarElement::Kind::Rule, r}}, Sequence{}};
      defined_[r] = true;
      count_elements(bodies_[r], offset);
      seq.push_back({GrammarElement::Kind::Rule, r});
      return;
    }
    if (max_count == min_count) return;
    // Innermost optional first: O_1 ::= x | "", O_k ::= x O_{k-1} | "".
    uint32_t inner = helper_rule({Sequence{x}, Sequence{}}, offset);
    for (uint32_t k = 1; k < max_count - min_count; ++k)
      inner = helper_rule({Sequence{x, {GrammarElement::Kind::Rule, inner}}, Sequence{}}, offset);
    seq.push_back({GrammarElement::Kind::Rule, inner});
  }

  uint32_t parse_count(size_t offset) {
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > Grammar::kMaxRepetition)
        fail(offset, "repetition count above the limit of " + std::to_string(Grammar::kMaxRepetition));
      ++pos_;
    }
    return static_cast<uint32_t>(v);
  }

  void lay_out(Grammar& g) {
    g.rules = rules_;
    g.byte_sets = byte_sets_;
    g.elements.reserve(num_elements_);
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& s : bodies_[r]) {
        g.rules[r].alternatives.push_back(static_cast<uint32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), s.begin(), s.end());
        g.elements.push_back({GrammarElement::Kind::End, 0});
      }
    }
  }

  // No rule may derive a string starting with itself without consuming a byte
  // (the matcher's expansion would never end). Nullable rules first (fixpoint),
  // then a depth-first search over "r may begin with s" edges.
  void check_left_recursion(const Grammar& g) {
    const size_t n = g.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t p : g.rules[r].alternatives) {
          bool all = true;
          for (; g.elements[p].kind != GrammarElement::Kind::End; ++p)
            if (g.elements[p].kind == GrammarElement::Kind::Bytes || !nullable[g.elements[p].value]) {
              all = false;
              break;
            }
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> begins(n);
    for (size_t r = 0; r < n; ++r)
      for (uint32_t p : g.rules[r].alternatives)
        for (; g.elements[p].kind == GrammarElement::Kind::Rule; ++p) {
          begins[r].push_back(g.elements[p].value);
          if (!nullable[g.elements[p].value]) break;
        }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> path;
    // Iterative DFS: (rule, next edge index).
    for (size_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      std::vector<std::pair<uint32_t, size_t>> stack{{static_cast<uint32_t>(start), 0}};
      color[start] = 1;
      path.assign(1, static_cast<uint32_t>(start));
      while (!stack.empty()) {
        auto& [r, k] = stack.back();
        if (k == begins[r].size()) {
          color[r] = 2;
          stack.pop_back();
          path.pop_back();
          continue;
        }
        const uint32_t s = begins[r][k++];
        if (color[s] == 1) {
          std::string cycle;
          auto at = std::find(path.begin(), path.end(), s);
          for (; at != path.end(); ++at) cycle += user_rule_name(g, *at) + " -> ";
          cycle += user_rule_name(g, s);
          if (helper_[s])
            fail(defined_at_[s], "this repetition repeats something that can match the empty string (in rule '" +
                                     user_rule_name(g, s) + "'); make the repeated part non-empty");
          fail(defined_at_[s], "rule '" + user_rule_name(g, s) + "' is left-recursive (" + cycle +
                                   "); rewrite it right-recursively");
        }
        if (color[s] == 0) {
          color[s] = 1;
          path.push_back(s);
          stack.emplace_back(s, 0);
        }
      }
    }
  }

  static std::string user_rule_name(const Grammar& g, uint32_t r) { return g.rules[r].name; }

  // The start rule must derive some finite text: a rule can finish when one of
  // its alternatives consists of bytes and rules that can finish (fixpoint).
  // `root ::= "a" root` never can, and a request with it would only end at
  // max_tokens: refused here.
  void check_can_finish(const Grammar& g) {
    std::vector<char> finishes(g.rules.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g.rules.size(); ++r) {
        if (finishes[r]) continue;
        for (uint32_t p : g.rules[r].alternatives) {
          bool all = true;
          for (; g.elements[p].kind != GrammarElement::Kind::End; ++p)
            if (g.elements[p].kind == GrammarElement::Kind::Rule && !finishes[g.elements[p].value]) {
              all = false;
              break;
            }
          if (all) {
            finishes[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    if (!finishes[g.root])
      fail(defined_at_[g.root], "rule '" + g.rules[g.root].name +
                                    "' can never finish: every alternative needs itself again (no finite text matches)");
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<GrammarRule> rules_;
  std::vector<std::vector<Sequence>> bodies_;
  std::vector<char> defined_;
  std::vector<size_t> first_use_;   // where a rule was first named
  std::vector<size_t> defined_at_;
  std::vector<char> helper_;        // made by the compiler (a group, class or repetition)  // where it is defined (a helper: where it was made)
  std::vector<std::bitset<256>> byte_sets_;
  std::unordered_map<std::string, uint32_t> byte_set_ids_;
  std::map<std::string, uint32_t> class_rules_;
  std::string current_rule_;
  uint32_t num_helpers_ = 0;
  size_t num_elements_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text, std::string_view root, GbnfError* error) {
  try {
    GbnfCompiler compiler(text);
    return std::shared_ptr<const Grammar>(compiler.compile(root));
  } catch (const GbnfFailure& f) {
    GbnfError e;
    e.offset = f.offset;
    e.message = f.message;
    for (size_t i = 0; i < f.offset && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++e.line;
        e.column = 1;
      } else {
        ++e.column;
      }
    }
    if (error) *error = e;
    return make_error("grammar: " + e.to_string());
  }
}

}  // namespace gb
