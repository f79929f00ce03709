// InsidePanel: inside the model at the selected token (docs/inside.md). When a
// token is selected (the chat, the Branches or Serve panel: SessionModel's
// tokenSelected) and the panel is visible with "Auto" on, or on "Inspect", it
// asks for a report on that token's request sequence (prompt + generated ids)
// at its position (inspectRequested -> EngineController::inspect) and shows:
// a header (the token, the lens' target, the KV reused / recomputed, timings),
// the attention of every layer and head (InsideAttentionView), the logit lens
// (per layer the top-k and the target's rank and probability, as a table and a
// chart) and per-layer signals of the residual stream. "Export JSON" writes the
// report as the engine made it (schema glassbox-inside-v1).
// Threads: UI thread only; the engine work runs on the controller's thread.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>
#include <optional>

#include "inside_report.h"
#include "session/ui_commands.h"

class QCheckBox;
class QCustomPlot;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTabWidget;

namespace gbui {

class InsideAttentionView;
class SessionModel;

class InsidePanel : public QWidget {
  Q_OBJECT
 public:
  explicit InsidePanel(SessionModel* model, QWidget* parent = nullptr);

  // Sends an inspection of `position` of `tokens` (a new tag; an older report
  // still on its way is then ignored).
  void inspect(const QVector<int>& tokens, int position);
  // The selected token's inspection; false when no token is selected.
  bool inspectSelected();
  void setAuto(bool on);
  void setLayers(const QString& layers);
  void setTopK(int k);
  // Writes the report JSON (as the engine made it) to `path`; "" or the error.
  QString exportJson(const QString& path) const;

  bool waiting() const { return waiting_; }
  const QString& reportJson() const { return json_; }
  const std::optional<InsideReportView>& report() const { return report_; }
  QString headerText() const;
  QString errorText() const { return error_; }
  InsideAttentionView* attention() const { return attention_; }
  QTableWidget* lensTable() const { return lensTable_; }
  QCustomPlot* lensPlot() const { return lensPlot_; }
  QCustomPlot* signalPlot(int i) const { return signalPlots_.value(i); }

 public slots:
  // Selects position `position` of `tokens` (a token of the Score view, or of a
  // request: prompt + generated ids); inspected at once when the panel is
  // visible with "Auto" on, else on "Inspect" or when it shows.
  // A prompt token (the chat's "Show prompt"): that request's sequence at the position.
  void onPromptTokenSelected(quint64 request, int position);
  void selectSequence(const QVector<int>& tokens, int position);
  void onFinished(quint64 tag, const QString& json);
  void onFailed(quint64 tag, const QString& message);

 signals:
  void inspectRequested(const gbui::InspectCommand& command);
  void reportShown();   // a report or an error is on screen

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void onTokenSelected(quint64 request, int index);
  void selectRequestSequence(quint64 request, const QVector<int>& tokens, int position);
  // KV eviction: what the inspected request's cache had let go when it computed
  // the inspected position (empty: it kept everything, or the selection is not
  // a request's), and the header's line for it.
  QMap<int, QString> evictedAtInspection(QString& note) const;
  void showReport();
  void showHeader();
  void fillLens();
  void plotSignals();
  void clearView();

  SessionModel* model_;
  QLabel* header_;
  QPushButton* inspect_;
  QCheckBox* auto_;
  QLineEdit* layers_;
  QSpinBox* topK_;
  QPushButton* export_;
  QTabWidget* tabs_;
  InsideAttentionView* attention_;
  QTableWidget* lensTable_;
  QCustomPlot* lensPlot_;
  QVector<QCustomPlot*> signalPlots_;  // residual, attention, MLP norms; cosine to previous
  // The selected token's sequence and position, and whether it was inspected.
  QVector<int> selectedTokens_;
  int selectedPosition_ = -1;
  quint64 selectedRequest_ = 0;   // the request the selection is from (0: the Score view's text)
  quint64 inspectedRequest_ = 0;  // the request of the inspection on its way or shown
  bool selectionInspected_ = true;
  quint64 tag_ = 0;
  bool waiting_ = false;
  QString json_, error_;
  std::optional<InsideReportView> report_;
};

}  // namespace gbui
