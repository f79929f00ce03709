// JSON Schema -> GBNF; see json_schema.h (what is supported) and docs/grammars.md.
// The compiler itself (SchemaCompiler, json_schema_compiler.h): here the walk
// over conjunctions -- $ref, allOf, anyOf / oneOf, the oneOf disjointness check
// -- and merging keywords; json_schema_emit.cpp turns a merged conjunction into
// GBNF.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_numbers.h"
#include "grammar/json_schema_values.h"

namespace gb {
namespace json_schema_detail {

using namespace json_schema_values;

Result<std::string> SchemaCompiler::run() {
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

// ---- $ref -------------------------------------------------------------
std::optional<SchemaRef> SchemaCompiler::resolve(const std::string& ref, const std::string& at) {
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
bool SchemaCompiler::expand(const Conj& in, Conj& out) {
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

std::string SchemaCompiler::conj_key(const Conj& conj) {
  std::vector<std::string> parts;
  for (const SchemaRef& r : conj) parts.push_back(r.pointer + "#" + std::to_string(r.consumed));
  std::sort(parts.begin(), parts.end());
  std::string key;
  for (const std::string& p : parts) key += p + "|";
  return key;
}

// The rule name of a conjunction, or nullopt when no value satisfies it.
std::optional<std::string> SchemaCompiler::compile(const Conj& conj) {
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

std::optional<std::string> SchemaCompiler::build(const Conj& conj, const std::string& name) {
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
struct SchemaCompiler::Summary {
  bool never = false;
  uint8_t types = kAllTypes;
  std::optional<std::vector<const ojson*>> values;
  std::set<std::string> required;
  std::map<std::string, Conj> properties;
};

SchemaCompiler::Summary SchemaCompiler::summarize(const Conj& conj) {
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

bool SchemaCompiler::disjoint(const Summary& a, const Summary& b, int depth) {
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

bool SchemaCompiler::check_one_of(const std::vector<Conj>& branches, const std::string& pointer) {
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
std::optional<uint64_t> SchemaCompiler::count_value(const ojson& v, const std::string& keyword, const std::string& pointer) {
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

void SchemaCompiler::merge(const SchemaRef& ref, Merged& m) {
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

}  // namespace json_schema_detail

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  json_schema_detail::SchemaCompiler compiler(schema, options);
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
  json_schema_detail::SchemaCompiler compiler(empty, options);
  return "root ::= object\n" + compiler.base_rules({"object", "ws"});
}

}  // namespace gb
