// SettingsCodec: what the panels may ask the engine about settings, without
// naming it. Sampler settings are parsed and validated once, here, into a
// SamplerChoice that UI commands carry to the bridge as they are (no second
// parse there); speculative-decoding specs, KV eviction policies and KV type
// names are checked by the engine's own parsers. The window builds the one implementation
// (ui/bridge/engine_settings_codec.h) and hands it to the panels that edit
// settings (ui/window/panel_registry.h: PanelContext).
// Threads: any (const, stateless).
#pragma once

#include <QString>
#include <QVector>
#include <memory>

namespace gb {
struct SamplerSettings;  // engine/sampling: only the bridge reads it
}

namespace gbui {

// Sampler settings as the engine parsed them. `settings` is null when the JSON
// did not validate (then `error` says why); `json` is the canonical compact
// JSON (what the session file, presets and the trace show).
struct SamplerChoice {
  std::shared_ptr<const gb::SamplerSettings> settings;
  QString json;
  QString error;
  bool ok() const { return settings != nullptr; }
};

// A request format (sampler settings' "format") checked by the engine's own
// compilers, without a model: what submitting it would refuse, and where.
struct FormatCheck {
  QString error;             // "" = it compiles
  int line = 0, column = 0;  // 1-based position in the text (0: the error names none)
  int offset = -1;           // byte offset of that position in the UTF-8 text (-1: none)
  bool ok() const { return error.isEmpty(); }
};

struct KvTypeOption {
  QString name;         // "f16", "q8_0", ...
  QString description;  // one line for tooltips
};

// A KV eviction policy (engine/kv/kv_policy.h, docs/kv-eviction.md) as a row
// of the engine's table: what the workbench's policy box lists.
struct KvPolicyOption {
  QString name;     // "full", "sink", "h2o", "snapkv"
  QString summary;  // one line for tooltips
  int defaultSinks = 0;
  bool usesMass = false;  // ranks tokens by attention mass (h2o, snapkv)
};

// The KV eviction policy a new request runs with, as the codec checked it
// (SettingsCodec::checkKvPolicy): the user's fields, the policy the engine
// resolves them to, or why it refuses them. "full" keeps every token (budget
// 0, sinks -1, no shadow: the codec clears them).
struct KvPolicyChoice {
  QString policy = QStringLiteral("full");
  int budget = 0;       // B: tokens the request's cache holds at most
  int sinks = -1;       // S: leading tokens never evicted; -1: the policy's default
  bool shadow = false;  // also run a full-cache shadow and report KL per token
  QString resolved = QStringLiteral("full");  // the engine's spelling: "sink B=32 S=4 R=28"
  QString error;        // "" when the engine accepts it
  bool ok() const { return error.isEmpty(); }
  bool active() const { return policy != QLatin1String("full"); }
  friend bool operator==(const KvPolicyChoice&, const KvPolicyChoice&) = default;
};

// A Compare lane's settings (engine/runtime/comparison_json.h): the sampler
// settings JSON with an optional "kv_policy" member (the server's field), as
// the codec parsed it. The sampler part's error is the lane's.
struct LaneChoice {
  SamplerChoice sampler;
  QString kvPolicy = QStringLiteral("full");  // the engine's spelling: "h2o B=256 S=0 R=128"
  QString kvPolicyJson;                       // the resolved policy as JSON; "" for full
  bool ok() const { return sampler.ok(); }
  bool evicts() const { return !kvPolicyJson.isEmpty(); }
};

class SettingsCodec {
 public:
  virtual ~SettingsCodec() = default;
  // The engine's default sampler settings, as indented JSON.
  virtual QString defaultSamplerJson() const = 0;
  virtual SamplerChoice parseSampler(const QString& json) const = 0;
  // A Compare lane: sampler settings JSON, optionally with "kv_policy".
  virtual LaneChoice parseLane(const QString& json) const = 0;
  // The choice's settings as JSON with `indent` (-1: compact); "" when not ok.
  virtual QString samplerJson(const SamplerChoice& choice, int indent) const = 0;
  // "" when the speculative spec parses ("" = off), else the engine's message.
  virtual QString validateSpeculative(const QString& spec) const = 0;
  // The engine's KV eviction policies, in its table's order ("full" first).
  virtual QVector<KvPolicyOption> kvPolicies() const = 0;
  // `choice` checked by the engine's resolve_kv_policy: `resolved` and `error`
  // filled in (an unknown name, a budget below 1, sinks that leave no recent
  // window ... are refused with the engine's message).
  virtual KvPolicyChoice checkKvPolicy(KvPolicyChoice choice) const = 0;
  // `kind` is a format kind's JSON name ("none", "json", "json_schema", "gbnf",
  // "regex"); `text` the grammar, schema or pattern. Bounded work (the
  // compilers' limits): safe to call from the UI thread as the user types.
  virtual FormatCheck checkFormat(const QString& kind, const QString& text) const = 0;
  // Every KV cache element type the engine offers, and the default one.
  virtual QVector<KvTypeOption> kvTypes() const = 0;
  virtual QString defaultKvType() const = 0;
};

}  // namespace gbui
