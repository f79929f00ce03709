// DistributionBars: the next-token distribution of several lanes at one
// position, side by side -- per lane a column of horizontal bars (the recorded
// candidates' probability after the lane's sampler chain), the drawn token
// marked. Used by the Compare view. Plain painting, no engine types.
// Threads: UI thread only.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>

namespace gbui {

struct LaneDistribution {
  QString lane;
  bool present = false;           // the lane has a token at this position
  QVector<QString> texts;         // candidate token texts, best first
  QVector<float> probs;           // after the chain (0: removed)
  int drawn = -1;                 // index into texts of the drawn token, -1 if not recorded
  QString drawnText;
};

class DistributionBars : public QWidget {
  Q_OBJECT
 public:
  explicit DistributionBars(QWidget* parent = nullptr);
  void setDistributions(const QVector<LaneDistribution>& lanes, int position);
  const QVector<LaneDistribution>& distributions() const { return lanes_; }
  QSize sizeHint() const override { return {600, 220}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QVector<LaneDistribution> lanes_;
  int position_ = 0;
};

}  // namespace gbui
