#include "inside_attention_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <numeric>

namespace gbui {
namespace {

// White to `to` by t in [0, 1].
QColor insideBlend(const QColor& to, double t) {
  t = std::clamp(t, 0.0, 1.0);
  return QColor::fromRgbF(static_cast<float>(1.0 - t * (1.0 - to.redF())), static_cast<float>(1.0 - t * (1.0 - to.greenF())),
                          static_cast<float>(1.0 - t * (1.0 - to.blueF())));
}

QString insideVisibleText(const InsideToken& token) {
  return insideTokenLabel(token).toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;"));
}

constexpr int kInsideGridLabelWidth = 28;
constexpr int kInsideTopRows = 10;

}  // namespace

// The layer x head grid: one row per reported layer, its heads in the order of
// the chosen sort; the picked cell outlined.
class InsideHeadGrid : public QWidget {
 public:
  explicit InsideHeadGrid(InsideAttentionView* view) : QWidget(view), view_(view) {
    setMinimumSize(120, 80);
    setMouseTracking(true);
  }
  void setReport(const InsideReportView* report) {
    report_ = report;
    update();
  }
  void setSort(InsideHeadSort sort) {
    sort_ = sort;
    update();
  }
  InsideHeadSort sort() const { return sort_; }
  void setColourBySink(bool sink) {
    sink_ = sink;
    update();
  }
  void setPicked(int layer, int head) {
    layer_ = layer;
    head_ = head;
    update();
  }
  QVector<int> order(int layerIndex) const {
    if (!report_ || layerIndex < 0 || layerIndex >= report_->layers.size()) return {};
    return insideHeadOrder(report_->layers[layerIndex], sort_);
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (!report_ || report_->layers.isEmpty() || report_->layers.front().attention.isEmpty()) {
      p.drawText(rect(), Qt::AlignCenter, report_ ? tr("No attention in this report") : QString());
      return;
    }
    const QSize cell = cellSize();
    p.setFont(font());
    for (int li = 0; li < report_->layers.size(); ++li) {
      const InsideLayerView& l = report_->layers[li];
      const int y = li * cell.height();
      p.setPen(palette().text().color());
      if (cell.height() >= 9)
        p.drawText(QRect(0, y, kInsideGridLabelWidth - 4, cell.height()), Qt::AlignRight | Qt::AlignVCenter,
                   QString::number(l.layer));
      const QVector<int> heads = order(li);
      const double maxEntropy = std::log(std::max<qsizetype>(2, l.attention.value(0).size()));
      for (int col = 0; col < heads.size(); ++col) {
        const int h = heads[col];
        const double t = sink_ ? l.headSinkMass.value(h) : 1.0 - l.headEntropy.value(h) / maxEntropy;
        const QRect r(kInsideGridLabelWidth + col * cell.width(), y, cell.width() - 1, cell.height() - 1);
        p.fillRect(r, insideBlend(sink_ ? QColor(214, 96, 20) : QColor(33, 90, 170), t));
        if (li == layer_ && h == head_) {
          p.setPen(QPen(Qt::black, 2));
          p.drawRect(r.adjusted(1, 1, -1, -1));
        }
      }
    }
  }
  void mousePressEvent(QMouseEvent* e) override {
    if (!report_ || report_->layers.isEmpty()) return;
    const QSize cell = cellSize();
    const int x = static_cast<int>(e->position().x()) - kInsideGridLabelWidth;
    const int li = static_cast<int>(e->position().y()) / cell.height();
    if (x < 0 || li < 0 || li >= report_->layers.size()) return;
    const QVector<int> heads = order(li);
    const int col = x / cell.width();
    if (col < heads.size()) view_->pickHead(li, heads[col]);
  }

 private:
  QSize cellSize() const {
    const int numHeads = std::max(1, report_->numHeads);
    const auto numLayers = std::max<qsizetype>(1, report_->layers.size());
    const int w = std::clamp((width() - kInsideGridLabelWidth) / numHeads, 4, 28);
    const int h = std::clamp(static_cast<int>(height() / numLayers), 4, 18);
    return {w, h};
  }

  InsideAttentionView* view_;
  const InsideReportView* report_ = nullptr;
  InsideHeadSort sort_ = InsideHeadSort::Natural;
  bool sink_ = false;
  int layer_ = -1, head_ = -1;
};

InsideAttentionView::InsideAttentionView(QWidget* parent) : QWidget(parent) {
  grid_ = new InsideHeadGrid(this);
  grid_->setObjectName(QStringLiteral("insideHeadGrid"));
  sort_ = new QComboBox;
  sort_->setObjectName(QStringLiteral("insideHeadSort"));
  sort_->addItem(tr("Natural order"), int(InsideHeadSort::Natural));
  sort_->addItem(tr("By entropy"), int(InsideHeadSort::Entropy));
  sort_->addItem(tr("By sink mass"), int(InsideHeadSort::SinkMass));
  colour_ = new QComboBox;
  colour_->setObjectName(QStringLiteral("insideHeadColour"));
  colour_->addItems({tr("Colour: focus (1 - entropy)"), tr("Colour: sink mass")});
  mean_ = new QCheckBox(tr("Mean over the KV group"));
  mean_->setObjectName(QStringLiteral("insideMeanOverGroup"));
  mean_->setToolTip(tr("Average the rows of the query heads that share the picked head's K/V"));
  rowLabel_ = new QLabel;
  strip_ = new QTextBrowser;
  strip_->setObjectName(QStringLiteral("insideStrip"));
  strip_->setOpenLinks(false);
  top_ = new QTableWidget(0, 3);
  top_->setObjectName(QStringLiteral("insideTopPositions"));
  top_->setHorizontalHeaderLabels({tr("Position"), tr("Token"), tr("Weight")});
  top_->verticalHeader()->hide();
  top_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  top_->horizontalHeader()->setStretchLastSection(true);

  auto* left = new QWidget;
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  leftLayout->addWidget(sort_);
  leftLayout->addWidget(colour_);
  leftLayout->addWidget(mean_);
  leftLayout->addWidget(grid_, 1);
  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(strip_);
  right->addWidget(top_);
  auto* split = new QSplitter;
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(rowLabel_);
  layout->addWidget(split, 1);

  connect(sort_, &QComboBox::currentIndexChanged, this,
          [this] { grid_->setSort(static_cast<InsideHeadSort>(sort_->currentData().toInt())); });
  connect(colour_, &QComboBox::currentIndexChanged, this, [this](int i) { grid_->setColourBySink(i == 1); });
  connect(mean_, &QCheckBox::toggled, this, &InsideAttentionView::showRow);
}

void InsideAttentionView::setReport(const InsideReportView* report) {
  report_ = report;
  grid_->setReport(report);
  if (!report_ || report_->layers.isEmpty() || report_->layers.front().attention.isEmpty()) {
    layer_ = head_ = -1;
  } else {
    // Keep the pick where the new report has it; else the last layer's first head.
    if (layer_ < 0 || layer_ >= report_->layers.size()) layer_ = static_cast<int>(report_->layers.size()) - 1;
    if (head_ < 0 || head_ >= report_->layers[layer_].attention.size()) head_ = 0;
  }
  grid_->setPicked(layer_, head_);
  showRow();
}

void InsideAttentionView::pickHead(int layerIndex, int head) {
  if (!report_ || layerIndex < 0 || layerIndex >= report_->layers.size() || head < 0 ||
      head >= report_->layers[layerIndex].attention.size())
    return;
  layer_ = layerIndex;
  head_ = head;
  grid_->setPicked(layer_, head_);
  showRow();
  emit headPicked(layer_, head_);
}

void InsideAttentionView::setSort(InsideHeadSort sort) { sort_->setCurrentIndex(sort_->findData(int(sort))); }

InsideHeadSort InsideAttentionView::sort() const { return grid_->sort(); }

void InsideAttentionView::setMeanOverGroup(bool mean) { mean_->setChecked(mean); }

QVector<int> InsideAttentionView::headOrder(int layerIndex) const { return grid_->order(layerIndex); }

QString InsideAttentionView::stripHtml() const { return strip_->toHtml(); }

void InsideAttentionView::showRow() {
  row_.clear();
  topPosition_ = -1;
  top_->setRowCount(0);
  if (!report_ || layer_ < 0) {
    rowLabel_->clear();
    strip_->clear();
    return;
  }
  const InsideLayerView& l = report_->layers[layer_];
  const bool mean = mean_->isChecked();
  row_ = insideAttentionRow(*report_, l, head_, mean);
  const int argmax = insideArgmax(row_);
  topPosition_ = argmax < 0 ? -1 : l.firstPosition + argmax;
  const int group = report_->numKvHeads > 0 ? std::max(1, report_->numHeads / report_->numKvHeads) : 1;
  rowLabel_->setText(
      tr("Layer %1, %2%3 — entropy %4 nats, sink mass %5")
          .arg(l.layer)
          .arg(mean ? tr("heads %1-%2 (mean of KV head %3)").arg(head_ / group * group).arg(head_ / group * group + group - 1).arg(head_ / group)
                    : tr("head %1").arg(head_))
          .arg(l.sliding ? tr(", sliding window %1 (from position %2)").arg(l.window).arg(l.firstPosition) : QString())
          .arg(l.headEntropy.value(head_), 0, 'f', 3)
          .arg(l.headSinkMass.value(head_), 0, 'f', 3));

  // The strip: every context token, shaded by the square root of its weight
  // relative to the row's largest (a sink that takes most of the weight would
  // leave every other token white on a linear scale).
  const double maxW = argmax < 0 ? 1.0 : std::max(row_[argmax], 1e-12);
  QString html = QStringLiteral("<div style='font-family: monospace; line-height: 160%'>");
  for (int p = 0; p < report_->context.size(); ++p) {
    const QString text = insideVisibleText(report_->context[p]);
    if (p < l.firstPosition) {
      html += QStringLiteral("<span style='color:#999999; text-decoration: line-through' title='outside the window'>%1</span>").arg(text);
      continue;
    }
    const double w = row_.value(p - l.firstPosition);
    const QString bg = insideBlend(QColor(214, 96, 20), std::sqrt(w / maxW)).name();
    QString border = p == topPosition_ ? QStringLiteral("; font-weight: bold; text-decoration: underline") : QString();
    QString title = QStringLiteral("position %1: %2").arg(p).arg(w, 0, 'f', 4);
    if (!l.sliding && evicted_.contains(p)) {
      border = QStringLiteral("; color:#707070; text-decoration: line-through");
      title += QStringLiteral(" (") + evicted_.value(p).toHtmlEscaped() + QLatin1Char(')');
    }
    html += QStringLiteral("<span title='%1' style='background-color:%2%3'>%4</span>").arg(title, bg, border, text);
  }
  html += QStringLiteral("</div>");
  if (!l.sliding && !evicted_.isEmpty())
    html += tr("<p style='color:#777777'>%1 positions struck through: the request's own cache had evicted them when it "
               "computed this position; the weights shown are the full cache's.</p>")
                .arg(evicted_.size());
  if (l.firstPosition > 0)
    html += tr("<p style='color:#777777'>Positions 0-%1 are outside this layer's window (struck out).</p>")
                .arg(l.firstPosition - 1);
  strip_->setHtml(html);

  // The most attended positions.
  QVector<int> idx(row_.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return row_[a] > row_[b]; });
  const int n = std::min<int>(kInsideTopRows, static_cast<int>(idx.size()));
  top_->setRowCount(n);
  for (int i = 0; i < n; ++i) {
    const int p = l.firstPosition + idx[i];
    top_->setItem(i, 0, new QTableWidgetItem(QString::number(p)));
    top_->setItem(i, 1, new QTableWidgetItem(insideTokenLabel(report_->context.value(p))));
    top_->setItem(i, 2, new QTableWidgetItem(QString::number(row_[idx[i]], 'f', 4)));
  }
}

}  // namespace gbui
