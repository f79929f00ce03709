// A merged conjunction (Merged) to GBNF: the emitters of SchemaCompiler
// (json_schema_compiler.h) for strings, arrays, objects, enum / const values and
// literals, bounded repetition, and the shared base rules ("value", "string",
// "number", "ws", ...) that generated rules refer to.
#include "grammar/json_schema_compiler.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "grammar/code_point_set.h"
#include "grammar/gbnf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_numbers.h"
#include "grammar/json_schema_values.h"
#include "grammar/regex.h"

namespace gb::json_schema_detail {

using namespace json_schema_values;

// The shared rules, for any-value grammars too.
std::string SchemaCompiler::base_rules(std::set<std::string> used) const {
  // Dependencies first.
  if (used.count("value")) used.insert({"object", "array", "string", "number"});
  if (used.count("object")) used.insert({"string", "value"});
  if (used.count("array")) used.insert("value");
  if (used.count("string")) used.insert("char");
  if (used.count("char")) used.insert({"u4", "hex"});
  if (used.count("u4")) used.insert("hex");
  if (used.count("value") || used.count("object") || used.count("array")) used.insert({"object", "array", "string", "number", "char", "u4", "hex"});
  std::string out;
  auto rule = [&](const char* name, const std::string& body) {
    if (used.count(name)) out += std::string(name) + " ::= " + body + "\n";
  };
  rule("value", "object | array | string | number | \"true\" | \"false\" | \"null\"");
  rule("object", "\"{\"" + ws_ + " ( string" + ws_ + " \":\"" + ws_ + " value" + ws_ + " ( \",\"" + ws_ + " string" + ws_ +
                     " \":\"" + ws_ + " value" + ws_ + " )* )? \"}\"");
  rule("array", "\"[\"" + ws_ + " ( value" + ws_ + " ( \",\"" + ws_ + " value" + ws_ + " )* )? \"]\"");
  rule("string", "\"\\\"\" char* \"\\\"\"");
  rule("char", "[^\\\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\\\"\\\\/bfnrt] | \"u\" u4 )");
  // \uXXXX: a BMP scalar, or a surrogate pair (one code point); lone surrogates are refused.
  rule("u4", "[0-9a-cA-Ce-fE-F] hex hex hex | [dD] [0-7] hex hex | [dD] [89abAB] hex hex \"\\\\u\" [dD] [c-fC-F] hex hex");
  rule("hex", "[0-9a-fA-F]");
  // Digit runs bounded (kJsonNumberMaxIntDigits / kJsonNumberMaxFracDigits,
  // exponents of 3 digits): a sampled number cannot run on forever.
  std::string int_more = "{0,";
  int_more += std::to_string(kJsonNumberMaxIntDigits - 1);
  int_more += '}';
  std::string frac = "{1,";
  frac += std::to_string(kJsonNumberMaxFracDigits);
  frac += '}';
  rule("number", "\"-\"? ( \"0\" | [1-9] [0-9]" + int_more + " ) ( \".\" [0-9]" + frac +
                     " )? ( [eE] [-+]? [0-9]{1,3} )?");
  rule("integer", "\"-\"? ( \"0\" | [1-9] [0-9]" + int_more + " ) ( \".\" \"0\"" + frac + " )?");
  rule("jchar", CodePointSet::all().gbnf_json_char());
  if (options_.max_whitespace > 0 && used.count("ws"))
    out += "ws ::= [ \\t\\n]{0," + std::to_string(options_.max_whitespace) + "}\n";
  return out;
}

std::optional<std::string> SchemaCompiler::emit(Merged& m, const std::string& name) {
  if (m.values) return emit_values(m);
  std::vector<std::string> alts;
  if (m.types & kNull) alts.push_back("\"null\"");
  if (m.types & kBool) alts.push_back("\"true\" | \"false\"");
  if (m.types & kInt) {
    const bool fractions = (m.types & kFrac) != 0;
    if (!m.bounds.lo && !m.bounds.hi) {
      alts.push_back(base(fractions ? "number" : "integer"));
    } else {
      std::string rules;
      if (auto e = number_range_gbnf(m.bounds, !fractions, name, rules)) {
        alts.push_back(*e);
        rules_.push_back(rules);
      }
    }
  }
  if (m.types & kString) {
    if (auto e = emit_string(m, name)) alts.push_back(*e);
  }
  if (m.types & kArray) {
    if (auto e = emit_array(m)) alts.push_back(*e);
  }
  if (m.types & kObject) {
    if (auto e = emit_object(m, name)) alts.push_back(*e);
  }
  if (failed() || alts.empty()) return std::nullopt;
  std::string body;
  for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
  return body;
}

// x repeated between lo and hi (nullopt: unbounded) times, unambiguously,
// within GBNF's repetition limit; "" for none at all.
std::string SchemaCompiler::repeat(const std::string& x, uint64_t lo, std::optional<uint64_t> hi) {
  const uint64_t cap = Grammar::kMaxRepetition;
  std::vector<std::string> parts;
  uint64_t fixed = lo;
  while (fixed > cap) {
    parts.push_back("(" + x + "){" + std::to_string(cap) + "}");
    fixed -= cap;
  }
  if (fixed > 0) parts.push_back("(" + x + ")" + (fixed == 1 ? "" : "{" + std::to_string(fixed) + "}"));
  if (!hi) {
    parts.push_back("(" + x + ")*");
  } else if (*hi > lo) {
    const uint64_t span = *hi - lo;
    if (span <= cap) {
      parts.push_back("(" + x + "){0," + std::to_string(span) + "}");
    } else {
      // span = q * cap + r: fewer than q full blocks and a short tail, or
      // exactly q blocks and at most r more (the block count is forced).
      const uint64_t q = span / cap, r = span % cap;
      const std::string block = "((" + x + "){" + std::to_string(cap) + "})";
      std::string low = block + "{0," + std::to_string(q - 1) + "} (" + x + "){0," + std::to_string(cap - 1) + "}";
      std::string high = block + "{" + std::to_string(q) + "}" + (r ? " (" + x + "){0," + std::to_string(r) + "}" : "");
      parts.push_back("(" + low + " | " + high + ")");
    }
  }
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : " ") + part;
  return out;
}

std::optional<std::string> SchemaCompiler::emit_string(const Merged& m, const std::string& name) {
  if (m.max_length && *m.max_length < m.min_length) return std::nullopt;
  const std::string quote = "\"\\\"\"";
  if (!m.patterns.empty()) {
    for (const auto& [pat, at] : m.patterns)
      if (pat != m.patterns[0].first) {
        fail_keyword("pattern", at, "a second, different pattern on the same string (patterns cannot be intersected)");
        return std::nullopt;
      }
    if (m.min_length > 0 || m.max_length) {
      fail_keyword("pattern", m.patterns[0].second, "together with minLength/maxLength is not supported");
      return std::nullopt;
    }
    RegexGbnfOptions ro;
    ro.anchored = false;
    ro.json_string = true;
    ro.rule_prefix = name + "-re";
    auto re = regex_to_gbnf_parts(m.patterns[0].first, ro);
    if (!re.ok()) {
      fail_keyword("pattern", m.patterns[0].second, re.error().message);
      return std::nullopt;
    }
    if (!re->rules.empty()) rules_.push_back(re->rules);
    return re->expression.empty() ? quote + " " + quote : quote + " (" + re->expression + ") " + quote;
  }
  const std::string chars = repeat(base("char"), m.min_length, m.max_length);
  return quote + (chars.empty() ? "" : " " + chars) + " " + quote;
}

std::optional<std::string> SchemaCompiler::emit_array(const Merged& m) {
  size_t k = 0;  // positions with their own schemas
  for (const auto& part : m.arrays) k = std::max(k, part.prefix.size());
  std::optional<uint64_t> hi = m.max_items;
  std::vector<std::string> position;
  for (size_t i = 0; i < k && (!hi || i < *hi); ++i) {
    Conj conj;
    for (const auto& part : m.arrays) {
      if (i < part.prefix.size()) conj.push_back(part.prefix[i]);
      else if (part.items) conj.push_back(*part.items);
    }
    auto rule = compile(conj);
    if (failed()) return std::nullopt;
    if (!rule) {
      hi = i;  // nothing fits here: the array ends before
      break;
    }
    position.push_back(*rule);
  }
  std::optional<std::string> rest;
  if (!hi || *hi > k) {
    Conj conj;
    for (const auto& part : m.arrays)
      if (part.items) conj.push_back(*part.items);
    rest = compile(conj);
    if (failed()) return std::nullopt;
    if (!rest) hi = std::min<uint64_t>(hi.value_or(k), k);
  }
  if (hi && *hi < m.min_items) return std::nullopt;
  const std::string w = ws();
  // Elements from index i on, after i elements (i >= 1) were written.
  std::string tail;
  const uint64_t n_pos = position.size();
  if (rest && (!hi || *hi > n_pos)) {
    const uint64_t lo_rest = m.min_items > n_pos ? m.min_items - n_pos : 0;
    std::optional<uint64_t> hi_rest;
    if (hi) hi_rest = *hi - n_pos;
    tail = repeat("\",\"" + w + " " + *rest + w, lo_rest, hi_rest);
  }
  for (size_t i = position.size(); i-- > 1;) {
    std::string piece = "\",\"" + w + " " + position[i] + w + (tail.empty() ? "" : " " + tail);
    tail = i >= m.min_items ? "(" + piece + ")?" : piece;
  }
  std::string first;
  if (!position.empty()) {
    first = position[0] + w + (tail.empty() ? "" : " " + tail);
  } else if (rest && (!hi || *hi > 0)) {
    const uint64_t lo_more = m.min_items > 1 ? m.min_items - 1 : 0;
    std::optional<uint64_t> hi_more;
    if (hi) hi_more = *hi - 1;
    const std::string more = repeat("\",\"" + w + " " + *rest + w, lo_more, hi_more);
    first = *rest + w + (more.empty() ? "" : " " + more);
  }
  std::string out = "\"[\"" + w;
  if (!first.empty()) out += m.min_items > 0 ? " " + first : " (" + first + ")?";
  return out + " \"]\"";
}

// A key (with its quotes) that is not one of `names`, in canonical escaping:
// a trie of the names, each node's rule naming the ways to leave it.
std::string SchemaCompiler::key_not_in(const std::vector<std::string>& names, const std::string& name) {
  struct TrieNode {
    std::map<uint32_t, size_t> kids;
    bool terminal = false;
  };
  std::vector<TrieNode> trie(1);
  for (const std::string& n : names) {
    std::vector<uint32_t> cps;
    decode_utf8(n, cps);
    size_t at = 0;
    for (const uint32_t cp : cps) {
      auto it = trie[at].kids.find(cp);
      if (it == trie[at].kids.end()) {
        trie.emplace_back();
        it = trie[at].kids.emplace(cp, trie.size() - 1).first;
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }
  used_base_.insert("jchar");
  const std::string rest = name + "-kr";
  rules_.push_back(rest + " ::= jchar* \"\\\"\"\n");
  for (size_t i = 0; i < trie.size(); ++i) {
    std::string body;
    if (!trie[i].terminal) body = "\"\\\"\"";
    CodePointSet other = CodePointSet::all();
    for (const auto& [cp, kid] : trie[i].kids) {
      other = other.minus(CodePointSet::single(cp));
      body += (body.empty() ? "" : " | ") + gbnf_literal(json_canonical_char(cp)) + " " + name + "-k" + std::to_string(kid);
    }
    if (!other.empty()) body += (body.empty() ? "" : " | ") + std::string("(") + other.gbnf_json_char() + ") " + rest;
    rules_.push_back(name + "-k" + std::to_string(i) + " ::= " + body + "\n");
  }
  return "\"\\\"\" " + name + "-k0";
}

std::optional<std::string> SchemaCompiler::emit_object(const Merged& m, const std::string& name) {
  std::vector<std::string> order = m.property_order;
  for (const std::string& r : m.required)
    if (!m.properties.count(r)) order.push_back(r);
  struct Member {
    std::string text;  // key ws ":" ws value ws
    bool required;
  };
  std::vector<Member> members;
  const std::string w = ws();
  for (const std::string& prop : order) {
    Conj conj;
    if (auto it = m.properties.find(prop); it != m.properties.end()) conj = it->second;
    for (const auto& part : m.objects)
      if (part.additional && !part.names.count(prop)) conj.push_back(*part.additional);
    const bool required = std::find(m.required.begin(), m.required.end(), prop) != m.required.end();
    auto value = compile(conj);
    if (failed()) return std::nullopt;
    if (!value) {
      if (required) return std::nullopt;
      continue;
    }
    std::vector<uint32_t> cps;
    if (!decode_utf8(prop, cps)) {
      fail("property name at " + where(name) + " is not valid UTF-8");
      return std::nullopt;
    }
    members.push_back({json_key_literal(cps) + w + " \":\"" + w + " " + *value + w, required});
  }
  Conj extra_conj;
  for (const auto& part : m.objects)
    if (part.additional) extra_conj.push_back(*part.additional);
  auto extra_value = compile(extra_conj);
  if (failed()) return std::nullopt;
  std::string extra_member;
  if (extra_value) {
    const std::string key = order.empty() ? base("string") : key_not_in(order, name);
    extra_member = key + w + " \":\"" + w + " " + *extra_value + w;
  }
  // after-i: members from i on, at least one written; first-i: none written yet.
  const size_t n = members.size();
  auto after = [&](size_t i) { return name + "-a" + std::to_string(i); };
  auto first = [&](size_t i) { return name + "-f" + std::to_string(i); };
  rules_.push_back(after(n) + " ::= " + (extra_value ? "(\",\"" + w + " " + extra_member + ")*" : "\"\"") + "\n");
  rules_.push_back(first(n) + " ::= " + (extra_value ? "(" + extra_member + " " + after(n) + ")?" : "\"\"") + "\n");
  for (size_t i = n; i-- > 0;) {
    const std::string piece = "\",\"" + w + " " + members[i].text;
    rules_.push_back(after(i) + " ::= " + (members[i].required ? piece : "(" + piece + ")?") + " " + after(i + 1) + "\n");
    const std::string take = members[i].text + " " + after(i + 1);
    rules_.push_back(first(i) + " ::= " + (members[i].required ? take : take + " | " + first(i + 1)) + "\n");
  }
  return "\"{\"" + w + " " + first(0) + " \"}\"";
}

// enum / const: the values that the rest of the conjunction allows, each as
// a literal grammar.
std::optional<std::string> SchemaCompiler::emit_values(const Merged& m) {
  std::vector<std::string> alts;
  for (const ojson* v : *m.values) {
    const uint8_t bit = value_bit(*v);
    if (!(m.types & bit)) continue;
    if (bit == kString) {
      if (!m.patterns.empty()) {
        fail("keyword " + m.values_keyword + ": enum/const together with 'pattern' is not supported");
        return std::nullopt;
      }
      std::vector<uint32_t> cps;
      if (!decode_utf8(v->get<std::string>(), cps)) continue;
      if (cps.size() < m.min_length || (m.max_length && cps.size() > *m.max_length)) continue;
    } else if (bit & (kInt | kFrac)) {
      auto d = decimal_of(*v);
      if (!d.ok()) {
        fail("keyword " + m.values_keyword + ": " + d.error().message + " (limit)");
        return std::nullopt;
      }
      if (m.bounds.lo) {
        const int c = compare_decimal(*d, *m.bounds.lo);
        if (c < 0 || (c == 0 && m.bounds.lo_exclusive)) continue;
      }
      if (m.bounds.hi) {
        const int c = compare_decimal(*d, *m.bounds.hi);
        if (c > 0 || (c == 0 && m.bounds.hi_exclusive)) continue;
      }
    } else if (bit == kArray) {
      if (!m.arrays.empty()) {
        fail("keyword " + m.values_keyword + ": enum/const together with " + m.array_keyword + " is not supported");
        return std::nullopt;
      }
      if (v->size() < m.min_items || (m.max_items && v->size() > *m.max_items)) continue;
    } else if (bit == kObject) {
      if (!m.objects.empty() || !m.properties.empty()) {
        fail("keyword " + m.values_keyword + ": enum/const together with " + m.object_keyword + " is not supported");
        return std::nullopt;
      }
      bool has_all = true;
      for (const std::string& r : m.required) has_all = has_all && v->contains(r);
      if (!has_all) continue;
    }
    auto lit = literal(*v);
    if (!lit) return std::nullopt;
    alts.push_back(*lit);
  }
  if (alts.empty()) return std::nullopt;
  std::string body;
  for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
  return body;
}

std::optional<std::string> SchemaCompiler::literal(const ojson& v) {
  const std::string w = ws();
  switch (v.type()) {
    case ojson::value_t::null:
    case ojson::value_t::boolean: return gbnf_literal(v.dump());
    case ojson::value_t::string: {
      std::vector<uint32_t> cps;
      if (!decode_utf8(v.get<std::string>(), cps)) {
        fail("keyword 'enum'/'const': a string is not valid UTF-8");
        return std::nullopt;
      }
      return json_key_literal(cps);
    }
    case ojson::value_t::array: {
      std::string out = "\"[\"" + w;
      for (size_t i = 0; i < v.size(); ++i) {
        auto e = literal(v[i]);
        if (!e) return std::nullopt;
        out += (i ? " \",\"" + w : std::string()) + " (" + *e + ")" + w;
      }
      return "(" + out + " \"]\")";
    }
    case ojson::value_t::object: {
      std::string out = "\"{\"" + w;
      size_t i = 0;
      for (auto it = v.begin(); it != v.end(); ++it, ++i) {
        std::vector<uint32_t> cps;
        decode_utf8(it.key(), cps);
        auto e = literal(*it);
        if (!e) return std::nullopt;
        out += (i ? " \",\"" + w : std::string()) + " " + json_key_literal(cps) + w + " \":\"" + w + " (" + *e + ")" + w;
      }
      return "(" + out + " \"}\")";
    }
    default: {
      auto d = decimal_of(v);
      if (!d.ok()) {
        fail(d.error().message + " (limit)");
        return std::nullopt;
      }
      return "(" + number_literal_gbnf(*d) + ")";
    }
  }
}

}  // namespace gb::json_schema_detail
