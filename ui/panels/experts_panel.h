// ExpertsPanel: where a mixture of experts sent its tokens. For the token
// selected in the chat, a layers x experts strip of the experts the step that
// chose it used in each layer (cell colour = gate weight; the tooltip names
// layer, expert and weight); below, the expert load over the session: for each
// layer, the share of generated tokens that went to each expert (a histogram
// per layer, one row each). A dense model says so instead.
// Threads: UI thread.
#pragma once

#include <QVector>
#include <QWidget>

#include "session/ui_events.h"

class QLabel;

namespace gbui {

class SessionModel;

// A rows x columns grid of values in [0, 1], drawn as colour cells (white to
// dark blue), with a tooltip per cell from `tip`.
class ExpertGrid : public QWidget {
  Q_OBJECT
 public:
  explicit ExpertGrid(QWidget* parent = nullptr);
  void setGrid(int rows, int columns, QVector<double> values, QString what);
  int rows() const { return rows_; }
  int columns() const { return columns_; }
  double value(int row, int column) const { return values_.value(row * columns_ + column); }
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QRectF cellRect(int row, int column) const;
  int rows_ = 0, columns_ = 0;
  QVector<double> values_;
  QString what_;  // "weight" or "share of tokens", for the tooltip
};

class ExpertsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ExpertsPanel(SessionModel* model, QWidget* parent = nullptr);

  ExpertGrid* tokenGrid() const { return token_; }
  ExpertGrid* loadGrid() const { return load_; }
  QLabel* header() const { return header_; }
  // Generated tokens counted in the load (those whose record has routing).
  int tokensCounted() const { return counted_; }

 public slots:
  void showToken(quint64 request, int index);
  // A routing from elsewhere (a token clicked in the Score view), under `label`.
  void showRouting(const QString& label, const gbui::UiRouting& routing);

 private:
  void reset();
  void count(const UiEventBatch& batch);
  void showLoad();
  SessionModel* model_;
  QLabel* header_;
  QLabel* loadHeader_;
  ExpertGrid* token_;
  ExpertGrid* load_;
  int layers_ = 0, experts_ = 0;
  QVector<int> loadCounts_;  // (layers x experts) tokens routed to each expert
  int counted_ = 0;
};

}  // namespace gbui
