// The official JSON-Schema-Test-Suite (draft 2020-12, ../shared/testdata/
// json-schema-suite) against json_schema_to_gbnf: for every group, either the
// compiler refuses the schema with an error naming a keyword that the schema
// contains, or the compiled grammar accepts every valid instance and rejects
// every invalid one. An instance is serialized compactly with its object keys
// in every order (the grammar fixes one order: docs/grammars.md); a valid one
// passes if some order is accepted (and then also with a space after each ','
// and ':'), an invalid one if none is. The validity labels are the suite's own
// (an independent oracle). Per-file counts are printed (docs/grammars.md has them).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gb_test.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

using namespace gb;
using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kSuiteMaxVariants = 5000;

// A float as Python's json.dumps writes it (the suite README's serialization):
// plain decimal for decimal exponents -4..15 ("9007199254740992.0"), otherwise
// nlohmann's exponent form ("1e+308").
std::string suite_python_float(const ojson& v) {
  const std::string text = v.dump();
  const size_t e = text.find_first_of("eE");
  if (e == std::string::npos) return text;
  const bool negative = text[0] == '-';
  std::string mantissa = text.substr(negative ? 1 : 0, e - (negative ? 1 : 0));
  const int exponent = std::stoi(text.substr(e + 1));
  const size_t point = mantissa.find('.');
  std::string digits = mantissa;
  int int_len = static_cast<int>(mantissa.size());
  if (point != std::string::npos) {
    digits.erase(point, 1);
    int_len = static_cast<int>(point);
  }
  const int decimal_exponent = int_len - 1 + exponent;  // of the first digit
  if (decimal_exponent < -4 || decimal_exponent >= 16) return text;
  int new_point = int_len + exponent;
  std::string out;
  if (new_point <= 0) {
    out = "0." + std::string(static_cast<size_t>(-new_point), '0') + digits;
  } else {
    if (static_cast<int>(digits.size()) < new_point) digits += std::string(static_cast<size_t>(new_point) - digits.size(), '0');
    out = digits.substr(0, static_cast<size_t>(new_point));
    const std::string frac = digits.substr(static_cast<size_t>(new_point));
    out += "." + (frac.empty() ? std::string("0") : frac);
  }
  return (negative ? "-" : "") + out;
}

// Every serialization of `v` with object keys in every order (capped), compact
// or with a space after ',' and ':' -- the same order at the same index.
std::vector<std::string> suite_serializations(const ojson& v, bool spaced) {
  const std::string comma = spaced ? ", " : ",", colon = spaced ? ": " : ":";
  if (v.is_array()) {
    std::vector<std::string> out = {"["};
    for (size_t i = 0; i < v.size(); ++i) {
      const auto elems = suite_serializations(v[i], spaced);
      std::vector<std::string> next;
      for (const std::string& prefix : out)
        for (const std::string& e : elems) {
          if (next.size() >= kSuiteMaxVariants) break;
          next.push_back(prefix + (i ? comma : "") + e);
        }
      out = std::move(next);
    }
    for (std::string& s : out) s += "]";
    return out;
  }
  if (v.is_object()) {
    std::vector<std::string> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    std::vector<std::string> out;
    do {
      std::vector<std::string> partial = {"{"};
      for (size_t i = 0; i < keys.size(); ++i) {
        const auto values = suite_serializations(v[keys[i]], spaced);
        std::vector<std::string> next;
        for (const std::string& prefix : partial)
          for (const std::string& e : values) {
            if (next.size() >= kSuiteMaxVariants) break;
            next.push_back(prefix + (i ? comma : "") + ojson(keys[i]).dump() + colon + e);
          }
        partial = std::move(next);
      }
      for (std::string& s : partial) {
        if (out.size() >= kSuiteMaxVariants) break;
        out.push_back(s + "}");
      }
    } while (out.size() < kSuiteMaxVariants && std::next_permutation(keys.begin(), keys.end()));
    return out;
  }
  if (v.is_number_float()) return {suite_python_float(v)};
  return {v.dump()};
}

void suite_collect_keys(const ojson& v, std::set<std::string>& keys) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      keys.insert(it.key());
      suite_collect_keys(*it, keys);
    }
  } else if (v.is_array()) {
    for (const ojson& e : v) suite_collect_keys(e, keys);
  }
}

bool suite_accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.is_accepting();
}

struct SuiteCounts {
  int groups = 0, compiled = 0, refused = 0, instances = 0, passed = 0, failed = 0;
};

}  // namespace

GB_TEST(json_schema_suite) {
  GB_REQUIRE_SHARED(readme, "testdata/json-schema-suite/README.md");
  const std::filesystem::path dir = std::filesystem::path(readme).parent_path();
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  QVERIFY(files.size() >= 40);

  std::vector<std::string> failures;
  SuiteCounts total;
  std::printf("| file | groups | compiled | refused | instances checked | passed |\n|---|---|---|---|---|---|\n");
  for (const auto& path : files) {
    std::ifstream in(path);
    const ojson groups = ojson::parse(in);
    SuiteCounts c;
    for (const ojson& group : groups) {
      ++c.groups;
      const std::string label = path.filename().string() + " / " + group["description"].get<std::string>();
      auto gbnf = json_schema_to_gbnf(group["schema"]);
      if (!gbnf.ok()) {
        const std::string& message = gbnf.error().message;
        if (message.find("accepts no value") != std::string::npos) {
          // The false schema (or a contradiction): refused, and rightly only if nothing is valid.
          ++c.refused;
          for (const ojson& t : group["tests"]) {
            ++c.instances;
            if (t["valid"].get<bool>()) ++c.failed, failures.push_back(label + ": refused as empty, but '" + t["data"].dump() + "' is valid");
            else ++c.passed;
          }
          continue;
        }
        std::set<std::string> keys;
        suite_collect_keys(group["schema"], keys);
        const size_t open = message.find("keyword '");
        const size_t close = open == std::string::npos ? open : message.find('\'', open + 9);
        const std::string keyword = open == std::string::npos ? "" : message.substr(open + 9, close - open - 9);
        if (keyword.empty() || !keys.count(keyword)) {
          failures.push_back(label + ": refused without naming a keyword of the schema: " + message);
        }
        ++c.refused;
        continue;
      }
      GbnfError where;
      auto grammar = compile_gbnf(gbnf.value(), "root", &where);
      if (!grammar.ok()) {
        failures.push_back(label + ": the GBNF does not compile: " + where.to_string() + "\n" + gbnf.value());
        continue;
      }
      ++c.compiled;
      for (const ojson& t : group["tests"]) {
        ++c.instances;
        const bool valid = t["valid"].get<bool>();
        const auto compact = suite_serializations(t["data"], false);
        const auto spaced = suite_serializations(t["data"], true);
        bool accepted = false, spaced_ok = true;
        for (size_t i = 0; i < compact.size() && !accepted; ++i) {
          if (suite_accepts(*grammar, compact[i])) {
            accepted = true;
            spaced_ok = suite_accepts(*grammar, spaced[i]);
          }
        }
        if (accepted == valid && spaced_ok) {
          ++c.passed;
        } else {
          ++c.failed;
          failures.push_back(label + " / " + t["description"].get<std::string>() + ": " + compact[0] +
                             (valid ? " is valid but rejected" : " is invalid but accepted") +
                             (spaced_ok ? "" : " (the spaced form is rejected)") + "\n" + gbnf.value());
        }
      }
    }
    std::printf("| %s | %d | %d | %d | %d | %d |\n", path.filename().string().c_str(), c.groups, c.compiled, c.refused,
                c.instances, c.passed);
    total.groups += c.groups, total.compiled += c.compiled, total.refused += c.refused;
    total.instances += c.instances, total.passed += c.passed, total.failed += c.failed;
  }
  std::printf("| total | %d | %d | %d | %d | %d |\n", total.groups, total.compiled, total.refused, total.instances,
              total.passed);
  for (const std::string& f : failures) std::printf("FAILURE: %s\n", f.c_str());
  QVERIFY2(failures.empty(), (std::to_string(failures.size()) + " suite failures (printed above)").c_str());
}
