// ScoreView: re-scoring a text by teacher forcing (docs/compare.md). The user
// pastes or opens a text (or takes the chat's current text), optionally names a
// base model of the same vocabulary, and sees the text as a heatmap: per token
// its log-probability under the loaded model, or the KL divergence from the
// base. Clicking a token shows its rank, entropy, KL and top alternatives.
// The engine work happens in EngineController::scoreText (scoreRequested);
// results come back as the CLI's JSON (onFinished). Threads: UI thread only.
#pragma once

#include <QJsonArray>
#include <QString>
#include <QWidget>

#include "session/ui_events.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QTextBrowser;
class QUrl;

namespace gbui {

class ScoreView : public QWidget {
  Q_OBJECT
 public:
  explicit ScoreView(QWidget* parent = nullptr);

  void setText(const QString& text);
  void setBasePath(const QString& path);
  // "logprob" or "kl"
  void setMode(const QString& mode);
  const QString& resultJson() const { return json_; }
  int numTokens() const { return static_cast<int>(tokens_.size()); }
  // Heat of token k in [0, 1] for the current mode (0 = confident / no divergence).
  double heat(int k) const;
  QString summary() const;
  QString details() const;
  void showDetails(int k);

 public slots:
  void score();
  void onFinished(quint64 tag, const QString& json);
  void onFailed(quint64 tag, const QString& message);

 signals:
  void scoreRequested(quint64 tag, const QString& text, const QString& basePath);
  void finished();
  // A token was clicked: the scored sequence's ids and its position (the
  // Inside panel looks inside the model there). Not for a remote score
  // without token ids.
  void tokenPicked(const QVector<int>& tokens, int position);
  // The clicked token's routing (a mixture of experts: the pass that scored
  // it), with a label naming the token, for the Experts panel.
  void routingPicked(const QString& label, const gbui::UiRouting& routing);

 private:
  void render();

  QPlainTextEdit* input_;
  QLineEdit* base_;
  QComboBox* mode_;
  QTextBrowser* heatmap_;
  QLabel* summary_;
  QLabel* details_;
  quint64 tag_ = 0;
  QString json_;
  QJsonArray tokens_;
  double klMax_ = 0.0;
};

}  // namespace gbui
