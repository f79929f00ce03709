// KvPolicySettings: the KV eviction part of the sampling panel, for new
// requests (engine/kv/kv_policy.h, docs/kv-eviction.md): the policy (the
// engine's table: full, sink, h2o, snapkv), the token budget B, the sinks S
// (-1: the policy's default) and "shadow" (also run a full-cache shadow and
// report the KL per token, shown in the KV panel). Every change is checked by
// the settings codec (the engine's resolve_kv_policy): the resolved policy
// ("sink B=32 S=4 R=28") shows under the controls, or the engine's message in
// red. MainWindow passes choice() with each submitted request; what a model or
// backend cannot do (a GPU backend, a model whose every layer slides) comes
// back from the engine when the request is submitted, and a remote engine
// refuses any policy but full.
// Threads: UI thread.
#pragma once

#include <QWidget>

#include "session/settings_codec.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QSpinBox;

namespace gbui {

class KvPolicySettings : public QWidget {
  Q_OBJECT
 public:
  explicit KvPolicySettings(const SettingsCodec& codec, QWidget* parent = nullptr);

  // The controls' policy as the codec checked it (error "" when it resolves).
  KvPolicyChoice choice() const;
  // Shows `choice` in the controls; "" when the codec accepts it, else its
  // message (and the controls stay as they were).
  QString setChoice(const KvPolicyChoice& choice);

  QComboBox* policyBox() const { return policy_; }
  QSpinBox* budgetBox() const { return budget_; }
  QSpinBox* sinksBox() const { return sinks_; }
  QCheckBox* shadowBox() const { return shadow_; }
  // The line under the controls: the resolved policy, or the engine's message.
  QString statusText() const;

 signals:
  void choiceChanged(const gbui::KvPolicyChoice& choice);

 private:
  KvPolicyChoice fields() const;  // the controls, unchecked
  void onChanged();

  const SettingsCodec& codec_;
  QVector<KvPolicyOption> options_;
  QComboBox* policy_;
  QSpinBox* budget_;
  QSpinBox* sinks_;
  QCheckBox* shadow_;
  QLabel* status_;
  bool updating_ = false;
};

}  // namespace gbui
