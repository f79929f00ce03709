// SamplingPanel: one slider + spin box per sampler setting, the chain order as a
// drag-to-reorder checklist (unchecked stages are left out), the seed (a
// regeneration draws a new one and shows it here unless the seed is pinned),
// and presets saved / loaded as JSON files in the engine's
// SamplerSettings JSON shape. Every change emits settingsChanged with the full
// JSON, which MainWindow applies to the running request's next token. Below the
// sliders, FormatBox sets the format new requests must follow (the grammar
// stage; checked as it is typed and again at submit), SpeculativeSettings
// picks the drafter and KvPolicySettings the KV eviction policy for new requests.
// Threads: UI thread.
#pragma once

#include <QJsonObject>
#include <QWidget>
#include <vector>

#include "session/settings_codec.h"

class QCheckBox;
class QDoubleSpinBox;
class QFormLayout;
class QListWidget;
class QSlider;
class QSpinBox;

namespace gbui {

class FormatBox;
class KvPolicySettings;
class SpeculativeSettings;

class SamplingPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SamplingPanel(const SettingsCodec& codec, QWidget* parent = nullptr);

  // The settings as shown (seed as entered).
  QString settingsJson() const;
  // The settings as the engine parsed them (the settings codec), for commands.
  SamplerChoice choice() const;
  // For a new request: choice(). With newSeed (a regeneration) and the seed
  // not pinned, a fresh seed is drawn first and shown in the seed box.
  SamplerChoice submitChoice(bool newSeed = false);
  bool seedPinned() const;
  void setSeedPinned(bool pinned);
  int seed() const;
  // Loads settings JSON (a preset); "" on success, else the engine's message.
  QString setSettingsJson(const QString& json);
  // Sets one numeric field by its JSON key ("temperature", "dry.multiplier", ...)
  // as if the user moved its slider.
  bool setValue(const QString& key, double value);
  double value(const QString& key) const;
  QSlider* slider(const QString& key) const;
  SpeculativeSettings* speculative() const { return speculative_; }
  KvPolicySettings* kvPolicy() const { return kvPolicy_; }
  FormatBox* format() const { return format_; }

 public slots:
  void savePreset();
  void loadPreset();
  void resetDefaults();

 signals:
  void settingsChanged(const QString& json);

 private:
  struct Field {
    QString key;  // "temperature" or "dry.multiplier"
    double min = 0, max = 1;
    int decimals = 2;
    QSlider* slider = nullptr;
    QDoubleSpinBox* spin = nullptr;
  };
  void addField(QFormLayout* form, const QString& key, const QString& label, double min, double max,
                int decimals);
  void onChanged();
  const Field* field(const QString& key) const;

  const SettingsCodec& codec_;
  std::vector<Field> fields_;
  QListWidget* order_;
  QSpinBox* seed_;
  QCheckBox* pinSeed_;
  FormatBox* format_;
  SpeculativeSettings* speculative_;
  KvPolicySettings* kvPolicy_;
  QJsonObject base_;     // fields without a widget (stop strings, logit bias ...); "format" is format_'s
  bool updating_ = false;
};

}  // namespace gbui
