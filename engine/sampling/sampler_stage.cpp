// Names and order parsing for SamplerStage; see sampler_stage.h.
#include "sampling/sampler_stage.h"

#include <array>
#include <utility>

namespace gb {
namespace {

constexpr std::array<std::pair<SamplerStage, std::string_view>, kNumSamplerStages> kCanonical = {{
    {SamplerStage::Penalties, "penalties"},
    {SamplerStage::Dry, "dry"},
    {SamplerStage::LogitBias, "logit_bias"},
    {SamplerStage::TopK, "top_k"},
    {SamplerStage::TypicalP, "typical_p"},
    {SamplerStage::TopP, "top_p"},
    {SamplerStage::MinP, "min_p"},
    {SamplerStage::Xtc, "xtc"},
    {SamplerStage::Temperature, "temperature"},
    {SamplerStage::Grammar, "grammar"},
}};

constexpr std::array<std::pair<SamplerStage, std::string_view>, 9> kAliases = {{
    {SamplerStage::Penalties, "repetition"},
    {SamplerStage::Penalties, "penalty"},
    {SamplerStage::LogitBias, "bias"},
    {SamplerStage::TopK, "topk"},
    {SamplerStage::TypicalP, "typical"},
    {SamplerStage::TopP, "topp"},
    {SamplerStage::MinP, "minp"},
    {SamplerStage::Temperature, "temp"},
    {SamplerStage::Temperature, "temperature_last"},
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view sampler_stage_name(SamplerStage stage) {
  for (const auto& [s, name] : kCanonical)
    if (s == stage) return name;
  GB_CHECK_MSG(false, "SamplerStage value out of range");
  return {};
}

Result<SamplerStage> parse_sampler_stage(std::string_view name) {
  const std::string_view t = trim(name);
  for (const auto& [s, n] : kCanonical)
    if (n == t) return s;
  for (const auto& [s, n] : kAliases)
    if (n == t) return s;
  std::string known;
  for (const auto& [s, n] : kCanonical) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  return make_error("sampler order: unknown stage \"" + std::string(t) + "\" (known: " + known + ")");
}

Result<std::vector<SamplerStage>> parse_sampler_order(std::string_view text) {
  std::vector<SamplerStage> order;
  if (trim(text).empty()) return order;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    auto stage = parse_sampler_stage(text.substr(start, end - start));
    if (!stage.ok()) return stage.error();
    for (SamplerStage seen : order)
      if (seen == *stage)
        return make_error("sampler order: stage \"" + std::string(sampler_stage_name(seen)) +
                          "\" appears twice in \"" + std::string(text) + "\"");
    order.push_back(*stage);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return order;
}

std::string format_sampler_order(std::span<const SamplerStage> order) {
  std::string out;
  for (SamplerStage s : order) {
    if (!out.empty()) out += ',';
    out += sampler_stage_name(s);
  }
  return out;
}

std::vector<SamplerStage> default_sampler_order() {
  return {SamplerStage::Penalties, SamplerStage::Dry,  SamplerStage::LogitBias,
          SamplerStage::TopK,      SamplerStage::TypicalP, SamplerStage::TopP,
          SamplerStage::MinP,      SamplerStage::Xtc,  SamplerStage::Temperature};
}

}  // namespace gb
