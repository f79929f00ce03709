// Validation of SamplerSettings; see sampler_settings.h.
#include "sampling/sampler_settings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace gb {
namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Error bad(const std::string& field, double value, const char* rule) {
  return make_error("sampler settings: " + field + " = " + num(value) + " " + rule);
}

}  // namespace

bool SamplerSettings::is_stop_token(TokenId id) const {
  return std::find(stop_token_ids.begin(), stop_token_ids.end(), id) != stop_token_ids.end();
}

Status validate(const SamplerSettings& s) {
  // Comparisons are written so that NaN fails them (NaN compares false).
  if (!(s.temperature >= 0.0f) || std::isinf(s.temperature))
    return bad("temperature", s.temperature, "must be finite and >= 0 (0 = greedy)");
  if (s.top_k < 0) return bad("top_k", s.top_k, "must be >= 0 (0 = off)");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return bad("top_p", s.top_p, "must be in (0, 1] (1 = off)");
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) return bad("min_p", s.min_p, "must be in [0, 1] (0 = off)");
  if (!(s.typical_p > 0.0f && s.typical_p <= 1.0f))
    return bad("typical_p", s.typical_p, "must be in (0, 1] (1 = off)");
  if (!(s.repeat_penalty > 0.0f) || std::isinf(s.repeat_penalty))
    return bad("repeat_penalty", s.repeat_penalty, "must be finite and > 0 (1 = off)");
  if (!std::isfinite(s.presence_penalty)) return bad("presence_penalty", s.presence_penalty, "must be finite");
  if (!std::isfinite(s.frequency_penalty))
    return bad("frequency_penalty", s.frequency_penalty, "must be finite");
  if (s.penalty_last_n < -1)
    return bad("penalty_last_n", s.penalty_last_n, "must be >= -1 (-1 = whole history, 0 = off)");

  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0) return bad("logit_bias token id", id, "must be >= 0");
    if (std::isnan(bias) || bias == INFINITY)
      return bad("logit_bias[" + std::to_string(id) + "]", bias, "must be finite or -inf (a ban)");
  }

  const DrySettings& d = s.dry;
  if (!(d.multiplier >= 0.0f) || std::isinf(d.multiplier))
    return bad("dry.multiplier", d.multiplier, "must be finite and >= 0 (0 = off)");
  if (!(d.base >= 1.0f) || std::isinf(d.base)) return bad("dry.base", d.base, "must be finite and >= 1");
  if (d.allowed_length < 1) return bad("dry.allowed_length", d.allowed_length, "must be >= 1");
  if (d.penalty_last_n < -1)
    return bad("dry.penalty_last_n", d.penalty_last_n, "must be >= -1 (-1 = whole history, 0 = off)");
  for (TokenId id : d.sequence_breaker_ids)
    if (id < 0) return bad("dry.sequence_breaker_ids entry", id, "must be >= 0");

  const XtcSettings& x = s.xtc;
  if (!(x.threshold >= 0.0f && x.threshold <= 1.0f))
    return bad("xtc.threshold", x.threshold, "must be in [0, 1]");
  if (!(x.probability >= 0.0f && x.probability <= 1.0f))
    return bad("xtc.probability", x.probability, "must be in [0, 1] (0 = off)");

  for (size_t i = 0; i < s.order.size(); ++i)
    for (size_t j = i + 1; j < s.order.size(); ++j)
      if (s.order[i] == s.order[j])
        return make_error("sampler settings: order lists stage \"" +
                          std::string(sampler_stage_name(s.order[i])) + "\" twice");

  if (s.top_n_record < 0) return bad("top_n_record", s.top_n_record, "must be >= 0");
  if (s.max_tokens < 0) return bad("max_tokens", s.max_tokens, "must be >= 0");
  for (const std::string& stop : s.stop_strings)
    if (stop.empty()) return make_error("sampler settings: stop_strings contains an empty string");
  for (TokenId id : s.stop_token_ids)
    if (id < 0) return bad("stop_token_ids entry", id, "must be >= 0");

  const ReasoningBudgetSettings& r = s.reasoning;
  if (r.max_tokens < -1) return bad("reasoning.max_tokens", r.max_tokens, "must be >= -1 (-1 = unlimited)");
  if (r.max_tokens >= 0 && (r.open_marker.empty() || r.close_marker.empty()))
    return make_error("sampler settings: reasoning budget needs non-empty open_marker and close_marker");
  const bool needs_text = s.format.kind == FormatKind::JsonSchema || s.format.kind == FormatKind::Gbnf ||
                          s.format.kind == FormatKind::Regex;
  if (needs_text && s.format.text.empty())
    return make_error("sampler settings: format \"" + std::string(format_kind_name(s.format.kind)) +
                      "\" needs its text (the grammar, schema or expression)");
  return Status::success();
}

namespace {
constexpr std::pair<FormatKind, std::string_view> kFormatKindNames[] = {
    {FormatKind::None, "none"},       {FormatKind::Json, "json"}, {FormatKind::JsonSchema, "json_schema"},
    {FormatKind::Gbnf, "gbnf"},       {FormatKind::Regex, "regex"}};
}  // namespace

std::string_view format_kind_name(FormatKind kind) {
  for (const auto& [k, name] : kFormatKindNames)
    if (k == kind) return name;
  return "none";
}

Result<FormatKind> parse_format_kind(std::string_view name) {
  for (const auto& [k, n] : kFormatKindNames)
    if (n == name) return k;
  return make_error("unknown format \"" + std::string(name) + "\" (expected none, json, json_schema, gbnf or regex)");
}

}  // namespace gb
