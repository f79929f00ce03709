#include "distribution_bars.h"

#include <QPainter>
#include <algorithm>

namespace gbui {

DistributionBars::DistributionBars(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(160);
  setAutoFillBackground(true);
}

void DistributionBars::setDistributions(const QVector<LaneDistribution>& lanes, int position) {
  lanes_ = lanes;
  position_ = position;
  update();
}

void DistributionBars::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (lanes_.isEmpty()) {
    p.drawText(rect(), Qt::AlignCenter, tr("Run a comparison and pick a position"));
    return;
  }
  const int numBars = 8;
  const int colW = width() / static_cast<int>(lanes_.size());
  const int lineH = std::clamp((height() - 24) / (numBars + 1), 12, 22);
  for (int i = 0; i < lanes_.size(); ++i) {
    const LaneDistribution& l = lanes_[i];
    const int x0 = i * colW + 4;
    p.setPen(palette().text().color());
    p.drawText(QRect(x0, 2, colW - 8, 18), Qt::AlignLeft | Qt::AlignVCenter,
               tr("%1 @ %2").arg(l.lane).arg(position_));
    if (!l.present) {
      p.drawText(QRect(x0, 22, colW - 8, lineH), Qt::AlignLeft, tr("(ended)"));
      continue;
    }
    const int labelW = std::min(70, colW / 3);
    const int barMax = colW - labelW - 56;
    for (int k = 0; k < std::min<int>(numBars, static_cast<int>(l.texts.size())); ++k) {
      const int y = 22 + k * lineH;
      const bool drawn = k == l.drawn;
      QString label = l.texts[k];
      label.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
      p.setPen(drawn ? QColor(200, 80, 0) : palette().text().color());
      p.drawText(QRect(x0, y, labelW, lineH), Qt::AlignRight | Qt::AlignVCenter,
                 (drawn ? QStringLiteral("\u25B6 ") : QString()) + label);
      const int w = static_cast<int>(static_cast<float>(barMax) * std::clamp(l.probs[k], 0.0f, 1.0f));
      p.fillRect(QRect(x0 + labelW + 4, y + 2, std::max(1, w), lineH - 4),
                 drawn ? QColor(240, 140, 40) : QColor(90, 140, 210));
      p.drawText(QRect(x0 + labelW + 8 + w, y, 50, lineH), Qt::AlignLeft | Qt::AlignVCenter,
                 QString::number(static_cast<double>(l.probs[k]), 'f', 3));
    }
    if (l.drawn < 0 && !l.drawnText.isEmpty())
      p.drawText(QRect(x0, 22 + numBars * lineH, colW - 8, lineH), Qt::AlignLeft,
                 tr("drawn: %1 (not in the top list)").arg(l.drawnText));
  }
}

}  // namespace gbui
