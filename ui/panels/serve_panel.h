// ServePanel: the workbench's OpenAI-compatible server -- a Serve toggle with
// host, port and an optional API key, the address clients use once it listens,
// and the Requests table: every request the engine ran (server and chat alike)
// with its status, prompt / completion / cached tokens, TTFT and TPOT, filled
// from the same UiEvent stream as the other panels.
// Threads: UI thread only; talks to the EngineController through MainWindow.
#pragma once

#include <QHash>
#include <QWidget>

#include "session/ui_events.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTableWidget;

namespace gbui {

class ServePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ServePanel(QWidget* parent = nullptr);

  QString address() const;  // "" while not serving
  int numRequestRows() const;
  // Text of a cell of the Requests table (tests).
  QString requestCell(int row, int column) const;
  void setServing(bool on);  // as if the toggle was clicked (tests)
  void setPort(int port);

 public slots:
  void applyEvents(const gbui::UiEventBatch& events);
  void onServingStarted(const QString& address);
  void onServingFailed(const QString& message);
  void onServingStopped();

 signals:
  void startServing(const QString& host, int port, const QString& apiKey);
  void stopServing();
  // A row of the Requests table was selected: show that request's tokens.
  void requestSelected(quint64 request);

 private:
  int rowOf(RequestKey request);
  void setCell(int row, int column, const QString& text);

  QCheckBox* toggle_ = nullptr;
  QLineEdit* host_ = nullptr;
  QSpinBox* port_ = nullptr;
  QLineEdit* key_ = nullptr;
  QLabel* status_ = nullptr;
  QTableWidget* table_ = nullptr;
  QHash<RequestKey, int> rows_;  // request -> table row
  QString address_;
};

}  // namespace gbui
