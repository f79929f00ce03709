// The SettingsCodec (ui/session/settings_codec.h) backed by the engine's own
// parsers: sampler settings JSON (engine/sampling/sampler_settings_json.h), the
// speculative spec (engine/speculative/speculative_config.h), KV eviction
// policies (engine/kv/kv_policy.h: the policy table, resolve_kv_policy), formats (the
// grammar compilers of engine/grammar, as runtime/grammar_constraint.h runs
// them at submit, less the vocabulary), the KV type table
// (kernels/cpu/kv_type.h).
// Threads: any (stateless).
#pragma once

#include "session/settings_codec.h"

namespace gbui {

class EngineSettingsCodec final : public SettingsCodec {
 public:
  QString defaultSamplerJson() const override;
  SamplerChoice parseSampler(const QString& json) const override;
  LaneChoice parseLane(const QString& json) const override;
  QString samplerJson(const SamplerChoice& choice, int indent) const override;
  QString validateSpeculative(const QString& spec) const override;
  QVector<KvPolicyOption> kvPolicies() const override;
  KvPolicyChoice checkKvPolicy(KvPolicyChoice choice) const override;
  FormatCheck checkFormat(const QString& kind, const QString& text) const override;
  QVector<KvTypeOption> kvTypes() const override;
  QString defaultKvType() const override;
};

// The process's one codec (stateless; what the window hands the panels).
const SettingsCodec& engineSettingsCodec();

}  // namespace gbui
