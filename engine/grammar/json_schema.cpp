// JSON Schema -> GBNF; see json_schema.h (what is supported) and docs/grammars.md.
//
// The compiler works on conjunctions: a list of subschemas (JSON pointers into
// the document) that must all hold. $ref and allOf add their targets to the
// list, anyOf / oneOf are distributed over it (S and (A or B) = (S and A) or
// (S and B)), and what is left is merged keyword by keyword (types intersect,
// bounds tighten, properties and items combine per position). Every distinct
// conjunction becomes one GBNF rule, memoized by its sorted pointers, so a
// recursive schema is a recursive grammar and a shared $def one rule.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/utf8.h"
#include "grammar/code_point_set.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_numbers.h"
#include "grammar/json_schema_values.h"
#include "grammar/regex.h"

namespace gb {
namespace {

using ojson = nlohmann::ordered_json;
using namespace json_schema_values;

struct SchemaRef {
  const ojson* node = nullptr;
  std::string pointer;   // JSON pointer of node in the document ("" = root)
  uint8_t consumed = 0;  // 1: its anyOf is distributed already; 2: its oneOf
};
using Conj = std::vector<SchemaRef>;

// The keywords of one conjunction, merged.
struct Merged {
  uint8_t types = kAllTypes;
  std::optional<std::vector<const ojson*>> values;  // enum / const, intersected
  std::string values_keyword;                        // "enum at #/..", for errors
  uint64_t min_length = 0;
  std::optional<uint64_t> max_length;
  std::vector<std::pair<std::string, std::string>> patterns;  // (pattern, where)
  NumberBounds bounds;
  uint64_t min_items = 0;
  std::optional<uint64_t> max_items;
  struct ArrayPart {
    std::vector<SchemaRef> prefix;
    std::optional<SchemaRef> items;
  };
  std::vector<ArrayPart> arrays;
  std::vector<std::string> property_order;
  std::map<std::string, Conj> properties;
  struct ObjectPart {
    std::set<std::string> names;
    std::optional<SchemaRef> additional;
  };
  std::vector<ObjectPart> objects;
  std::vector<std::string> required;
  std::string object_keyword, array_keyword;  // the first such keyword, for errors
};

class SchemaCompiler {
 public:
  SchemaCompiler(const ojson& root, const JsonSchemaOptions& options) : root_(root), options_(options) {
    ws_ = options.max_whitespace > 0 ? " ws" : "";
  }

  Result<std::string> run() {
    auto top = compile({SchemaRef{&root_, "", 0}});
    if (!error_.empty()) return make_error(error_);
    if (!top) return make_error("json schema: the schema accepts no value (it is false, or its constraints contradict)");
    std::string out = "root ::= " + *top + "\n";
    for (const std::string& rule : rules_) out += rule;
    out += base_rules(used_base_);
    if (out.size() > Grammar::kMaxSourceBytes)
      return make_error("json schema: the grammar would be " + std::to_string(out.size()) +
                        " bytes of GBNF, above the limit of " + std::to_string(Grammar::kMaxSourceBytes));
    return out;
  }

  // The shared rules, for any-value grammars too.
  std::string base_rules(std::set<std::string> used) const {
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

  std::set<std::string> used_base_;

 private:
  bool failed() const { return !error_.empty(); }
  void fail(const std::string& message) {
    if (error_.empty()) error_ = "json schema: " + message;
  }
  void fail_keyword(const std::string& keyword, const std::string& pointer, const std::string& message) {
    fail("keyword '" + keyword + "' at " + where(pointer) + ": " + message);
  }
  std::string base(const char* name) {
    used_base_.insert(name);
    if (ws_.size() && (std::string(name) == "object" || std::string(name) == "array" || std::string(name) == "value"))
      used_base_.insert("ws");
    return name;
  }
  std::string ws() {
    if (!ws_.empty()) used_base_.insert("ws");
    return ws_;
  }

  // ---- $ref -------------------------------------------------------------
  std::optional<SchemaRef> resolve(const std::string& ref, const std::string& at) {
    std::string fragment = ref;
    if (!ref.empty() && ref[0] != '#') {
      // Only the document's own $id, followed by a fragment, names this document.
      const auto id = root_.is_object() ? root_.find("$id") : root_.end();
      const std::string own = (root_.is_object() && id != root_.end() && id->is_string()) ? id->get<std::string>() : "";
      const size_t hash = ref.find('#');
      if (own.empty() || ref.substr(0, hash) != own) {
        fail_keyword("$ref", at, "'" + ref + "' is a remote reference (only references into this document are supported)");
        return std::nullopt;
      }
      fragment = hash == std::string::npos ? "#" : ref.substr(hash);
    }
    if (fragment.size() > 1 && fragment[1] != '/') {
      fail_keyword("$ref", at, "'" + ref + "' names an anchor (only JSON-pointer references are supported)");
      return std::nullopt;
    }
    // Percent-decoding, then the pointer's tokens (~1 = '/', ~0 = '~').
    std::string pointer;
    for (size_t i = 1; i < fragment.size(); ++i) {
      if (fragment[i] == '%' && i + 2 < fragment.size() && std::isxdigit(static_cast<unsigned char>(fragment[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(fragment[i + 2]))) {
        pointer += static_cast<char>(std::stoi(fragment.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        pointer += fragment[i];
      }
    }
    const ojson* node = &root_;
    std::string canonical;
    size_t pos = 0;
    while (pos < pointer.size()) {
      const size_t next = pointer.find('/', pos + 1);
      std::string raw = pointer.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      std::string token;
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
          token += raw[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          token += raw[i];
        }
      }
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 token.size() < 10 && std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        fail_keyword("$ref", at, "'" + ref + "' does not resolve in this document");
        return std::nullopt;
      }
      canonical = child(canonical, token);
      pos = next == std::string::npos ? pointer.size() : next;
    }
    return SchemaRef{node, canonical, 0};
  }

  // ---- conjunctions -----------------------------------------------------
  // Adds the targets of $ref and the branches of allOf; false if a member is
  // the false schema (nothing can be valid).
  bool expand(const Conj& in, Conj& out) {
    // One entry per pointer; a subschema reached again (a $ref or allOf that
    // leads back to it) keeps the anyOf / oneOf already distributed.
    std::map<std::string, size_t> seen;
    std::vector<SchemaRef> work(in.rbegin(), in.rend());
    while (!work.empty() && !failed()) {
      SchemaRef ref = std::move(work.back());
      work.pop_back();
      const ojson& node = *ref.node;
      if (node.is_boolean()) {
        if (!node.get<bool>()) return false;
        continue;
      }
      if (!node.is_object()) {
        fail("the schema at " + where(ref.pointer) + " is neither an object nor a boolean");
        return true;
      }
      if (auto it = seen.find(ref.pointer); it != seen.end()) {
        out[it->second].consumed |= ref.consumed;
        continue;
      }
      seen.emplace(ref.pointer, out.size());
      if (out.size() >= 256) {
        fail("more than 256 subschemas apply together at " + where(in.front().pointer) + " (limit)");
        return true;
      }
      out.push_back(ref);
      if (auto it = node.find("$ref"); it != node.end()) {
        if (!it->is_string()) {
          fail_keyword("$ref", ref.pointer, "must be a string");
          return true;
        }
        if (auto target = resolve(it->get<std::string>(), child(ref.pointer, "$ref"))) work.push_back(*target);
      }
      if (auto it = node.find("allOf"); it != node.end()) {
        if (!it->is_array() || it->empty()) {
          fail_keyword("allOf", ref.pointer, "must be a non-empty array of schemas");
          return true;
        }
        for (size_t i = it->size(); i-- > 0;)
          work.push_back(SchemaRef{&(*it)[i], child(child(ref.pointer, "allOf"), std::to_string(i)), 0});
      }
    }
    return true;
  }

  static std::string conj_key(const Conj& conj) {
    std::vector<std::string> parts;
    for (const SchemaRef& r : conj) parts.push_back(r.pointer + "#" + std::to_string(r.consumed));
    std::sort(parts.begin(), parts.end());
    std::string key;
    for (const std::string& p : parts) key += p + "|";
    return key;
  }

  // The rule name of a conjunction, or nullopt when no value satisfies it.
  std::optional<std::string> compile(const Conj& conj) {
    if (failed()) return std::nullopt;
    Conj expanded;
    if (!expand(conj, expanded) || failed()) return std::nullopt;
    if (expanded.empty()) return base("value");  // no constraint at all
    const std::string key = conj_key(expanded);
    if (auto it = memo_.find(key); it != memo_.end()) {
      if (it->second.empty()) return std::nullopt;
      referenced_early_.insert(it->second);
      return it->second;
    }
    if (depth_ >= kJsonSchemaMaxDepth) {
      fail("subschemas nested deeper than " + std::to_string(kJsonSchemaMaxDepth) + " at " + where(expanded.front().pointer) + " (limit)");
      return std::nullopt;
    }
    if (memo_.size() >= options_.max_rules) {
      fail("the schema needs more than " + std::to_string(options_.max_rules) + " grammar rules (limit)");
      return std::nullopt;
    }
    const std::string name = name_hint(expanded.front().pointer) + "-" + std::to_string(memo_.size());
    memo_[key] = name;
    ++depth_;
    auto body = build(expanded, name);
    --depth_;
    if (failed()) return std::nullopt;
    if (!body) {
      memo_[key] = "";
      if (referenced_early_.count(name))
        fail("the schema at " + where(expanded.front().pointer) + " accepts no value but is used recursively");
      return std::nullopt;
    }
    rules_.push_back(name + " ::= " + *body + "\n");
    return name;
  }

  std::optional<std::string> build(const Conj& conj, const std::string& name) {
    // anyOf / oneOf: distribute the first one over the conjunction.
    for (size_t i = 0; i < conj.size(); ++i) {
      for (const auto& [keyword, bit] : {std::pair<const char*, uint8_t>{"anyOf", 1}, {"oneOf", 2}}) {
        if (conj[i].consumed & bit) continue;
        auto it = conj[i].node->find(keyword);
        if (it == conj[i].node->end()) continue;
        const std::string at = child(conj[i].pointer, keyword);
        if (!it->is_array() || it->empty()) {
          fail_keyword(keyword, conj[i].pointer, "must be a non-empty array of schemas");
          return std::nullopt;
        }
        Conj rest = conj;
        rest[i].consumed |= bit;
        std::vector<std::string> alternatives;
        std::vector<Conj> branches;
        for (size_t b = 0; b < it->size(); ++b) {
          Conj branch = rest;
          branch.push_back(SchemaRef{&(*it)[b], child(at, std::to_string(b)), 0});
          auto rule = compile(branch);
          if (failed()) return std::nullopt;
          if (!rule) continue;
          alternatives.push_back(*rule);
          branches.push_back(std::move(branch));
        }
        if (bit == 2 && !check_one_of(branches, conj[i].pointer)) return std::nullopt;
        if (alternatives.empty()) return std::nullopt;
        std::string body;
        for (const std::string& a : alternatives) body += (body.empty() ? "" : " | ") + a;
        return body;
      }
    }
    Merged m;
    for (const SchemaRef& ref : conj) {
      merge(ref, m);
      if (failed()) return std::nullopt;
    }
    return emit(m, name);
  }

  // ---- oneOf ------------------------------------------------------------
  // What a conjunction can be, as far as disjointness goes (a superset:
  // anything not looked at only narrows it further).
  struct Summary {
    bool never = false;
    uint8_t types = kAllTypes;
    std::optional<std::vector<const ojson*>> values;
    std::set<std::string> required;
    std::map<std::string, Conj> properties;
  };

  Summary summarize(const Conj& conj) {
    Summary s;
    Conj expanded;
    if (!expand(conj, expanded)) {
      s.never = true;
      return s;
    }
    for (const SchemaRef& ref : expanded) {
      const ojson& node = *ref.node;
      if (auto it = node.find("type"); it != node.end()) {
        uint8_t bits = 0;
        if (it->is_string()) bits = type_bit(it->get<std::string>());
        if (it->is_array())
          for (const auto& t : *it) bits |= t.is_string() ? type_bit(t.get<std::string>()) : 0;
        s.types &= bits;
      }
      for (const char* keyword : {"enum", "const"}) {
        auto it = node.find(keyword);
        if (it == node.end()) continue;
        std::vector<const ojson*> vals;
        if (std::string(keyword) == "const") vals.push_back(&*it);
        else if (it->is_array()) for (const auto& v : *it) vals.push_back(&v);
        if (s.values) {
          std::vector<const ojson*> kept;
          for (const ojson* v : *s.values)
            for (const ojson* w : vals)
              if (json_equal(*v, *w)) { kept.push_back(v); break; }
          s.values = kept;
        } else {
          s.values = vals;
        }
      }
      if (auto it = node.find("required"); it != node.end() && it->is_array())
        for (const auto& r : *it) if (r.is_string()) s.required.insert(r.get<std::string>());
      if (auto it = node.find("properties"); it != node.end() && it->is_object())
        for (auto p = it->begin(); p != it->end(); ++p)
          s.properties[p.key()].push_back(SchemaRef{&*p, child(child(ref.pointer, "properties"), p.key()), 0});
    }
    if (s.values) {
      uint8_t bits = 0;
      for (const ojson* v : *s.values) bits |= value_bit(*v);
      s.types &= bits;
    }
    s.never = s.types == 0;
    return s;
  }

  bool disjoint(const Summary& a, const Summary& b, int depth) {
    if (a.never || b.never || (a.types & b.types) == 0) return true;
    if (a.values && b.values) {
      for (const ojson* v : *a.values)
        for (const ojson* w : *b.values)
          if (json_equal(*v, *w)) return false;
      return true;
    }
    // Objects told apart by a required property whose values cannot agree.
    if ((a.types & b.types) == kObject && depth < 4) {
      for (const std::string& name : a.required) {
        if (!b.required.count(name)) continue;
        auto pa = a.properties.find(name), pb = b.properties.find(name);
        if (pa == a.properties.end() || pb == b.properties.end()) continue;
        if (disjoint(summarize(pa->second), summarize(pb->second), depth + 1)) return true;
      }
    }
    return false;
  }

  bool check_one_of(const std::vector<Conj>& branches, const std::string& pointer) {
    std::vector<Summary> summaries;
    for (const Conj& b : branches) summaries.push_back(summarize(b));
    for (size_t i = 0; i < summaries.size(); ++i) {
      for (size_t j = i + 1; j < summaries.size(); ++j) {
        if (!disjoint(summaries[i], summaries[j], 0)) {
          fail_keyword("oneOf", pointer, "branches " + std::to_string(i) + " and " + std::to_string(j) +
                                             " may both match, and a grammar cannot express 'exactly one' "
                                             "(only branches with disjoint types, enum/const values or a "
                                             "required discriminating property are supported)");
          return false;
        }
      }
    }
    return true;
  }

  // ---- merging ----------------------------------------------------------
  std::optional<uint64_t> count_value(const ojson& v, const std::string& keyword, const std::string& pointer) {
    auto d = v.is_number() ? decimal_of(v) : Result<Decimal>(make_error(""));
    if (!d.ok() || !d->is_integer() || d->negative) {
      fail_keyword(keyword, pointer, "must be a non-negative integer");
      return std::nullopt;
    }
    if (d->int_digits.size() > 7 || std::stoull(d->int_digits) > kJsonSchemaMaxCount) {
      fail_keyword(keyword, pointer, v.dump() + " is above the limit of " + std::to_string(kJsonSchemaMaxCount));
      return std::nullopt;
    }
    return std::stoull(d->int_digits);
  }

  void merge(const SchemaRef& ref, Merged& m) {
    const ojson& node = *ref.node;
    const std::string& p = ref.pointer;
    bool has_properties = false;
    std::optional<SchemaRef> additional;
    std::set<std::string> names;
    Merged::ArrayPart array_part;
    bool has_array_part = false;
    for (auto it = node.begin(); it != node.end() && !failed(); ++it) {
      const std::string& k = it.key();
      const ojson& v = *it;
      if (k == "$schema") {
        // Another dialect or a custom meta-schema can change what keywords mean.
        const std::string uri = v.is_string() ? v.get<std::string>() : "";
        if (uri != "https://json-schema.org/draft/2020-12/schema" && uri != "https://json-schema.org/draft/2020-12/schema#")
          return fail_keyword(k, p, "only the draft 2020-12 meta-schema is supported, not " + v.dump());
      } else if (k == "title" || k == "description" || k == "$comment" || k == "examples" ||
          k == "default" || k == "deprecated" || k == "readOnly" || k == "writeOnly" || k == "$anchor" ||
          k == "$dynamicAnchor" || k == "$defs" || k == "definitions" || k == "$ref" || k == "allOf" ||
          k == "anyOf" || k == "oneOf") {
        continue;  // annotations, containers, or handled by expand() / build()
      } else if (k == "$id") {
        if (!p.empty()) fail_keyword(k, p, "embedded schema resources ($id below the root) are not supported");
      } else if (k == "type") {
        uint8_t bits = 0;
        std::vector<ojson> list = v.is_array() ? std::vector<ojson>(v.begin(), v.end()) : std::vector<ojson>{v};
        for (const ojson& t : list) {
          const uint8_t b = t.is_string() ? type_bit(t.get<std::string>()) : 0;
          if (b == 0) return fail_keyword(k, p, "unknown type " + t.dump());
          bits |= b;
        }
        m.types &= bits;
      } else if (k == "enum" || k == "const") {
        std::vector<const ojson*> vals;
        if (k == "const") {
          vals.push_back(&v);
        } else {
          if (!v.is_array()) return fail_keyword(k, p, "must be an array");
          for (const ojson& e : v) vals.push_back(&e);
        }
        if (m.values) {
          std::vector<const ojson*> kept;
          for (const ojson* a : *m.values)
            for (const ojson* b : vals)
              if (json_equal(*a, *b)) { kept.push_back(a); break; }
          m.values = kept;
        } else {
          m.values = vals;
          m.values_keyword = "'" + k + "' at " + where(p);
        }
      } else if (k == "minLength" || k == "maxLength" || k == "minItems" || k == "maxItems") {
        auto n = count_value(v, k, p);
        if (!n) return;
        if (k == "minLength") m.min_length = std::max(m.min_length, *n);
        if (k == "maxLength") m.max_length = std::min(m.max_length.value_or(*n), *n);
        if (k == "minItems") m.min_items = std::max(m.min_items, *n);
        if (k == "maxItems") m.max_items = std::min(m.max_items.value_or(*n), *n);
        if (k == "minItems" || k == "maxItems") m.array_keyword = m.array_keyword.empty() ? "'" + k + "' at " + where(p) : m.array_keyword;
      } else if (k == "pattern") {
        if (!v.is_string()) return fail_keyword(k, p, "must be a string");
        m.patterns.emplace_back(v.get<std::string>(), p);
      } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
        if (!v.is_number()) return fail_keyword(k, p, "must be a number");
        auto d = decimal_of(v);
        if (!d.ok()) return fail_keyword(k, p, d.error().message + " (limit)");
        const bool lower = k == "minimum" || k == "exclusiveMinimum";
        const bool exclusive = k[0] == 'e';
        auto& bound = lower ? m.bounds.lo : m.bounds.hi;
        bool& bound_exclusive = lower ? m.bounds.lo_exclusive : m.bounds.hi_exclusive;
        const int c = bound ? compare_decimal(*d, *bound) : (lower ? 1 : -1);
        if ((lower && c > 0) || (!lower && c < 0) || (c == 0 && exclusive)) {
          bound = *d;
          bound_exclusive = exclusive;
        }
      } else if (k == "properties") {
        if (!v.is_object()) return fail_keyword(k, p, "must be an object");
        has_properties = true;
        for (auto prop = v.begin(); prop != v.end(); ++prop) {
          names.insert(prop.key());
          if (!m.properties.count(prop.key())) m.property_order.push_back(prop.key());
          m.properties[prop.key()].push_back(SchemaRef{&*prop, child(child(p, k), prop.key()), 0});
        }
        if (m.object_keyword.empty()) m.object_keyword = "'" + k + "' at " + where(p);
      } else if (k == "required") {
        if (!v.is_array()) return fail_keyword(k, p, "must be an array of strings");
        for (const ojson& r : v) {
          if (!r.is_string()) return fail_keyword(k, p, "must be an array of strings");
          if (std::find(m.required.begin(), m.required.end(), r.get<std::string>()) == m.required.end())
            m.required.push_back(r.get<std::string>());
        }
      } else if (k == "additionalProperties") {
        additional = SchemaRef{&v, child(p, k), 0};
        if (m.object_keyword.empty()) m.object_keyword = "'" + k + "' at " + where(p);
      } else if (k == "items") {
        if (v.is_array()) return fail_keyword(k, p, "an array of schemas is the pre-2020-12 form (use prefixItems)");
        array_part.items = SchemaRef{&v, child(p, k), 0};
        has_array_part = true;
        if (m.array_keyword.empty()) m.array_keyword = "'" + k + "' at " + where(p);
      } else if (k == "prefixItems") {
        if (!v.is_array()) return fail_keyword(k, p, "must be an array of schemas");
        for (size_t i = 0; i < v.size(); ++i)
          array_part.prefix.push_back(SchemaRef{&v[i], child(child(p, k), std::to_string(i)), 0});
        has_array_part = true;
        if (m.array_keyword.empty()) m.array_keyword = "'" + k + "' at " + where(p);
      } else {
        return fail_keyword(k, p, "is not supported (docs/grammars.md lists the supported keywords)");
      }
    }
    if (has_properties || additional) m.objects.push_back(Merged::ObjectPart{std::move(names), additional});
    if (has_array_part) m.arrays.push_back(std::move(array_part));
  }

  // ---- emitting -----------------------------------------------------------
  std::optional<std::string> emit(Merged& m, const std::string& name) {
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
  std::string repeat(const std::string& x, uint64_t lo, std::optional<uint64_t> hi) {
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

  std::optional<std::string> emit_string(const Merged& m, const std::string& name) {
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

  std::optional<std::string> emit_array(const Merged& m) {
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
  std::string key_not_in(const std::vector<std::string>& names, const std::string& name) {
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

  std::optional<std::string> emit_object(const Merged& m, const std::string& name) {
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
  std::optional<std::string> emit_values(const Merged& m) {
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

  std::optional<std::string> literal(const ojson& v) {
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

  const ojson& root_;
  const JsonSchemaOptions& options_;
  std::string ws_;
  std::string error_;
  std::map<std::string, std::string> memo_;  // conjunction key -> rule name ("" = accepts nothing)
  std::set<std::string> referenced_early_;   // names handed out from the memo
  std::vector<std::string> rules_;
  size_t depth_ = 0;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  SchemaCompiler compiler(schema, options);
  return compiler.run();
}

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options) {
  return json_schema_to_gbnf(nlohmann::ordered_json(schema), options);
}

Result<std::string> json_schema_text_to_gbnf(std::string_view schema_text, const JsonSchemaOptions& options) {
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return make_error("json schema: the text is not valid JSON");
  return json_schema_to_gbnf(schema, options);
}

std::string json_any_value_gbnf(const JsonSchemaOptions& options) {
  const nlohmann::ordered_json empty = nlohmann::ordered_json::object();
  SchemaCompiler compiler(empty, options);
  return "root ::= object\n" + compiler.base_rules({"object", "ws"});
}

}  // namespace gb
