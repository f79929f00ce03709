// InsideAttentionView: the attention part of the Inside panel. A layer x head
// grid of small cells coloured by each head's entropy or sink mass (each layer's
// heads in natural order, or sorted by entropy or by sink mass); clicking a
// cell picks that layer and head. The picked row (one head, or the mean over
// the heads of its KV group) is drawn as a strip over the context text, tokens
// shaded by weight, the positions before a sliding layer's window marked as
// outside it; beside it, the most attended positions.
// Threads: UI thread.
#pragma once

#include <QMap>
#include <QWidget>

#include "inside_report.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QTableWidget;
class QTextBrowser;

namespace gbui {

class InsideHeadGrid;

class InsideAttentionView : public QWidget {
  Q_OBJECT
 public:
  explicit InsideAttentionView(QWidget* parent = nullptr);

  // A new report (nullptr: none); keeps the picked layer and head where they exist.
  void setReport(const InsideReportView* report);
  // Positions the inspected request's own cache had evicted when it computed
  // this query (KV eviction; the inspection recomputes with every token), with
  // why: struck through in the strip of the layers that evict (not sliding).
  // Set before setReport; cleared by an empty map.
  void setEvicted(QMap<int, QString> evicted) { evicted_ = std::move(evicted); }
  const QMap<int, QString>& evicted() const { return evicted_; }

  // The picked layer (an index into the report's layers) and head; -1 none.
  int pickedLayer() const { return layer_; }
  int pickedHead() const { return head_; }
  void pickHead(int layerIndex, int head);
  void setSort(InsideHeadSort sort);
  InsideHeadSort sort() const;
  void setMeanOverGroup(bool mean);
  // The heads of a layer (index into the report's layers) as the grid shows them, left to right.
  QVector<int> headOrder(int layerIndex) const;
  // The picked row's most attended position (absolute), highlighted in the strip; -1 none.
  int topPosition() const { return topPosition_; }
  // The picked row (over the layer's first_position .. position).
  const QVector<double>& shownRow() const { return row_; }
  QTableWidget* topTable() const { return top_; }
  QString stripHtml() const;

 signals:
  void headPicked(int layerIndex, int head);

 private:
  void showRow();

  const InsideReportView* report_ = nullptr;
  InsideHeadGrid* grid_;
  QComboBox* sort_;
  QComboBox* colour_;
  QCheckBox* mean_;
  QLabel* rowLabel_;
  QTextBrowser* strip_;
  QTableWidget* top_;
  int layer_ = -1, head_ = -1;
  QVector<double> row_;
  int topPosition_ = -1;
  QMap<int, QString> evicted_;
};

}  // namespace gbui
