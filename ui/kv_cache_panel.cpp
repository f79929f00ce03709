#include "kv_cache_panel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "kv_grid_widget.h"
#include "session_model.h"

namespace gbui {

KvCachePanel::KvCachePanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* left = new QVBoxLayout;
  auto* legend = new QLabel(tr("<small>colour = owning request, height = slots used, \u25cf shared (refcount &gt; 1), "
                               "<span style='color:#3c6ec8'>outline</span> = cached without owner</small>"));
  legend->setWordWrap(true);
  left->addWidget(legend);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  grid_ = new KvGridWidget(model);
  scroll->setWidget(grid_);
  left->addWidget(scroll, 1);
  stats_ = new QLabel;
  stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  left->addWidget(stats_);
  layout->addLayout(left, 1);
  plot_ = new QCustomPlot;
  plot_->setMinimumWidth(260);
  const QList<QPair<QString, QColor>> series = {{tr("used"), QColor(220, 110, 50)},
                                                {tr("cached"), QColor(60, 110, 200)},
                                                {tr("free"), QColor(150, 150, 150)}};
  for (const auto& [name, color] : series) {
    QCPGraph* g = plot_->addGraph();
    g->setName(name);
    g->setPen(QPen(color, 1.5));
  }
  plot_->xAxis->setLabel(tr("step"));
  plot_->yAxis->setLabel(tr("blocks"));
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  layout->addWidget(plot_, 1);
  connect(model_, &SessionModel::batchApplied, this, &KvCachePanel::refresh);
  connect(model_, &SessionModel::cleared, this, [this] {
    plottedSteps_ = 0;
    for (int i = 0; i < plot_->graphCount(); ++i) plot_->graph(i)->data()->clear();
    refresh();
  });
  refresh();
}

QString KvCachePanel::statsText() const {
  const UiModelInfo& info = model_->modelInfo();
  const KvCounts k = model_->kvCounts();
  const int poolTokens = k.total * model_->blockSize();
  long long hit = 0, prompt = 0, preemptions = 0;
  for (const auto& [key, r] : model_->requests()) {
    if (!r.finished) continue;
    hit += r.finish.numCachedTokens;
    prompt += r.finish.numPromptTokens;
  }
  for (const UiStep& s : model_->steps()) preemptions += s.preemptions;
  const double measured = poolTokens > 0 && info.kvPoolBytes > 0 ? double(info.kvPoolBytes) / poolTokens : 0.0;
  return tr("blocks: %1 used, %2 cached, %3 free of %4 (%5 tokens each)\n"
            "capacity %6 tokens; prefix hit rate %7% (%8 of %9 prompt tokens); preemptions %10\n"
            "KV bytes/token: formula %11 (2\u00d7%12 layers\u00d7%13 kv heads\u00d7%14 head dim\u00d74 B), measured %15")
      .arg(k.owned)
      .arg(k.cached)
      .arg(k.free)
      .arg(k.total)
      .arg(model_->blockSize())
      .arg(poolTokens)
      .arg(prompt > 0 ? 100.0 * double(hit) / double(prompt) : 0.0, 0, 'f', 1)
      .arg(hit)
      .arg(prompt)
      .arg(preemptions)
      .arg(info.kvBytesPerTokenFormula)
      .arg(info.numLayers)
      .arg(info.numKvHeads)
      .arg(info.headDim)
      .arg(measured > 0 ? QString::number(measured, 'f', 0) : tr("n/a"));
}

void KvCachePanel::rebuildPlot() {
  const std::vector<UiStep>& steps = model_->steps();
  for (; plottedSteps_ < steps.size(); ++plottedSteps_) {
    const UiStep& s = steps[plottedSteps_];
    plot_->graph(0)->addData(double(s.step), s.owned);
    plot_->graph(1)->addData(double(s.step), s.cached);
    plot_->graph(2)->addData(double(s.step), s.free);
  }
  if (!steps.empty()) {
    plot_->xAxis->setRange(double(steps.front().step), std::max(double(steps.back().step), 1.0));
    plot_->yAxis->setRange(0, std::max(1, steps.back().total) * 1.05);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void KvCachePanel::refresh() {
  grid_->updateGeometry();
  grid_->update();
  stats_->setText(statsText());
  rebuildPlot();
}

}  // namespace gbui
