// KvStripWidget: which token positions a request's KV cache keeps, one
// horizontal strip per layer group (the global layers, and a window group's
// sliding layers), position 0 on the left. A kept position is blue, and where
// the policy ranks by attention mass (h2o, snapkv) a darker bar rises from the
// bottom in proportion to the square root of its mass (full height at the
// strip's 90th percentile and above, fullBarMass); an evicted position is grey and struck through; a position outside
// a sliding window is amber (the colours of the KV grid). A tick marks where
// the prompt ends. With more positions than pixels, a pixel column shows the
// share of its positions kept and their largest mass. The hover text comes
// from setToolTipSource (the panel knows the tokens).
// Threads: UI thread.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>
#include <algorithm>
#include <functional>

namespace gbui {

class KvStripWidget : public QWidget {
  Q_OBJECT
 public:
  enum class Cell : quint8 { Kept, Evicted, OutsideWindow };
  struct Strip {
    QString label;         // "global layers (12)"
    QVector<Cell> cells;   // (positions) index = position
    QVector<float> mass;   // (positions) kept positions' mass, NaN unknown; empty: the policy has none
    int numKept() const { return static_cast<int>(std::count(cells.begin(), cells.end(), Cell::Kept)); }
  };

  explicit KvStripWidget(QWidget* parent = nullptr);
  // The strips (all of one length, the positions computed so far) and where the prompt ends.
  void setStrips(QVector<Strip> strips, int numPrompt);
  const QVector<Strip>& strips() const { return strips_; }
  int numPrompt() const { return numPrompt_; }
  // (strip, position) -> the hover text.
  void setToolTipSource(std::function<QString(int strip, int position)> source) { toolTip_ = std::move(source); }
  // The strip and position under a widget point, {-1, -1} none.
  std::pair<int, int> cellAt(QPoint point) const;

  static QColor keptColor() { return QColor(170, 196, 238); }
  static QColor massColor() { return QColor(40, 85, 170); }
  static QColor evictedColor() { return QColor(218, 218, 218); }
  static QColor outsideWindowColor() { return QColor(245, 215, 158); }

  // The mass that fills a bar: the 90th percentile of the known masses (0: none).
  static float fullBarMass(const QVector<float>& mass);

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QRect barRect(int strip) const;  // the painted area of a strip (the label left of it)
  int numPositions() const { return strips_.isEmpty() ? 0 : static_cast<int>(strips_.front().cells.size()); }

  QVector<Strip> strips_;
  int numPrompt_ = 0;
  std::function<QString(int, int)> toolTip_;
  static constexpr int kLabelWidth = 175;  // px
  static constexpr int kStripHeight = 20;
  static constexpr int kGap = 5;
};

}  // namespace gbui
