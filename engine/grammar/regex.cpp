// Regex -> GBNF; see regex.h for the subset and the semantics.
#include "grammar/regex.h"

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "core/utf8.h"
#include "grammar/code_point_set.h"

namespace gb {
namespace {

constexpr uint32_t kUnbounded = UINT32_MAX;

// The parsed pattern. Set: one character of `set`; Seq / Alt: kids in order;
// Repeat: kids[0] between min and max times; Begin / End: the ^ / $ anchors.
struct RegexNode {
  enum class Kind { Set, Seq, Alt, Repeat, Begin, End };
  Kind kind = Kind::Seq;
  CodePointSet set;
  std::vector<RegexNode> kids;
  uint32_t min = 0;
  uint32_t max = 0;
  size_t offset = 0;  // byte offset in the pattern, for errors
};

CodePointSet digit_set() { return CodePointSet::range('0', '9'); }
CodePointSet word_set() {
  CodePointSet s = CodePointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
// ECMA-262 WhiteSpace and LineTerminator.
CodePointSet space_set() {
  CodePointSet s = CodePointSet::range(0x09, 0x0D);
  for (uint32_t cp : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) s.add(cp, cp);
  s.add(0x2000, 0x200A);
  return s;
}
CodePointSet line_terminators() {
  CodePointSet s = CodePointSet::single('\n');
  s.add('\r', '\r');
  s.add(0x2028, 0x2029);
  return s;
}

int hex_value(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : pattern_(pattern) {}

  Result<RegexNode> parse() {
    if (pattern_.size() > kRegexMaxPatternBytes)
      return make_error("regex: pattern of " + std::to_string(pattern_.size()) + " bytes exceeds the limit of " +
                        std::to_string(kRegexMaxPatternBytes));
    // Decode to code points (with byte offsets) first.
    for (size_t pos = 0; pos < pattern_.size();) {
      const Utf8Step step = utf8_next(pattern_, pos);
      if (step.kind != Utf8Kind::Complete) return make_error("regex: invalid UTF-8 at offset " + std::to_string(pos));
      chars_.push_back(decode(pos, step.num_bytes));
      offsets_.push_back(pos);
      pos += step.num_bytes;
    }
    offsets_.push_back(pattern_.size());
    RegexNode root = parse_alt(0);
    if (!error_.empty()) return make_error(error_);
    if (pos_ < chars_.size()) return make_error(at("unmatched ')'"));
    return root;
  }

 private:
  uint32_t decode(size_t pos, size_t n) const {
    const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(pattern_[pos + i])); };
    if (n == 1) return b(0);
    if (n == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    if (n == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }

  std::string at(const std::string& message) const {
    return "regex: " + message + " at offset " + std::to_string(offsets_[std::min(pos_, chars_.size())]);
  }
  void fail(const std::string& message) {
    if (error_.empty()) error_ = at(message);
  }
  bool more() const { return pos_ < chars_.size() && error_.empty(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < chars_.size() ? chars_[pos_ + ahead] : 0; }
  bool has(size_t ahead) const { return pos_ + ahead < chars_.size(); }

  RegexNode node(RegexNode::Kind kind) const {
    RegexNode n;
    n.kind = kind;
    n.offset = offsets_[std::min(pos_, chars_.size())];
    return n;
  }

  RegexNode parse_alt(int depth) {
    RegexNode alt = node(RegexNode::Kind::Alt);
    if (depth > kRegexMaxDepth) {
      fail("groups nested deeper than " + std::to_string(kRegexMaxDepth));
      return alt;
    }
    alt.kids.push_back(parse_seq(depth));
    while (more() && peek() == '|') {
      ++pos_;
      alt.kids.push_back(parse_seq(depth));
    }
    return alt;
  }

  RegexNode parse_seq(int depth) {
    RegexNode seq = node(RegexNode::Kind::Seq);
    while (more() && peek() != '|' && peek() != ')') {
      RegexNode atom = parse_atom(depth);
      if (!error_.empty()) return seq;
      parse_quantifier(atom);
      seq.kids.push_back(std::move(atom));
    }
    return seq;
  }

  // {m}, {m,} or {m,n} at pos_ (which holds '{'): the bounds and the length, or nullopt.
  std::optional<std::pair<std::pair<uint32_t, uint32_t>, size_t>> brace_quantifier() const {
    size_t i = 1;
    auto number = [&](uint64_t& out) {
      const size_t start = i;
      out = 0;
      while (has(i) && peek(i) >= '0' && peek(i) <= '9') {
        out = std::min<uint64_t>(out * 10 + (peek(i) - '0'), uint64_t{1} << 40);
        ++i;
      }
      return i > start;
    };
    uint64_t m = 0, n = 0;
    if (!number(m)) return std::nullopt;
    if (has(i) && peek(i) == '}') return std::make_pair(std::make_pair(clamp(m), clamp(m)), i + 1);
    if (!has(i) || peek(i) != ',') return std::nullopt;
    ++i;
    if (has(i) && peek(i) == '}') return std::make_pair(std::make_pair(clamp(m), kUnbounded), i + 1);
    if (!number(n) || !has(i) || peek(i) != '}') return std::nullopt;
    return std::make_pair(std::make_pair(clamp(m), clamp(n)), i + 1);
  }
  static uint32_t clamp(uint64_t v) { return static_cast<uint32_t>(std::min<uint64_t>(v, kUnbounded - 1)); }

  void parse_quantifier(RegexNode& atom) {
    if (!more()) return;
    uint32_t lo = 0, hi = 0;
    const uint32_t c = peek();
    if (c == '*') lo = 0, hi = kUnbounded, ++pos_;
    else if (c == '+') lo = 1, hi = kUnbounded, ++pos_;
    else if (c == '?') lo = 0, hi = 1, ++pos_;
    else if (c == '{') {
      auto q = brace_quantifier();
      if (!q) return;  // a literal '{' (Annex B), read as the next atom
      lo = q->first.first;
      hi = q->first.second;
      pos_ += q->second;
      if (hi != kUnbounded && lo > hi) return fail("quantifier {" + std::to_string(lo) + "," + std::to_string(hi) + "} has min > max");
      if (lo > kRegexMaxRepetition || (hi != kUnbounded && hi > kRegexMaxRepetition))
        return fail("repetition count above the limit of " + std::to_string(kRegexMaxRepetition));
    } else {
      return;
    }
    if (more() && peek() == '?') ++pos_;  // lazy: the same language
    if (atom.kind == RegexNode::Kind::Begin || atom.kind == RegexNode::Kind::End)
      return fail("quantifier on an anchor");
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?'))
      return fail("nothing to repeat (a quantifier follows a quantifier)");
    if (more() && peek() == '{' && brace_quantifier()) return fail("nothing to repeat (a quantifier follows a quantifier)");
    RegexNode rep = node(RegexNode::Kind::Repeat);
    rep.min = lo;
    rep.max = hi;
    rep.kids.push_back(std::move(atom));
    atom = std::move(rep);
  }

  RegexNode set_node(CodePointSet set) const {
    RegexNode n = node(RegexNode::Kind::Set);
    n.set = std::move(set);
    return n;
  }

  RegexNode parse_atom(int depth) {
    const uint32_t c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == '=' || peek(1) == '!') {
            fail("lookahead (?= / (?! is not supported");
            return node(RegexNode::Kind::Seq);
          } else if (peek(1) == '<' && (peek(2) == '=' || peek(2) == '!')) {
            fail("lookbehind (?<= / (?<! is not supported");
            return node(RegexNode::Kind::Seq);
          } else if (peek(1) == '<') {
            pos_ += 2;  // a named group: the name does not change the language
            while (more() && peek() != '>') {
              const uint32_t n = peek();
              if (!(n == '_' || n == '$' || (n >= '0' && n <= '9') || (n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z'))) {
                fail("bad group name");
                return node(RegexNode::Kind::Seq);
              }
              ++pos_;
            }
            if (!more()) {
              fail("unterminated group name");
              return node(RegexNode::Kind::Seq);
            }
            ++pos_;
          } else {
            fail("unsupported group syntax '(?'");
            return node(RegexNode::Kind::Seq);
          }
        }
        RegexNode inner = parse_alt(depth + 1);
        if (!error_.empty()) return inner;
        if (!more() || peek() != ')') {
          fail("missing ')'");
          return inner;
        }
        ++pos_;
        return inner;
      }
      case '*': case '+': case '?':
        fail("nothing to repeat");
        return node(RegexNode::Kind::Seq);
      case '{':
        if (brace_quantifier()) {
          fail("nothing to repeat");
          return node(RegexNode::Kind::Seq);
        }
        ++pos_;
        return set_node(CodePointSet::single('{'));
      case '.':
        ++pos_;
        return set_node(line_terminators().complement());
      case '^': {
        RegexNode n = node(RegexNode::Kind::Begin);
        ++pos_;
        return n;
      }
      case '$': {
        RegexNode n = node(RegexNode::Kind::End);
        ++pos_;
        return n;
      }
      case '[':
        return parse_class();
      case '\\': {
        ++pos_;
        CodePointSet set;
        if (!parse_escape(false, set)) return node(RegexNode::Kind::Seq);
        return set_node(std::move(set));
      }
      default:
        ++pos_;
        return set_node(CodePointSet::single(c));
    }
  }

  // After a backslash (pos_ at the escaped character): the set it denotes.
  bool parse_escape(bool in_class, CodePointSet& out) {
    if (!more()) {
      fail("pattern ends with '\\'");
      return false;
    }
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case 'd': out = digit_set(); return true;
      case 'D': out = digit_set().complement(); return true;
      case 'w': out = word_set(); return true;
      case 'W': out = word_set().complement(); return true;
      case 's': out = space_set(); return true;
      case 'S': out = space_set().complement(); return true;
      case 't': out = CodePointSet::single('\t'); return true;
      case 'n': out = CodePointSet::single('\n'); return true;
      case 'r': out = CodePointSet::single('\r'); return true;
      case 'f': out = CodePointSet::single('\f'); return true;
      case 'v': out = CodePointSet::single('\v'); return true;
      case 'b':
        if (in_class) { out = CodePointSet::single('\b'); return true; }
        --pos_;
        fail("word boundary \\b is not supported");
        return false;
      case 'B':
        --pos_;
        fail("word boundary \\B is not supported");
        return false;
      case '0':
        if (more() && peek() >= '0' && peek() <= '9') {
          --pos_;
          fail("octal escapes are not supported");
          return false;
        }
        out = CodePointSet::single(0);
        return true;
      case 'c': {
        const uint32_t l = peek();
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
          ++pos_;
          out = CodePointSet::single(l % 32);
          return true;
        }
        --pos_;
        fail("bad control escape \\c");
        return false;
      }
      case 'x': {
        const int h1 = hex_value(peek()), h2 = hex_value(peek(1));
        if (!more() || h1 < 0 || !has(1) || h2 < 0) {
          --pos_;
          fail("bad \\x escape (two hex digits expected)");
          return false;
        }
        pos_ += 2;
        out = CodePointSet::single(static_cast<uint32_t>(h1 * 16 + h2));
        return true;
      }
      case 'u': {
        if (peek() == '{') {
          --pos_;
          fail("\\u{...} escapes are not supported");
          return false;
        }
        uint32_t cp = 0;
        if (!hex4(cp)) return false;
        if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t save = pos_;
          pos_ += 2;
          uint32_t low = 0;
          if (hex4(low) && low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else {
            pos_ = save;
            error_.clear();
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
          fail("lone surrogate escape");
          return false;
        }
        out = CodePointSet::single(cp);
        return true;
      }
      case 'p': case 'P':
        --pos_;
        fail("Unicode property escapes \\p{...} / \\P{...} are not supported");
        return false;
      case 'k':
        --pos_;
        fail("backreference \\k<name> is not supported");
        return false;
      default: break;
    }
    if (c >= '1' && c <= '9') {
      --pos_;
      fail(in_class ? "octal escapes are not supported" : "backreference \\" + std::string(1, static_cast<char>(c)) + " is not supported");
      return false;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      --pos_;
      fail(std::string("unsupported escape \\") + static_cast<char>(c));
      return false;
    }
    out = CodePointSet::single(c);  // an escaped metacharacter or other symbol
    return true;
  }

  bool hex4(uint32_t& cp) {
    cp = 0;
    for (size_t i = 0; i < 4; ++i) {
      const int h = has(i) ? hex_value(peek(i)) : -1;
      if (h < 0) {
        fail("bad \\u escape (four hex digits expected)");
        return false;
      }
      cp = cp * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    return true;
  }

  RegexNode parse_class() {
    RegexNode n = node(RegexNode::Kind::Set);
    ++pos_;  // '['
    bool negated = false;
    if (more() && peek() == '^') negated = true, ++pos_;
    CodePointSet set;
    while (true) {
      if (!more()) {
        fail("missing ']'");
        return n;
      }
      if (peek() == ']') break;
      // One class atom: a single character (range endpoint) or a class escape.
      CodePointSet lo_set;
      if (!class_atom(lo_set)) return n;
      const bool lo_single = lo_set.ranges().size() == 1 && lo_set.ranges()[0].lo == lo_set.ranges()[0].hi;
      if (more() && peek() == '-' && has(1) && peek(1) != ']') {
        ++pos_;
        CodePointSet hi_set;
        if (!class_atom(hi_set)) return n;
        const bool hi_single = hi_set.ranges().size() == 1 && hi_set.ranges()[0].lo == hi_set.ranges()[0].hi;
        if (!lo_single || !hi_single) {
          fail("class escape used as a range endpoint");
          return n;
        }
        const uint32_t lo = lo_set.ranges()[0].lo, hi = hi_set.ranges()[0].lo;
        if (lo > hi) {
          fail("class range out of order");
          return n;
        }
        set.add(lo, hi);
      } else {
        set.add(lo_set);
      }
    }
    ++pos_;  // ']'
    if (negated) set = set.complement();
    if (set.empty()) {
      fail("character class matches nothing");
      return n;
    }
    n.set = std::move(set);
    return n;
  }

  bool class_atom(CodePointSet& out) {
    const uint32_t c = peek();
    ++pos_;
    if (c == '\\') return parse_escape(true, out);
    out = CodePointSet::single(c);
    return true;
  }

  std::string_view pattern_;
  std::vector<uint32_t> chars_;
  std::vector<size_t> offsets_;  // (chars_.size() + 1) byte offset of each code point, then the end
  size_t pos_ = 0;
  std::string error_;
};

// Writes GBNF for parsed nodes. An expression that matches only the empty text
// is nullopt (GBNF has no empty literal we rely on); callers make it optional.
class RegexEmitter {
 public:
  explicit RegexEmitter(const RegexGbnfOptions& options) : options_(options) {}

  std::optional<std::string> emit(const RegexNode& n, bool& can_be_empty) {
    switch (n.kind) {
      case RegexNode::Kind::Set:
        can_be_empty = false;
        return char_expr(n.set);
      case RegexNode::Kind::Begin:
      case RegexNode::Kind::End:
        can_be_empty = true;
        return std::nullopt;  // positions are checked by the caller
      case RegexNode::Kind::Seq: {
        // Every expression returned here excludes the empty text (a repeated
        // expression that matched it would loop without consuming a byte);
        // can_be_empty says whether the node's language also has it.
        std::vector<std::pair<std::string, bool>> pieces;  // (expression, may be skipped)
        for (const RegexNode& kid : n.kids) {
          bool kid_empty = false;
          auto e = emit(kid, kid_empty);
          if (e) pieces.emplace_back(*e, kid_empty);
        }
        can_be_empty = true;
        for (const auto& p : pieces) can_be_empty = can_be_empty && p.second;
        if (pieces.empty()) return std::nullopt;
        if (!can_be_empty) {
          std::string out;
          for (const auto& p : pieces) out += (out.empty() ? "" : " ") + (p.second ? "(" + p.first + ")?" : p.first);
          return out;
        }
        if (pieces.size() == 1) return pieces[0].first;
        // All optional: the first piece present is i, the later ones optional.
        std::string out = "(";
        for (size_t i = 0; i < pieces.size(); ++i) {
          if (i) out += " | ";
          out += pieces[i].first;
          for (size_t j = i + 1; j < pieces.size(); ++j) out += " (" + pieces[j].first + ")?";
        }
        return out + ")";
      }
      case RegexNode::Kind::Alt: {
        std::vector<std::string> parts;
        can_be_empty = false;
        for (const RegexNode& kid : n.kids) {
          bool kid_empty = false;
          auto e = emit(kid, kid_empty);
          can_be_empty = can_be_empty || kid_empty;
          if (e) parts.push_back(*e);
        }
        if (parts.empty()) return std::nullopt;
        if (parts.size() == 1) return "(" + parts[0] + ")";
        std::string out = "(";
        for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
        return out + ")";
      }
      case RegexNode::Kind::Repeat: {
        bool kid_empty = false;
        auto e = emit(n.kids[0], kid_empty);
        can_be_empty = kid_empty || n.min == 0;
        if (!e || n.max == 0) return std::nullopt;
        // x{m,n} with x able to match empty is x{0,n}. A repetition that can be
        // empty is written from 1 (x+, x{1,n}) and flagged, so the caller's
        // (...)? is the only way to match nothing (fewer ambiguous parses).
        const uint32_t lo = can_be_empty ? 1 : n.min;
        const std::string x = "(" + *e + ")";
        if (lo == 1 && n.max == kUnbounded) return x + "+";
        if (lo == 1 && n.max == 1) return x;
        if (n.max == kUnbounded) return x + "{" + std::to_string(lo) + ",}";
        if (lo == n.max) return x + "{" + std::to_string(lo) + "}";
        return x + "{" + std::to_string(lo) + "," + std::to_string(n.max) + "}";
      }
    }
    return std::nullopt;
  }

  // One character of `set`: a class (raw text), or a helper rule for its
  // canonical JSON encoding (deduplicated by set).
  std::string char_expr(const CodePointSet& set) {
    if (!options_.json_string) return set.gbnf_class();
    const std::string body = set.gbnf_json_char();
    if (body.find(" | ") == std::string::npos) return body;
    auto it = helper_names_.find(set.key());
    if (it != helper_names_.end()) return it->second;
    const std::string name = options_.rule_prefix + "-c" + std::to_string(helper_names_.size());
    helper_names_.emplace(set.key(), name);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  std::string take_rules() { return std::move(rules_); }

 private:
  const RegexGbnfOptions& options_;
  std::map<std::string, std::string> helper_names_;
  std::string rules_;
};

// Anchors may only open or close a top-level alternative.
Status check_anchors(const RegexNode& n, bool top_alt, bool top_seq) {
  if (n.kind == RegexNode::Kind::Begin || n.kind == RegexNode::Kind::End)
    return make_error(std::string("regex: anchor '") + (n.kind == RegexNode::Kind::Begin ? "^" : "$") +
                      "' is only supported at the start / end of the pattern (offset " + std::to_string(n.offset) + ")");
  for (size_t i = 0; i < n.kids.size(); ++i) {
    const RegexNode& kid = n.kids[i];
    if (top_seq && ((kid.kind == RegexNode::Kind::Begin && i == 0) ||
                    (kid.kind == RegexNode::Kind::End && i + 1 == n.kids.size())))
      continue;
    GB_TRY(check_anchors(kid, false, top_alt && n.kind == RegexNode::Kind::Alt));
  }
  return Status::success();
}

}  // namespace

Result<RegexGbnf> regex_to_gbnf_parts(std::string_view pattern, const RegexGbnfOptions& options) {
  RegexParser parser(pattern);
  auto parsed = parser.parse();
  if (!parsed.ok()) return parsed.error();
  const RegexNode& root = parsed.value();
  GB_TRY(check_anchors(root, true, false));

  RegexEmitter emitter(options);
  std::vector<std::string> parts;
  bool can_be_empty = false;
  for (const RegexNode& seq : root.kids) {
    const bool begins = options.anchored || (!seq.kids.empty() && seq.kids.front().kind == RegexNode::Kind::Begin);
    const bool ends = options.anchored || (!seq.kids.empty() && seq.kids.back().kind == RegexNode::Kind::End);
    bool body_empty = false;
    auto body = emitter.emit(seq, body_empty);
    // Unanchored sides are padded with "any character, any number of times".
    std::string any;
    if (!begins || !ends) any = "(" + emitter.char_expr(CodePointSet::all()) + ")*";
    std::string out;
    if (!begins) out = any;
    if (body) {
      if (!out.empty()) out += ' ';
      out += body_empty ? "(" + *body + ")?" : *body;
    }
    if (!ends) out += (out.empty() ? "" : " ") + any;
    can_be_empty = can_be_empty || body_empty || !body || !begins || !ends;
    if (!out.empty()) parts.push_back(out);
  }
  RegexGbnf result;
  result.can_be_empty = can_be_empty;
  result.rules = emitter.take_rules();
  if (parts.empty()) return result;  // only the empty text
  for (size_t i = 0; i < parts.size(); ++i) result.expression += (i ? " | " : "") + parts[i];
  // An alternative that matched only the empty text left no part: keep it.
  if (parts.size() < root.kids.size()) result.expression = "(" + result.expression + ")?";
  return result;
}

Result<std::string> regex_to_gbnf(std::string_view pattern, bool anchored) {
  RegexGbnfOptions options;
  options.anchored = anchored;
  auto parts = regex_to_gbnf_parts(pattern, options);
  if (!parts.ok()) return parts.error();
  if (parts->expression.empty()) return make_error("regex: the pattern matches only the empty text");
  std::string out = "root ::= " + parts->expression + "\n" + parts->rules;
  return out;
}

}  // namespace gb
