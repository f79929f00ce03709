// SpeculativeSettings: the speculative-decoding part of the sampling panel.
// Off / n-gram (n, k) / draft model (file, k) / self-draft (layers, k), shown as
// the engine's text form (spec()), which MainWindow passes with each submitted
// request. Syntax errors show inline under the controls (the engine's parser
// decides); model-dependent refusals (another vocabulary, too many layers)
// come back from the engine when a request is submitted.
// Threads: UI thread.
#pragma once

#include <QWidget>

#include "session/settings_codec.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QStackedWidget;

namespace gbui {

class SpeculativeSettings : public QWidget {
  Q_OBJECT
 public:
  enum class Mode { Off, Ngram, DraftModel, SelfDraft };
  explicit SpeculativeSettings(const SettingsCodec& codec, QWidget* parent = nullptr);

  // "" when off, else "ngram:n=N,k=K" | "draft:PATH:k=K" | "self:L:k=K".
  QString spec() const;
  // Shows `spec` in the controls; "" when it parses, else the engine's message.
  QString setSpec(const QString& spec);
  Mode mode() const;
  void setMode(Mode mode);
  void setDraftPath(const QString& path);
  void setK(int k);
  // The engine's message for the current spec ("" when it parses).
  QString error() const;

 signals:
  void specChanged(const QString& spec);

 private:
  const SettingsCodec& codec_;
  QStackedWidget* buildDrafterPages();
  void onChanged();
  void browse();

  QComboBox* mode_;
  QStackedWidget* pages_;
  QSpinBox* ngramN_;
  QLineEdit* draftPath_;
  QSpinBox* selfLayers_;
  QSpinBox* k_;
  QComboBox* fallback_;  // "timing" | "accept" | "off" (the engine's fallback= option)
  QLabel* error_;
  bool updating_ = false;
};

}  // namespace gbui
