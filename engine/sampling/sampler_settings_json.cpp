// SamplerSettings <-> JSON; see sampler_settings_json.h for the shape.
#include "sampling/sampler_settings_json.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace gb {
namespace {

using nlohmann::json;

json bias_value(float b) { return b == -INFINITY ? json("-inf") : json(b); }

// Reads JSON objects field by field, remembering the first problem.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  void fail(const std::string& path, const std::string& what) {
    if (error_.empty()) error_ = source_ + ": \"" + path + "\" " + what;
  }

  // Rejects keys not in `known`.
  void only_keys(const json& obj, const std::string& prefix, std::initializer_list<const char*> known) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool found = false;
      for (const char* k : known) found = found || it.key() == k;
      if (!found) fail(prefix + it.key(), "is not a known sampler setting");
    }
  }

  template <class T>
  void number(const json& obj, const char* key, const std::string& path, T& out) {
    auto it = obj.find(key);
    if (it == obj.end()) return;
    if (!it->is_number()) return fail(path, "must be a number");
    if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) return fail(path, "must be an integer");
      if constexpr (std::is_unsigned_v<T>) {
        if (it->is_number_unsigned()) {
          out = it->template get<T>();
          return;
        }
        if (it->template get<int64_t>() < 0) return fail(path, "must be >= 0");
        out = static_cast<T>(it->template get<int64_t>());
      } else {
        const int64_t v = it->template get<int64_t>();
        if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
          return fail(path, "is out of range");
        out = static_cast<T>(v);
      }
    } else {
      out = it->template get<T>();
    }
  }

  void string(const json& obj, const char* key, const std::string& path, std::string& out) {
    auto it = obj.find(key);
    if (it == obj.end()) return;
    if (!it->is_string()) return fail(path, "must be a string");
    out = it->get<std::string>();
  }

  void strings(const json& obj, const char* key, const std::string& path, std::vector<std::string>& out) {
    auto it = obj.find(key);
    if (it == obj.end()) return;
    if (!it->is_array()) return fail(path, "must be an array of strings");
    out.clear();
    for (const json& e : *it) {
      if (!e.is_string()) return fail(path, "must be an array of strings");
      out.push_back(e.get<std::string>());
    }
  }

  void ids(const json& obj, const char* key, const std::string& path, std::vector<TokenId>& out) {
    auto it = obj.find(key);
    if (it == obj.end()) return;
    if (!it->is_array()) return fail(path, "must be an array of token ids");
    out.clear();
    for (const json& e : *it) {
      if (!e.is_number_integer()) return fail(path, "must be an array of token ids");
      out.push_back(e.get<TokenId>());
    }
  }

  const json* object(const json& obj, const char* key, const std::string& path) {
    auto it = obj.find(key);
    if (it == obj.end()) return nullptr;
    if (!it->is_object()) {
      fail(path, "must be an object");
      return nullptr;
    }
    return &*it;
  }

 private:
  std::string source_;
  std::string error_;
};

// "logit_bias": [[token id, bias or "-inf"], ...].
void read_logit_bias(Reader& r, const json& j, SamplerSettings& s) {
  auto it = j.find("logit_bias");
  if (it == j.end()) return;
  if (!it->is_array()) return r.fail("logit_bias", "must be an array of [token id, bias] pairs");
  for (const json& e : *it) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() ||
        !(e[1].is_number() || (e[1].is_string() && e[1].get<std::string>() == "-inf"))) {
      r.fail("logit_bias", "entries must be [token id, number or \"-inf\"]");
      break;
    }
    s.logit_bias.emplace_back(e[0].get<TokenId>(), e[1].is_string() ? -INFINITY : e[1].get<float>());
  }
}

// The stage groups: "dry", "xtc", "reasoning" (objects of their own keys).
void read_stage_groups(Reader& r, const json& j, SamplerSettings& s) {
  if (const json* d = r.object(j, "dry", "dry")) {
    r.only_keys(*d, "dry.", {"multiplier", "base", "allowed_length", "penalty_last_n", "sequence_breakers",
                             "sequence_breaker_ids"});
    r.number(*d, "multiplier", "dry.multiplier", s.dry.multiplier);
    r.number(*d, "base", "dry.base", s.dry.base);
    r.number(*d, "allowed_length", "dry.allowed_length", s.dry.allowed_length);
    r.number(*d, "penalty_last_n", "dry.penalty_last_n", s.dry.penalty_last_n);
    r.strings(*d, "sequence_breakers", "dry.sequence_breakers", s.dry.sequence_breakers);
    r.ids(*d, "sequence_breaker_ids", "dry.sequence_breaker_ids", s.dry.sequence_breaker_ids);
  }
  if (const json* x = r.object(j, "xtc", "xtc")) {
    r.only_keys(*x, "xtc.", {"threshold", "probability", "protected_ids"});
    r.number(*x, "threshold", "xtc.threshold", s.xtc.threshold);
    r.number(*x, "probability", "xtc.probability", s.xtc.probability);
    r.ids(*x, "protected_ids", "xtc.protected_ids", s.xtc.protected_ids);
  }
  if (const json* rb = r.object(j, "reasoning", "reasoning")) {
    r.only_keys(*rb, "reasoning.", {"max_tokens", "open_marker", "close_marker"});
    r.number(*rb, "max_tokens", "reasoning.max_tokens", s.reasoning.max_tokens);
    r.string(*rb, "open_marker", "reasoning.open_marker", s.reasoning.open_marker);
    r.string(*rb, "close_marker", "reasoning.close_marker", s.reasoning.close_marker);
  }
  if (const json* f = r.object(j, "format", "format")) {
    r.only_keys(*f, "format.", {"kind", "text"});
    std::string kind = "none";
    r.string(*f, "kind", "format.kind", kind);
    r.string(*f, "text", "format.text", s.format.text);
    auto parsed = parse_format_kind(kind);
    if (parsed.ok()) s.format.kind = *parsed;
    else r.fail("format.kind", parsed.error().message);
  }
}

// "order": "a,b,c" or ["a", "b", "c"], stage names (sampler_order.h).
Status read_order(const json& j, std::string_view source, SamplerSettings& s) {
  auto it = j.find("order");
  if (it == j.end()) return {};
  std::string joined;
  if (it->is_string()) {
    joined = it->get<std::string>();
  } else if (it->is_array()) {
    for (const json& e : *it) {
      if (!e.is_string()) return make_error(std::string(source) + ": \"order\" must hold stage names");
      if (!joined.empty()) joined += ',';
      joined += e.get_ref<const std::string&>();
    }
  } else {
    return make_error(std::string(source) + ": \"order\" must be a string or an array of stage names");
  }
  auto parsed = parse_sampler_order(joined);
  if (!parsed.ok()) return make_error(std::string(source) + ": " + parsed.error().message);
  s.order = std::move(parsed.value());
  return {};
}

}  // namespace

std::string sampler_settings_to_json(const SamplerSettings& s, int indent) {
  json bias = json::array();
  for (const auto& [id, b] : s.logit_bias) bias.push_back(json::array({id, bias_value(b)}));
  json j = {
      {"temperature", s.temperature},
      {"top_k", s.top_k},
      {"top_p", s.top_p},
      {"min_p", s.min_p},
      {"typical_p", s.typical_p},
      {"repeat_penalty", s.repeat_penalty},
      {"presence_penalty", s.presence_penalty},
      {"frequency_penalty", s.frequency_penalty},
      {"penalty_last_n", s.penalty_last_n},
      {"logit_bias", bias},
      {"dry",
       {{"multiplier", s.dry.multiplier},
        {"base", s.dry.base},
        {"allowed_length", s.dry.allowed_length},
        {"penalty_last_n", s.dry.penalty_last_n},
        {"sequence_breakers", s.dry.sequence_breakers},
        {"sequence_breaker_ids", s.dry.sequence_breaker_ids}}},
      {"xtc", {{"threshold", s.xtc.threshold}, {"probability", s.xtc.probability}, {"protected_ids", s.xtc.protected_ids}}},
      {"order", format_sampler_order(s.order)},
      {"seed", s.seed},
      {"top_n_record", s.top_n_record},
      {"stop_strings", s.stop_strings},
      {"stop_token_ids", s.stop_token_ids},
      {"max_tokens", s.max_tokens},
      {"reasoning",
       {{"max_tokens", s.reasoning.max_tokens},
        {"open_marker", s.reasoning.open_marker},
        {"close_marker", s.reasoning.close_marker}}},
  };
  // Written only when set, so settings without a format read as they always did.
  if (s.format.kind != FormatKind::None)
    j["format"] = {{"kind", std::string(format_kind_name(s.format.kind))}, {"text", s.format.text}};
  return j.dump(indent);
}

Result<SamplerSettings> sampler_settings_from_json(std::string_view text, std::string_view source) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(std::string(source) + ": not valid JSON");
  if (!j.is_object()) return make_error(std::string(source) + ": must be a JSON object");

  SamplerSettings s;
  Reader r{std::string(source)};
  r.only_keys(j, "", {"temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty",
                      "presence_penalty", "frequency_penalty", "penalty_last_n", "logit_bias", "dry", "xtc",
                      "order", "seed", "top_n_record", "stop_strings", "stop_token_ids", "max_tokens",
                      "reasoning", "format"});
  r.number(j, "temperature", "temperature", s.temperature);
  r.number(j, "top_k", "top_k", s.top_k);
  r.number(j, "top_p", "top_p", s.top_p);
  r.number(j, "min_p", "min_p", s.min_p);
  r.number(j, "typical_p", "typical_p", s.typical_p);
  r.number(j, "repeat_penalty", "repeat_penalty", s.repeat_penalty);
  r.number(j, "presence_penalty", "presence_penalty", s.presence_penalty);
  r.number(j, "frequency_penalty", "frequency_penalty", s.frequency_penalty);
  r.number(j, "penalty_last_n", "penalty_last_n", s.penalty_last_n);
  r.number(j, "seed", "seed", s.seed);
  r.number(j, "top_n_record", "top_n_record", s.top_n_record);
  r.number(j, "max_tokens", "max_tokens", s.max_tokens);
  r.strings(j, "stop_strings", "stop_strings", s.stop_strings);
  r.ids(j, "stop_token_ids", "stop_token_ids", s.stop_token_ids);

  read_logit_bias(r, j, s);
  read_stage_groups(r, j, s);
  if (!r.ok()) return make_error(r.error());

  GB_TRY(read_order(j, source, s));
  Status valid = validate(s);
  if (!valid.ok()) return make_error(std::string(source) + ": " + valid.error().message);
  return s;
}

}  // namespace gb
