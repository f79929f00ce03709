#include "engine_settings_codec.h"

#include <QRegularExpression>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/kv_pool_sizing.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_space.h"
#include "kv/kv_policy.h"
#include "kv/kv_policy_json.h"
#include "runtime/comparison_json.h"
#include "runtime/grammar_constraint.h"
#include "sampling/sampler_settings_json.h"
#include "speculative/speculative_config.h"

namespace gbui {

namespace {
QString fromStd(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// 1-based line and byte column of byte `offset` of `text`.
void placeAt(FormatCheck& check, const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  check.offset = static_cast<int>(offset);
  check.line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++check.line;
      lineStart = i + 1;
    }
  check.column = static_cast<int>(offset - lineStart) + 1;
}
// Settings the engine's parser accepted, as the workbench holds them.
SamplerChoice choiceOf(gb::SamplerSettings settings) {
  SamplerChoice out;
  out.json = QString::fromStdString(gb::sampler_settings_to_json(settings, -1));
  out.settings = std::make_shared<const gb::SamplerSettings>(std::move(settings));
  return out;
}
}  // namespace

QString EngineSettingsCodec::defaultSamplerJson() const {
  return QString::fromStdString(gb::sampler_settings_to_json(gb::SamplerSettings{}, 2));
}

SamplerChoice EngineSettingsCodec::parseSampler(const QString& json) const {
  SamplerChoice out;
  auto parsed = gb::sampler_settings_from_json(json.toStdString(), "sampler settings");
  if (!parsed) {
    out.error = QString::fromStdString(parsed.error().message);
    return out;
  }
  return choiceOf(std::move(*parsed));
}

LaneChoice EngineSettingsCodec::parseLane(const QString& json) const {
  LaneChoice out;
  auto lane = gb::comparison_lane_from_json("", json.toStdString(), "lane settings");
  if (!lane) {
    out.sampler.error = QString::fromStdString(lane.error().message);
    return out;
  }
  out.sampler = choiceOf(std::move(lane->settings));
  out.kvPolicy = fromStd(gb::describe_kv_policy(lane->kv_policy));
  if (lane->kv_policy.active()) out.kvPolicyJson = fromStd(gb::kv_policy_to_json(lane->kv_policy));
  return out;
}

QString EngineSettingsCodec::samplerJson(const SamplerChoice& choice, int indent) const {
  return choice.ok() ? QString::fromStdString(gb::sampler_settings_to_json(*choice.settings, indent)) : QString();
}

QString EngineSettingsCodec::validateSpeculative(const QString& spec) const {
  if (spec.isEmpty()) return {};
  auto parsed = gb::parse_speculative_spec(spec.toStdString());
  return parsed ? QString() : QString::fromStdString(parsed.error().message);
}

QVector<KvPolicyOption> EngineSettingsCodec::kvPolicies() const {
  QVector<KvPolicyOption> out;
  for (const gb::KvPolicyRow& row : gb::kv_policy_rows())
    out.push_back({fromStd(row.name), fromStd(row.summary), row.default_sinks, row.uses_mass});
  return out;
}

KvPolicyChoice EngineSettingsCodec::checkKvPolicy(KvPolicyChoice choice) const {
  choice.error.clear();
  auto kind = gb::kv_policy_from_name(choice.policy.toStdString());
  if (!kind) {
    choice.error = fromStd(kind.error().message);
    choice.resolved.clear();
    return choice;
  }
  if (*kind == gb::KvPolicyKind::Full) {
    // Full keeps every token: no budget, and nothing for a shadow to compare.
    choice.budget = 0;
    choice.sinks = -1;
    choice.shadow = false;
    choice.resolved = QStringLiteral("full");
    return choice;
  }
  // The engine's own message names the CLI flag; the workbench has a budget box.
  if (choice.budget < 1) {
    choice.error = QStringLiteral("KV policy %1 needs a token budget of at least 1").arg(choice.policy);
    choice.resolved.clear();
    return choice;
  }
  gb::KvPolicy policy;
  policy.kind = *kind;
  policy.budget = choice.budget;
  policy.sinks = choice.sinks;
  auto resolved = gb::resolve_kv_policy(policy);
  if (!resolved) {
    choice.error = fromStd(resolved.error().message);
    choice.resolved.clear();
    return choice;
  }
  choice.resolved = fromStd(gb::describe_kv_policy(*resolved));
  return choice;
}

// The steps compile_format (runtime/grammar_constraint.h) takes at submit, less
// the token masks: the format to GBNF, GBNF to a grammar, the grammar's start
// state. Positions: GBNF errors carry theirs; a schema that is not JSON gets
// the parser's; a regex error names its byte offset ("at offset N"). Errors in
// the GBNF a schema or regex compiled to have no position in the user's text.
FormatCheck EngineSettingsCodec::checkFormat(const QString& kind, const QString& text) const {
  FormatCheck out;
  auto parsedKind = gb::parse_format_kind(kind.toStdString());
  if (!parsedKind) {
    out.error = fromStd(parsedKind.error().message);
    return out;
  }
  gb::FormatSettings format{*parsedKind, text.toStdString()};
  if (format.kind == gb::FormatKind::None) return out;
  if (format.kind == gb::FormatKind::JsonSchema) {
    try {
      const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(format.text);
      static_cast<void>(parsed);  // only where it fails matters here
    } catch (const nlohmann::json::parse_error& e) {
      placeAt(out, format.text, e.byte > 0 ? e.byte - 1 : 0);
      // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ...": the part after the position.
      const QString what = fromStd(e.what());
      const qsizetype colon = what.indexOf(QStringLiteral(": "), what.indexOf(QStringLiteral("parse error")));
      out.error = QStringLiteral("not valid JSON: ") + (colon >= 0 ? what.mid(colon + 2) : what);
      return out;
    }
  }
  auto gbnf = gb::format_to_gbnf(format);
  if (!gbnf) {
    out.error = fromStd(gbnf.error().message);
    static const QRegularExpression at(QStringLiteral("at offset (\\d+)"));
    if (const QRegularExpressionMatch m = at.match(out.error); format.kind == gb::FormatKind::Regex && m.hasMatch())
      placeAt(out, format.text, m.captured(1).toULongLong());
    return out;
  }
  gb::GbnfError where;
  auto grammar = gb::compile_gbnf(*gbnf, "root", &where);
  if (!grammar) {
    if (format.kind == gb::FormatKind::Gbnf) {
      placeAt(out, format.text, where.offset);
      out.line = where.line;  // the compiler's own count (equal to placeAt's)
      out.column = where.column;
      out.error = fromStd(where.message);
    } else {
      out.error = fromStd(grammar.error().message);
    }
    return out;
  }
  const gb::GrammarSpace space(std::move(*grammar));
  if (!space.status().ok()) out.error = fromStd(space.status().error().message);
  return out;
}

QVector<KvTypeOption> EngineSettingsCodec::kvTypes() const {
  QVector<KvTypeOption> out;
  for (const gb::kernels::KvTypeRow& row : gb::kernels::kv_type_rows())
    out.push_back({fromStd(row.name), fromStd(row.description)});
  return out;
}

QString EngineSettingsCodec::defaultKvType() const {
  return fromStd(gb::kernels::kv_type_name(gb::kernels::kDefaultKvType));
}

const SettingsCodec& engineSettingsCodec() {
  static const EngineSettingsCodec codec;
  return codec;
}

}  // namespace gbui
