// Command-line flags for every sampler setting (generate, serve-bench), parsed
// into a SamplerSettings. Shared so the flags mean the same everywhere.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "sampling/sampler_settings.h"

namespace CLI {
class App;
}

namespace gb::cli {

// The output format flags (the grammar stage): --grammar FILE.gbnf,
// --json-schema FILE.json, --regex PATTERN, --json-format (a JSON object; not
// --json, which several commands use for their own JSON output). At most one.
struct FormatOptions {
  std::string grammar_file;
  std::string json_schema_file;
  std::string regex;
  bool json_format = false;
};
void add_format_options(CLI::App& sub, FormatOptions& options);
// The format the flags ask for (kind None when none was given); files are read here.
Result<FormatSettings> finish_format_options(const FormatOptions& options);

struct SamplerOptions {
  SamplerSettings settings;
  std::vector<std::string> logit_bias;       // "ID=VALUE", VALUE may be -inf
  std::string order;                         // --samplers
  std::vector<std::string> dry_breakers;     // --dry-sequence-breaker (repeatable)
  bool dry_breakers_given = false;
  std::string preset;                        // --sampler-preset FILE.json
  FormatOptions format;
  const CLI::App* app = nullptr;             // to tell flags given from defaults
};

// Adds --temperature, --top-k, ... to `sub`. Defaults: greedy (temperature 0)
// so plain runs are deterministic; every stage's "off" value is documented in
// sampler_settings.h.
void add_sampler_options(CLI::App& sub, SamplerOptions& options);

// Applies the string-valued flags (preset first, then flags given explicitly)
// and validates the result.
Result<SamplerSettings> finish_sampler_options(const SamplerOptions& options);

}  // namespace gb::cli
