// TokenInspectorPanel: for the selected token, a bar chart of its top-N
// candidates (probability before sampling, after the last stage, the chosen one
// highlighted, removed ones marked with the stage that removed them), the
// cumulative final distribution with the random draw, and a table with the
// probability after every stage. Double-clicking a candidate (or "Branch")
// asks to branch the conversation with that token (branchRequested). A token of
// a request with a format gets a line on what the grammar stage did: the
// candidates it removed, the raw probability mass it removed, "forced" when it
// allowed one token only, and where the grammar stood.
// Threads: UI thread.
#pragma once

#include <QWidget>

#include "session/ui_events.h"

class QCustomPlot;
class QLabel;
class QPushButton;
class QTableWidget;

namespace gbui {

class SessionModel;

class TokenInspectorPanel : public QWidget {
  Q_OBJECT
 public:
  explicit TokenInspectorPanel(SessionModel* model, QWidget* parent = nullptr);

  QTableWidget* table() const { return table_; }
  QCustomPlot* plot() const { return plot_; }
  QLabel* grammarLabel() const { return grammar_; }
  std::optional<std::pair<RequestKey, int>> shownToken() const { return shown_; }

 public slots:
  void showToken(quint64 request, int index);
  void branchFromRow(int row);

 signals:
  // Branch `request` before its generated token `index`, forcing `tokenId`.
  void branchRequested(quint64 request, int index, int tokenId);

 private:
  void clearView();
  void showHeader(const UiToken& t, quint64 request, int index);
  // The grammar line (hidden for a token without grammar info).
  void showGrammar(const UiToken& t);
  // Bars: raw probability (grey), final probability (blue), chosen (orange),
  // the cumulative curve and the random draw.
  void plotCandidates(const UiToken& t);
  void addRemovedLabels(const UiToken& t, double maxP);
  // Table: every stage column, exactly the record's numbers.
  void fillTable(const UiToken& t);
  SessionModel* model_;
  QLabel* header_;
  QLabel* grammar_;
  QCustomPlot* plot_;
  QTableWidget* table_;
  QPushButton* branch_;
  std::optional<std::pair<RequestKey, int>> shown_;
};

}  // namespace gbui
