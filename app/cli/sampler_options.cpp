#include "cli/sampler_options.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sampling/sampler_settings_json.h"
#include "sampling/sampler_stage.h"

namespace gb::cli {

void add_sampler_options(CLI::App& sub, SamplerOptions& o) {
  o.app = &sub;
  SamplerSettings& s = o.settings;
  s.temperature = 0.0f;  // the CLI is greedy unless asked otherwise
  sub.add_option("--temperature,--temp", s.temperature, "Temperature (0 = greedy, the default; --temp as llama.cpp spells it)");
  sub.add_option("--seed", s.seed, "Random seed of the request's sampler stream");
  sub.add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  sub.add_option("--top-p", s.top_p, "Nucleus: smallest set with probability >= p (1 = off)")->capture_default_str();
  sub.add_option("--min-p", s.min_p, "Drop tokens below min_p x the top probability (0 = off)")->capture_default_str();
  sub.add_option("--typical-p", s.typical_p, "Locally typical sampling mass (1 = off)")->capture_default_str();
  sub.add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")->capture_default_str();
  sub.add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0 = off)");
  sub.add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0 = off)");
  sub.add_option("--penalty-window", s.penalty_last_n, "Tokens the penalties look back (-1 = all)")->capture_default_str();
  sub.add_option("--logit-bias", o.logit_bias, "ID=VALUE added to a token's logit (VALUE -inf bans it); repeatable");
  sub.add_option("--dry-multiplier", s.dry.multiplier, "DRY multiplier (0 = off)");
  sub.add_option("--dry-base", s.dry.base, "DRY base")->capture_default_str();
  sub.add_option("--dry-allowed-length", s.dry.allowed_length, "DRY allowed repetition length")->capture_default_str();
  sub.add_option("--dry-penalty-last-n", s.dry.penalty_last_n, "DRY window (-1 = all)")->capture_default_str();
  sub.add_option("--dry-sequence-breaker", o.dry_breakers, "DRY sequence breaker string; repeatable (replaces the defaults)");
  sub.add_option("--xtc-threshold", s.xtc.threshold, "XTC probability threshold")->capture_default_str();
  sub.add_option("--xtc-probability", s.xtc.probability, "XTC chance per token (0 = off)");
  sub.add_option("--stop", s.stop_strings, "Stop string (matched on text across tokens); repeatable");
  sub.add_option("--stop-token", s.stop_token_ids, "Stop token id; repeatable");
  sub.add_option("--samplers", o.order, "Chain order, e.g. penalties,dry,top_k,typical_p,top_p,min_p,xtc,temperature");
  sub.add_option("--think-budget", s.reasoning.max_tokens, "Max tokens between the thinking markers (-1 = unlimited)");
  sub.add_option("--think-open", s.reasoning.open_marker, "Thinking open marker")->capture_default_str();
  sub.add_option("--think-close", s.reasoning.close_marker, "Thinking close marker")->capture_default_str();
  sub.add_option("--top-n", s.top_n_record, "Candidates recorded per token (inspector, --json)")->capture_default_str();
  sub.add_option("--sampler-preset", o.preset, "Load sampler settings from a JSON preset first");
  add_format_options(sub, o.format);
}

void add_format_options(CLI::App& sub, FormatOptions& o) {
  auto* g = sub.add_option("--grammar", o.grammar_file, "Constrain the output to a GBNF grammar (file)");
  auto* js = sub.add_option("--json-schema", o.json_schema_file, "Constrain the output to JSON following a schema (file)");
  auto* rx = sub.add_option("--regex", o.regex, "Constrain the output to a regular expression (whole output)");
  auto* jf = sub.add_flag("--json-format", o.json_format, "Constrain the output to a JSON object");
  g->excludes(js)->excludes(rx)->excludes(jf);
  js->excludes(rx)->excludes(jf);
  rx->excludes(jf);
}

Result<FormatSettings> finish_format_options(const FormatOptions& o) {
  const auto read_file = [](const std::string& path, const char* flag) -> Result<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(std::string(flag) + ": cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  FormatSettings f;
  if (!o.grammar_file.empty()) {
    GB_ASSIGN_OR_RETURN(f.text, read_file(o.grammar_file, "--grammar"));
    f.kind = FormatKind::Gbnf;
  } else if (!o.json_schema_file.empty()) {
    GB_ASSIGN_OR_RETURN(f.text, read_file(o.json_schema_file, "--json-schema"));
    f.kind = FormatKind::JsonSchema;
  } else if (!o.regex.empty()) {
    f = {FormatKind::Regex, o.regex};
  } else if (o.json_format) {
    f = {FormatKind::Json, ""};
  }
  return f;
}

namespace {
Result<float> parse_bias_value(const std::string& text) {
  if (text == "-inf" || text == "-infinity") return -INFINITY;
  try {
    size_t used = 0;
    const float v = std::stof(text, &used);
    if (used == text.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  return make_error("--logit-bias: '" + text + "' is not a number or -inf");
}
}  // namespace

Result<SamplerSettings> finish_sampler_options(const SamplerOptions& o) {
  SamplerSettings s = o.settings;
  if (!o.preset.empty()) {
    std::ifstream in(o.preset);
    if (!in) return make_error(o.preset + ": cannot read the sampler preset");
    std::stringstream text;
    text << in.rdbuf();
    auto preset = sampler_settings_from_json(text.str());
    if (!preset) return make_error(o.preset + ": " + preset.error().message);
    // Flags given on the command line win over the preset.
    const SamplerSettings flags = s;
    s = *preset;
    const auto given = [&](const char* name) { return o.app != nullptr && o.app->count(name) > 0; };
    if (given("--temperature")) s.temperature = flags.temperature;
    if (given("--seed")) s.seed = flags.seed;
    if (given("--top-k")) s.top_k = flags.top_k;
    if (given("--top-p")) s.top_p = flags.top_p;
    if (given("--min-p")) s.min_p = flags.min_p;
    if (given("--typical-p")) s.typical_p = flags.typical_p;
    if (given("--repeat-penalty")) s.repeat_penalty = flags.repeat_penalty;
    if (given("--presence-penalty")) s.presence_penalty = flags.presence_penalty;
    if (given("--frequency-penalty")) s.frequency_penalty = flags.frequency_penalty;
    if (given("--penalty-window")) s.penalty_last_n = flags.penalty_last_n;
    if (given("--dry-multiplier")) s.dry.multiplier = flags.dry.multiplier;
    if (given("--dry-base")) s.dry.base = flags.dry.base;
    if (given("--dry-allowed-length")) s.dry.allowed_length = flags.dry.allowed_length;
    if (given("--dry-penalty-last-n")) s.dry.penalty_last_n = flags.dry.penalty_last_n;
    if (given("--xtc-threshold")) s.xtc.threshold = flags.xtc.threshold;
    if (given("--xtc-probability")) s.xtc.probability = flags.xtc.probability;
    if (given("--stop")) s.stop_strings = flags.stop_strings;
    if (given("--stop-token")) s.stop_token_ids = flags.stop_token_ids;
    if (given("--think-budget")) s.reasoning.max_tokens = flags.reasoning.max_tokens;
    if (given("--think-open")) s.reasoning.open_marker = flags.reasoning.open_marker;
    if (given("--think-close")) s.reasoning.close_marker = flags.reasoning.close_marker;
    if (given("--top-n")) s.top_n_record = flags.top_n_record;
  }
  for (const std::string& item : o.logit_bias) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return make_error("--logit-bias: expected ID=VALUE, got '" + item + "'");
    TokenId id = 0;
    try {
      id = std::stoi(item.substr(0, eq));
    } catch (const std::exception&) {
      return make_error("--logit-bias: '" + item.substr(0, eq) + "' is not a token id");
    }
    auto value = parse_bias_value(item.substr(eq + 1));
    if (!value) return value.error();
    s.logit_bias.emplace_back(id, *value);
  }
  if (!o.order.empty()) {
    auto order = parse_sampler_order(o.order);
    if (!order) return make_error("--samplers: " + order.error().message);
    s.order = *order;
  }
  if (!o.dry_breakers.empty()) s.dry.sequence_breakers = o.dry_breakers;
  FormatSettings format;
  GB_ASSIGN_OR_RETURN(format, finish_format_options(o.format));
  if (format.kind != FormatKind::None) s.format = std::move(format);  // a preset's format otherwise
  if (Status st = validate(s); !st) return st.error();
  return s;
}

}  // namespace gb::cli
