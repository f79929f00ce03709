#include "engine_settings_codec.h"

#include <string>

#include "backend/kv_pool_sizing.h"
#include "sampling/sampler_settings_json.h"
#include "speculative/speculative_config.h"

namespace gbui {

namespace {
QString fromStd(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }
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
  out.json = QString::fromStdString(gb::sampler_settings_to_json(*parsed, -1));
  out.settings = std::make_shared<const gb::SamplerSettings>(std::move(*parsed));
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
