// The JSON Schema -> GBNF compiler behind json_schema.h (what is supported:
// there, and docs/grammars.md). Private to engine/grammar: only
// json_schema.cpp and json_schema_emit.cpp include it.
//
// The compiler works on conjunctions: a list of subschemas (JSON pointers into
// the document) that must all hold. $ref and allOf add their targets to the
// list, anyOf / oneOf are distributed over it (S and (A or B) = (S and A) or
// (S and B)), and what is left is merged keyword by keyword (types intersect,
// bounds tighten, properties and items combine per position). Every distinct
// conjunction becomes one GBNF rule, memoized by its sorted pointers, so a
// recursive schema is a recursive grammar and a shared $def one rule.
//
// The work is split in two files:
//   json_schema.cpp       run(), $ref resolution, conjunctions (expand, memo,
//                         anyOf / oneOf distribution), the oneOf disjointness
//                         check, merging keywords into a Merged; the public
//                         entry points of json_schema.h;
//   json_schema_emit.cpp  a Merged to GBNF: strings, arrays, objects (with the
//                         key_not_in trie), enum / const values as literals,
//                         bounded repetition, and the shared base rules.
// The first error wins (fail()); once one is recorded compile() returns nullopt.
// Threads: one SchemaCompiler per compilation, used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_numbers.h"
#include "grammar/json_schema_values.h"

namespace gb::json_schema_detail {

using ojson = nlohmann::ordered_json;

struct SchemaRef {
  const ojson* node = nullptr;
  std::string pointer;   // JSON pointer of node in the document ("" = root)
  uint8_t consumed = 0;  // 1: its anyOf is distributed already; 2: its oneOf
};
using Conj = std::vector<SchemaRef>;

// The keywords of one conjunction, merged.
struct Merged {
  uint8_t types = json_schema_values::kAllTypes;
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

  Result<std::string> run();  // the whole grammar, rule "root" first

  // The shared rules, for any-value grammars too (json_schema_emit.cpp).
  std::string base_rules(std::set<std::string> used) const;

  std::set<std::string> used_base_;

 private:
  bool failed() const { return !error_.empty(); }
  void fail(const std::string& message) {
    if (error_.empty()) error_ = "json schema: " + message;
  }
  void fail_keyword(const std::string& keyword, const std::string& pointer, const std::string& message) {
    fail("keyword '" + keyword + "' at " + json_schema_values::where(pointer) + ": " + message);
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

  // ---- json_schema.cpp --------------------------------------------------
  // $ref
  std::optional<SchemaRef> resolve(const std::string& ref, const std::string& at);
  // conjunctions
  bool expand(const Conj& in, Conj& out);
  static std::string conj_key(const Conj& conj);
  std::optional<std::string> compile(const Conj& conj);
  std::optional<std::string> build(const Conj& conj, const std::string& name);
  // oneOf
  struct Summary;
  Summary summarize(const Conj& conj);
  bool disjoint(const Summary& a, const Summary& b, int depth);
  bool check_one_of(const std::vector<Conj>& branches, const std::string& pointer);
  // merging
  std::optional<uint64_t> count_value(const ojson& v, const std::string& keyword, const std::string& pointer);
  void merge(const SchemaRef& ref, Merged& m);

  // ---- json_schema_emit.cpp ---------------------------------------------
  std::optional<std::string> emit(Merged& m, const std::string& name);
  std::string repeat(const std::string& x, uint64_t lo, std::optional<uint64_t> hi);
  std::optional<std::string> emit_string(const Merged& m, const std::string& name);
  std::optional<std::string> emit_array(const Merged& m);
  std::string key_not_in(const std::vector<std::string>& names, const std::string& name);
  std::optional<std::string> emit_object(const Merged& m, const std::string& name);
  std::optional<std::string> emit_values(const Merged& m);
  std::optional<std::string> literal(const ojson& v);

  const ojson& root_;
  const JsonSchemaOptions& options_;
  std::string ws_;
  std::string error_;
  std::map<std::string, std::string> memo_;  // conjunction key -> rule name ("" = accepts nothing)
  std::set<std::string> referenced_early_;   // names handed out from the memo
  std::vector<std::string> rules_;
  size_t depth_ = 0;
};

}  // namespace gb::json_schema_detail
