#include "performance_panel.h"

#include <QCheckBox>
#include <QFile>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "session/session_model.h"

namespace gbui {
namespace {

QCustomPlot* makePlot(const QString& title, const QString& xLabel, const QString& yLabel) {
  auto* plot = new QCustomPlot;
  plot->setMinimumSize(200, 130);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont("sans", 9, QFont::Bold)));
  plot->xAxis->setLabel(xLabel);
  plot->yAxis->setLabel(yLabel);
  plot->setNoAntialiasingOnDrag(true);
  return plot;
}

QCPGraph* addGraph(QCustomPlot* plot, const QString& name, const QColor& color, QCPAxis* y = nullptr) {
  QCPGraph* g = plot->addGraph(plot->xAxis, y ? y : plot->yAxis);
  g->setName(name);
  g->setPen(QPen(color, 1.2));
  g->setAdaptiveSampling(true);
  return g;
}

// Fits `axis` to the values its graphs show in the x range on screen: a binary
// search and a pass over the shown points, not over the whole session (U5).
constexpr double kRatePointMs = 50.0;

void fitShownValues(QCustomPlot* plot, QCPAxis* axis) {
  QCPRange y;
  bool any = false;
  for (int i = 0; i < plot->graphCount(); ++i) {
    QCPGraph* g = plot->graph(i);
    if (g->valueAxis() != axis || !g->visible()) continue;
    bool found = false;
    const QCPRange r = g->getValueRange(found, QCP::sdBoth, plot->xAxis->range());
    if (!found) continue;
    if (any) y.expand(r);
    else y = r;
    any = true;
  }
  if (any) axis->setRange(y.lower, y.upper > y.lower ? y.upper : y.lower + 1.0);
}

}  // namespace

PerformancePanel::PerformancePanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QHBoxLayout;
  pause_ = new QCheckBox(tr("Pause"));
  window_ = new QSpinBox;
  window_->setRange(10, kMaxPoints);
  window_->setValue(500);
  window_->setPrefix(tr("window "));
  auto* png = new QPushButton(tr("PNG..."));
  auto* csvButton = new QPushButton(tr("CSV..."));
  summary_ = new QLabel;
  pause_->setObjectName(QStringLiteral("perfPause"));
  window_->setObjectName(QStringLiteral("perfWindow"));
  png->setObjectName(QStringLiteral("perfSavePng"));
  csvButton->setObjectName(QStringLiteral("perfSaveCsv"));
  bar->addWidget(pause_);
  bar->addWidget(window_);
  bar->addWidget(summary_, 1);
  bar->addWidget(png);
  bar->addWidget(csvButton);
  layout->addLayout(bar);
  auto* grid = new QGridLayout;
  latency_ = makePlot(tr("Per-token latency (TTFT, then TPOT)"), tr("token"), tr("ms"));
  addGraph(latency_, tr("latency"), QColor(40, 100, 190));
  ttft_ = makePlot(tr("TTFT per request"), tr("request"), tr("ms"));
  auto* bars = new QCPBars(ttft_->xAxis, ttft_->yAxis);
  bars->setBrush(QColor(240, 140, 30));
  bars->setPen(Qt::NoPen);
  throughput_ = makePlot(tr("Tokens/s (rolling 1 s)"), tr("time (s)"), tr("tokens/s"));
  addGraph(throughput_, tr("tokens/s"), QColor(50, 150, 80));
  steps_ = makePlot(tr("Step time split and queue"), tr("step"), tr("ms"));
  steps_->yAxis2->setVisible(true);
  steps_->yAxis2->setLabel(tr("waiting"));
  addGraph(steps_, tr("schedule"), QColor(150, 90, 200));
  addGraph(steps_, tr("forward"), QColor(40, 100, 190));
  addGraph(steps_, tr("sample"), QColor(240, 140, 30));
  addGraph(steps_, tr("queue"), QColor(200, 40, 40), steps_->yAxis2);
  addGraph(steps_, tr("running"), QColor(50, 150, 80), steps_->yAxis2);
  steps_->legend->setVisible(true);
  steps_->legend->setFont(QFont(font().family(), 7));
  // Under the chart, two entries per row: in a short chart an inset legend
  // hides the data, and one row of four does not fit its width.
  steps_->plotLayout()->addElement(2, 0, steps_->legend);
  steps_->plotLayout()->setRowStretchFactor(2, 0.001);
  steps_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  steps_->legend->setWrap(2);
  steps_->legend->setRowSpacing(0);
  steps_->legend->setColumnSpacing(8);
  steps_->legend->setBorderPen(Qt::NoPen);
  steps_->legend->setMargins(QMargins(2, 0, 2, 0));
  massRemoved_ = makePlot(tr("Format: probability mass removed"), tr("token"), tr("mass removed"));
  massRemoved_->setObjectName(QStringLiteral("perfMassRemoved"));
  massRemoved_->setToolTip(tr("Per token of a request with a format: the raw probability the model gave the tokens "
                              "the format forbids (1 - allowed mass). High: the model wanted to leave the format there."));
  QCPGraph* mass = addGraph(massRemoved_, tr("mass removed"), QColor(60, 90, 200));
  mass->setLineStyle(QCPGraph::lsNone);  // one dot per token: tokens of different requests are not a curve
  mass->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
  massRemoved_->yAxis->setRange(0, 1);
  massRemoved_->setVisible(false);  // until a request with a format generates
  // One row: the panel shares the short, wide bottom dock with the KV cache.
  grid->addWidget(latency_, 0, 0);
  grid->addWidget(ttft_, 0, 1);
  grid->addWidget(throughput_, 0, 2);
  grid->addWidget(steps_, 0, 3);
  grid->addWidget(massRemoved_, 0, 4);
  layout->addLayout(grid, 1);
  connect(png, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export charts"), {}, tr("PNG (*.png)"));
    if (!path.isEmpty()) exportPng(path);
  });
  connect(csvButton, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export data"), {}, tr("CSV (*.csv)"));
    if (!path.isEmpty()) exportCsv(path);
  });
  connect(model_, &SessionModel::batchApplied, this, &PerformancePanel::onBatch);
  connect(model_, &SessionModel::cleared, this, &PerformancePanel::reset);
  connect(pause_, &QCheckBox::toggled, this, [this](bool paused) {
    if (!paused) rescale();
  });
}

int PerformancePanel::numLatencyPoints() const { return latency_->graph(0)->dataCount(); }
int PerformancePanel::numStepPoints() const { return steps_->graph(0)->dataCount(); }
int PerformancePanel::numMassRemovedPoints() const { return massRemoved_->graph(0)->dataCount(); }

void PerformancePanel::reset() {
  for (QCustomPlot* p : {latency_, throughput_, steps_, massRemoved_})
    for (int i = 0; i < p->graphCount(); ++i) p->graph(i)->data()->clear();
  massRemoved_->setVisible(false);
  static_cast<QCPBars*>(ttft_->plottable(0))->data()->clear();
  lastTokenMs_.clear();
  tokenTimesMs_.clear();
  firstTokenMs_ = -1.0;
  lastRateMs_ = -1e300;
  numTokens_ = 0;
  numRequests_ = 0;
  numRemoteSamples_ = 0;
  rescale();
}

void PerformancePanel::onBatch(const UiEventBatch& batch) {
  for (const UiEvent& e : *batch) {
    const double tMs = static_cast<double>(e.tUs) / 1000.0;
    if (const auto* t = std::get_if<UiToken>(&e.body)) {
      double latency = 0.0;
      auto last = lastTokenMs_.find(t->request);
      if (last != lastTokenMs_.end()) {
        latency = tMs - last->second;
      } else if (const RequestInfo* r = model_->request(t->request)) {
        latency = tMs - r->submittedMs;
      }
      lastTokenMs_[t->request] = tMs;
      if (t->grammar)
        massRemoved_->graph(0)->addData(numTokens_, std::clamp(1.0 - static_cast<double>(t->grammar->massAllowed), 0.0, 1.0));
      latency_->graph(0)->addData(numTokens_++, latency);
      // Tokens in the trailing second ending now; older times are dropped. The
      // chart gets a point every 50 ms at most: a point per token put 60,000
      // points in its 30-second window at 2,000 tokens/s (U5).
      if (firstTokenMs_ < 0) firstTokenMs_ = tMs;
      tokenTimesMs_.push_back(tMs);
      while (!tokenTimesMs_.empty() && tokenTimesMs_.front() < tMs - 1000.0) tokenTimesMs_.pop_front();
      if (tMs - lastRateMs_ >= kRatePointMs) {
        const double span = std::max(1.0, std::min(1000.0, tMs - firstTokenMs_));
        throughput_->graph(0)->addData(tMs / 1000.0, double(tokenTimesMs_.size()) * 1000.0 / span);
        lastRateMs_ = tMs;
      }
    } else if (const auto* f = std::get_if<UiFinished>(&e.body)) {
      if (f->numGenerated > 0)
        static_cast<QCPBars*>(ttft_->plottable(0))->addData(double(++numRequests_), f->ttftMs);
    } else if (const auto* s = std::get_if<UiStep>(&e.body)) {
      const double x = double(s->step);
      steps_->graph(0)->addData(x, s->scheduleMs);
      steps_->graph(1)->addData(x, s->forwardMs);
      steps_->graph(2)->addData(x, s->sampleMs);
      steps_->graph(3)->addData(x, s->numWaiting);
      steps_->graph(4)->addData(x, s->numRunning);
    } else if (const auto* m = std::get_if<UiRemoteMetrics>(&e.body)) {
      // A remote engine has no steps: its polled /metrics, one point per sample.
      const double x = double(numRemoteSamples_++);
      if (!std::isnan(m->numWaiting)) steps_->graph(3)->addData(x, m->numWaiting);
      if (!std::isnan(m->numRunning)) steps_->graph(4)->addData(x, m->numRunning);
    }
  }
  // The newest kMaxPoints of every series (keys increase, so the first excess
  // points are the oldest).
  if (massRemoved_->isHidden() && !massRemoved_->graph(0)->data()->isEmpty()) massRemoved_->setVisible(true);
  for (QCustomPlot* p : {latency_, throughput_, steps_, massRemoved_})
    for (int g = 0; g < p->graphCount(); ++g) {
      QCPGraph* graph = p->graph(g);
      const int excess = graph->dataCount() - kMaxPoints;
      if (excess > 0) graph->data()->removeBefore((graph->data()->constBegin() + excess)->key);
    }
  if (!pause_->isChecked()) rescale();
}

void PerformancePanel::rescale() {
  const double window = window_->value();
  // The mass chart shows the latency chart's token window (its points are a subset).
  bool massFound = false;
  const QCPRange tokens = latency_->graph(0)->getKeyRange(massFound);
  if (massFound) massRemoved_->xAxis->setRange(std::max(tokens.lower, tokens.upper - window), std::max(tokens.upper, tokens.lower + 1));
  massRemoved_->yAxis->setRange(0, 1.02);
  massRemoved_->replot(QCustomPlot::rpQueuedReplot);
  for (QCustomPlot* p : {latency_, steps_}) {
    bool found = false;
    // A remote engine charts only queue and running (per /metrics sample).
    const int keyGraph = p == steps_ && p->graph(0)->data()->isEmpty() ? 3 : 0;
    const QCPRange keys = p->graph(keyGraph)->getKeyRange(found);
    if (found) p->xAxis->setRange(std::max(keys.lower, keys.upper - window), std::max(keys.upper, keys.lower + 1));
    fitShownValues(p, p->yAxis);
    if (p == steps_) {
      bool waiting = false, running = false;
      p->yAxis2->setRange(0, std::max({1.0, p->graph(3)->getValueRange(waiting, QCP::sdBoth, p->xAxis->range()).upper + 1,
                                       p->graph(4)->getValueRange(running, QCP::sdBoth, p->xAxis->range()).upper + 1}));
    }
  }
  bool found = false;
  const QCPRange secs = throughput_->graph(0)->getKeyRange(found);
  if (found) throughput_->xAxis->setRange(std::max(secs.lower, secs.upper - 30.0), std::max(secs.upper, secs.lower + 1));
  fitShownValues(throughput_, throughput_->yAxis);
  ttft_->rescaleAxes();
  ttft_->xAxis->setRange(0, numRequests_ + 1);
  for (QCustomPlot* p : {latency_, ttft_, throughput_, steps_}) {
    p->yAxis->setRangeLower(0);
    p->replot(QCustomPlot::rpQueuedReplot);
  }
  summary_->setText(tr("%1 tokens, %2 requests").arg(numTokens_).arg(numRequests_));
}

QString PerformancePanel::csv() const {
  QString out = QStringLiteral("token,latency_ms\n");
  for (auto it = latency_->graph(0)->data()->constBegin(); it != latency_->graph(0)->data()->constEnd(); ++it)
    out += QStringLiteral("%1,%2\n").arg(it->key).arg(it->value, 0, 'f', 4);
  out += QStringLiteral("\nstep,schedule_ms,forward_ms,sample_ms,waiting\n");
  for (const UiStep& s : model_->steps())  // the last SessionModel::kStepHistory steps (the trace has them all)
    out += QStringLiteral("%1,%2,%3,%4,%5\n").arg(s.step).arg(s.scheduleMs).arg(s.forwardMs).arg(s.sampleMs).arg(s.numWaiting);
  if (!massRemoved_->graph(0)->data()->isEmpty()) {
    out += QStringLiteral("\ntoken,grammar_mass_removed\n");
    for (auto it = massRemoved_->graph(0)->data()->constBegin(); it != massRemoved_->graph(0)->data()->constEnd(); ++it)
      out += QStringLiteral("%1,%2\n").arg(it->key).arg(it->value, 0, 'f', 6);
  }
  return out;
}

bool PerformancePanel::exportPng(const QString& path) { return grab().save(path, "PNG"); }

bool PerformancePanel::exportCsv(const QString& path) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return false;
  file.write(csv().toUtf8());
  return file.commit();
}

}  // namespace gbui
