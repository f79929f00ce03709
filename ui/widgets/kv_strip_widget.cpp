#include "kv_strip_widget.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <vector>

namespace gbui {

KvStripWidget::KvStripWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void KvStripWidget::setStrips(QVector<Strip> strips, int numPrompt) {
  strips_ = std::move(strips);
  numPrompt_ = numPrompt;
  updateGeometry();
  update();
}

QSize KvStripWidget::sizeHint() const {
  const int n = std::max<qsizetype>(1, strips_.size());
  return {kLabelWidth + 300, static_cast<int>(n) * (kStripHeight + kGap) + kGap};
}

QSize KvStripWidget::minimumSizeHint() const { return {kLabelWidth + 60, sizeHint().height()}; }

QRect KvStripWidget::barRect(int strip) const {
  return {kLabelWidth, kGap + strip * (kStripHeight + kGap), std::max(1, width() - kLabelWidth - 4), kStripHeight};
}

std::pair<int, int> KvStripWidget::cellAt(QPoint point) const {
  const int n = numPositions();
  for (int s = 0; s < strips_.size() && n > 0; ++s) {
    const QRect r = barRect(s);
    if (!r.contains(point)) continue;
    const int position = static_cast<int>(static_cast<double>(point.x() - r.left()) * n / r.width());
    return {s, std::clamp(position, 0, n - 1)};
  }
  return {-1, -1};
}

float KvStripWidget::fullBarMass(const QVector<float>& mass) {
  // The 90th percentile, not the largest: the first positions (attention
  // sinks) gather far more mass than any other and would flatten the rest.
  std::vector<float> known;
  for (float m : mass)
    if (std::isfinite(m) && m > 0.0f) known.push_back(m);
  if (known.empty()) return 0.0f;
  const auto at = known.begin() + static_cast<std::ptrdiff_t>((known.size() - 1) * 9 / 10);
  std::nth_element(known.begin(), at, known.end());
  return *at;
}

void KvStripWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().color(QPalette::Base));
  const int n = numPositions();
  for (int s = 0; s < strips_.size(); ++s) {
    const Strip& strip = strips_[s];
    const QRect bar = barRect(s);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QRect(2, bar.top(), kLabelWidth - 6, bar.height()), Qt::AlignRight | Qt::AlignVCenter,
               p.fontMetrics().elidedText(strip.label, Qt::ElideRight, kLabelWidth - 6));
    p.fillRect(bar, palette().color(QPalette::AlternateBase));
    if (n == 0) continue;
    const float fullMass = fullBarMass(strip.mass);
    // One column per pixel (or per position when they are wider): the positions it covers.
    const int columns = std::min(n, bar.width());
    for (int c = 0; c < columns; ++c) {
      const int first = static_cast<int>(static_cast<long long>(c) * n / columns);
      const int last = std::max(first + 1, static_cast<int>(static_cast<long long>(c + 1) * n / columns));
      const int x0 = bar.left() + static_cast<int>(static_cast<long long>(c) * bar.width() / columns);
      const int x1 = bar.left() + static_cast<int>(static_cast<long long>(c + 1) * bar.width() / columns);
      int kept = 0, evicted = 0;
      float mass = -1.0f;
      for (int i = first; i < last; ++i) {
        const Cell cell = strip.cells[i];
        kept += cell == Cell::Kept;
        evicted += cell == Cell::Evicted;
        if (cell == Cell::Kept && i < strip.mass.size() && std::isfinite(strip.mass[i])) mass = std::max(mass, strip.mass[i]);
      }
      const int count = last - first;
      const QRect column(x0, bar.top(), std::max(1, x1 - x0 - (columns == n && x1 - x0 > 3 ? 1 : 0)), bar.height());
      // The column's colour: kept, evicted or outside the window, blended by their shares.
      const auto blend = [&](const QColor& a, const QColor& b, double share) {
        return QColor::fromRgbF(static_cast<float>(a.redF() * share + b.redF() * (1 - share)),
                                static_cast<float>(a.greenF() * share + b.greenF() * (1 - share)),
                                static_cast<float>(a.blueF() * share + b.blueF() * (1 - share)));
      };
      const QColor gone = evicted > 0 ? evictedColor() : outsideWindowColor();
      p.fillRect(column, blend(keptColor(), gone, static_cast<double>(kept) / count));
      if (mass >= 0.0f && fullMass > 0.0f) {
        const double share = std::min(1.0, std::sqrt(static_cast<double>(mass / fullMass)));
        const int h = std::max(1, static_cast<int>(std::lround(share * column.height())));
        p.fillRect(QRect(column.left(), column.bottom() - h + 1, column.width(), h), massColor());
      }
      if (kept == 0 && evicted > 0 && column.width() >= 3) {
        p.setPen(QColor(120, 120, 120));
        p.drawLine(column.left(), column.center().y(), column.right(), column.center().y());
      }
    }
    if (numPrompt_ > 0 && numPrompt_ < n) {
      const int x = bar.left() + static_cast<int>(static_cast<long long>(numPrompt_) * bar.width() / n);
      p.setPen(QPen(palette().color(QPalette::Text), 1.0));
      p.drawLine(x, bar.top() - 3, x, bar.bottom() + 3);
    }
  }
}

bool KvStripWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const auto [strip, position] = cellAt(help->pos());
    if (strip >= 0 && toolTip_) QToolTip::showText(help->globalPos(), toolTip_(strip, position), this);
    else QToolTip::hideText();
    return true;
  }
  return QWidget::event(e);
}

}  // namespace gbui
