#include "kv_grid_widget.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include "session/session_model.h"

namespace gbui {

KvGridWidget::KvGridWidget(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

int KvGridWidget::numCells() const { return static_cast<int>(model_->kvCells().size()); }
int KvGridWidget::columns() const { return std::max(1, (width() - 4) / kCell); }

int KvGridWidget::heightForWidth(int w) const {
  const int cols = std::max(1, (w - 4) / kCell);
  return 4 + ((numCells() + cols - 1) / cols) * kCell;
}

QRect KvGridWidget::cellRect(int block) const {
  const int cols = columns();
  return QRect(2 + (block % cols) * kCell, 2 + (block / cols) * kCell, kCell - 2, kCell - 2);
}

int KvGridWidget::blockAt(QPoint pos) const {
  const int col = (pos.x() - 2) / kCell, row = (pos.y() - 2) / kCell;
  if (pos.x() < 2 || pos.y() < 2 || col >= columns()) return -1;
  const int block = row * columns() + col;
  return block < numCells() ? block : -1;
}

QColor KvGridWidget::requestColor(quint64 request) {
  // Golden-ratio hue steps keep neighbouring request ids apart.
  const double hue = std::fmod(0.11 + static_cast<double>(request) * 0.618034, 1.0);
  return QColor::fromHsvF(static_cast<float>(hue), 0.55f, 0.85f);
}

void KvGridWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QVector<KvCell>& cells = model_->kvCells();
  const int blockSize = model_->blockSize();
  for (int b = 0; b < cells.size(); ++b) {
    const KvCell& c = cells[b];
    const QRect r = cellRect(b);
    p.fillRect(r, QColor(236, 238, 242));
    if (c.owned()) {
      const QColor color = c.owners.isEmpty() ? QColor(150, 150, 150) : requestColor(c.owners.front());
      const int filled = std::clamp(model_->filledSlots(b), 1, blockSize);
      const int h = r.height() * filled / blockSize;
      p.fillRect(QRect(r.left(), r.bottom() - h + 1, r.width(), h), color);
      if (c.refCount > 1) {
        p.setPen(Qt::NoPen);
        p.setBrush(Qt::black);
        p.drawEllipse(r.center(), 2, 2);
      }
    } else {
      if (c.windowReleased) {
        // Given back by a sliding window: amber, struck through.
        p.fillRect(r, QColor(245, 215, 158));
        p.setPen(QPen(QColor(170, 110, 30), 1.0));
        p.drawLine(r.bottomLeft(), r.topRight());
      } else if (c.cached()) {
        p.fillRect(r, QColor(225, 235, 250));
      }
      if (c.cached()) {
        p.setPen(QPen(QColor(60, 110, 200), 1.2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(0, 0, -1, -1));
      }
    }
  }
}

QString KvGridWidget::tooltipFor(int block) const {
  const KvCell& c = model_->kvCells()[block];
  QStringList owners;
  for (quint64 o : c.owners) owners << QString::number(o);
  QString text;
  for (int id : model_->blockTokens(block)) text += model_->tokenText(id);
  text.replace('\n', QStringLiteral("\\n"));
  QString state = c.owned() ? tr("owned") : c.cached() ? tr("cached (no owner)") : tr("free");
  if (!c.owned() && c.windowReleased) state += tr(", released by the sliding window");
  return tr("<b>block %1</b>: %2<br>refcount %3, owners: %4<br>%5 slots used<br><i>%6</i>")
      .arg(block)
      .arg(state)
      .arg(c.refCount)
      .arg(owners.isEmpty() ? tr("none") : owners.join(", "))
      .arg(model_->filledSlots(block))
      .arg(text.toHtmlEscaped());
}

bool KvGridWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const int block = blockAt(help->pos());
    if (block >= 0) QToolTip::showText(help->globalPos(), tooltipFor(block), this);
    else QToolTip::hideText();
    return true;
  }
  return QWidget::event(e);
}

}  // namespace gbui
