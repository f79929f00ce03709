#include "kv_eviction_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "session/session_model.h"
#include "widgets/kv_strip_widget.h"

namespace gbui {

KvEvictionView::KvEvictionView(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  policy_ = new QLabel;
  policy_->setObjectName(QStringLiteral("kvEvictionPolicy"));
  policy_->setWordWrap(true);
  policy_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(policy_);
  strips_ = new KvStripWidget;
  strips_->setObjectName(QStringLiteral("kvStrips"));
  strips_->setToolTipSource([this](int strip, int position) { return positionText(strip, position); });
  layout->addWidget(strips_);
  auto* legend = new QLabel(
      tr("<small><span style='background:#aac4ee'>&nbsp;kept&nbsp;</span> (dark bar: attention mass) "
         "<span style='background:#dadada'>&nbsp;<s>evicted</s>&nbsp;</span> "
         "<span style='background:#f5d79e'>&nbsp;outside the window&nbsp;</span> | end of the prompt</small>"));
  legend->setWordWrap(true);
  // The legend and the shadow's numbers beside its chart: the dock is wide and short.
  auto* shadowRow = new QHBoxLayout;
  auto* side = new QVBoxLayout;
  side->addWidget(legend);
  shadow_ = new QLabel;
  shadow_->setObjectName(QStringLiteral("kvShadowSummary"));
  shadow_->setWordWrap(true);
  shadow_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  side->addWidget(shadow_);
  side->addStretch(1);
  auto* sideBox = new QWidget;
  sideBox->setLayout(side);
  side->setContentsMargins(0, 0, 0, 0);
  sideBox->setMaximumWidth(330);
  shadowRow->addWidget(sideBox);
  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("kvShadowPlot"));
  plot_->setMinimumHeight(90);
  QCPGraph* kl = plot_->addGraph();
  kl->setName(tr("KL(full || pruned)"));
  kl->setPen(QPen(QColor(60, 110, 200), 1.0));  // 1 px: the cheap line drawer (kv_cache_panel.cpp)
  kl->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
  QCPGraph* disagree = plot_->addGraph();
  disagree->setName(tr("top-1 differs"));
  disagree->setLineStyle(QCPGraph::lsNone);
  disagree->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, QColor(210, 30, 30), 8));
  disagree->setPen(QPen(QColor(210, 30, 30), 1.5));
  plot_->xAxis->setLabel(tr("answer token"));
  plot_->yAxis->setLabel(tr("KL, nats"));
  // No legend over the points: the summary beside the chart names the series.
  shadowRow->addWidget(plot_, 1);
  layout->addLayout(shadowRow, 1);
  connect(model_, &SessionModel::batchApplied, this, &KvEvictionView::refresh);
  connect(model_, &SessionModel::tokenSelected, this, &KvEvictionView::refresh);
  connect(model_, &SessionModel::cleared, this, [this] {
    shown_ = 0;
    plotted_ = 0;
    numPlotted_ = 0;
    for (int g = 0; g < plot_->graphCount(); ++g) plot_->graph(g)->data()->clear();
    refresh();
  });
  refresh();
}

RequestKey KvEvictionView::chooseRequest() const {
  if (const auto selected = model_->selectedToken(); selected && model_->evictionLog(selected->first))
    return selected->first;
  // The newest evicting request (the engine's ids grow), the engine's own ones aside.
  const auto& logs = model_->evictionLogs();
  for (auto it = logs.rbegin(); it != logs.rend(); ++it) {
    const RequestInfo* r = model_->request(it->first);
    if (!r || !r->internal) return it->first;
  }
  return 0;
}

void KvEvictionView::refresh() {
  const RequestKey want = chooseRequest();
  const RequestInfo* r = model_->request(want);
  const size_t numTokens = r ? r->tokens.size() : 0;
  if (want == shown_ && model_->evictionRevision() == shownRevision_ && numTokens == shownTokens_ && want != 0) return;
  shown_ = want;
  shownRevision_ = model_->evictionRevision();
  shownTokens_ = numTokens;
  rebuildStrips();
  policy_->setText(policyText());
  shadow_->setText(shadowText());
  // The chart only where there is a shadow to plot (the line says how to get one).
  const KvEvictionLog* log = model_->evictionLog(shown_);
  plot_->setVisible(log && !log->shadow().empty());
  plotShadow();
}

namespace {
// The positions whose K/V a request has computed: the prompt and every answer
// token but the newest (sampled, not yet run), or more where an event named one.
int computedPositions(const RequestInfo& r, const KvEvictionLog& log) {
  const int numTokens = static_cast<int>(r.tokens.size());
  return std::max(static_cast<int>(r.promptIds.size()) + std::max(0, numTokens - 1), log.lastKnownPosition() + 1);
}
}  // namespace

void KvEvictionView::rebuildStrips() {
  const RequestInfo* r = model_->request(shown_);
  const KvEvictionLog* log = model_->evictionLog(shown_);
  if (!r || !log) {
    strips_->setStrips({}, 0);
    return;
  }
  const UiModelInfo& info = model_->modelInfo();
  const int n = computedPositions(*r, *log);
  KvStripWidget::Strip global;
  global.label = info.kvWindowBlocks > 0 ? tr("global (%1 layers)").arg(info.kvMainLayers)
                                         : tr("all %1 layers").arg(info.numLayers);
  global.cells.resize(n);
  const bool withMass = !log->snapshotMass().isEmpty();
  if (withMass) global.mass = QVector<float>(n, std::nanf(""));
  for (int p = 0; p < n; ++p) {
    const bool evicted = log->isEvicted(p);
    global.cells[p] = evicted ? KvStripWidget::Cell::Evicted : KvStripWidget::Cell::Kept;
    if (withMass && !evicted) global.mass[p] = log->keptMass(p);
  }
  QVector<KvStripWidget::Strip> strips{global};
  if (info.kvWindowBlocks > 0 && info.kvWindow > 0) {
    // The window group never evicts: its sliding layers keep the last W positions.
    KvStripWidget::Strip window;
    window.label = tr("sliding (%1 layers), W %2").arg(info.kvWindowLayers).arg(info.kvWindow);
    window.cells.resize(n);
    for (int p = 0; p < n; ++p)
      window.cells[p] = p >= n - info.kvWindow ? KvStripWidget::Cell::Kept : KvStripWidget::Cell::OutsideWindow;
    strips.push_back(window);
  }
  strips_->setStrips(std::move(strips), static_cast<int>(r->promptIds.size()));
}

QString KvEvictionView::policyText() const {
  const RequestInfo* r = model_->request(shown_);
  const KvEvictionLog* log = model_->evictionLog(shown_);
  if (!r || !log)
    return tr("No request has evicted KV yet. Choose a KV eviction policy (sink, h2o, snapkv) and a budget in the "
              "Sampling panel for new requests.");
  const int numPrompt = static_cast<int>(r->promptIds.size());
  int evictedPrompt = 0;
  for (int p = 0; p < numPrompt; ++p) evictedPrompt += log->isEvicted(p);
  QString text = tr("Request %1, %2: keeps %3 of %4 positions; %5 evicted (%6 of the %7 prompt tokens), the last "
                    "at step %8.")
                     .arg(shown_)
                     .arg(log->policy().isEmpty() ? tr("(no policy named)") : log->policy())
                     .arg(log->numKept())
                     .arg(computedPositions(*r, *log))
                     .arg(log->numEvicted())
                     .arg(evictedPrompt)
                     .arg(numPrompt)
                     .arg(log->lastStep());
  // (A window group's sliding layers never evict: their strip says so.)
  if (log->snapshotStep() >= 0 && !log->snapshotMass().isEmpty())
    text += tr(" Mass as of step %1.").arg(log->snapshotStep());
  return text;
}

QString KvEvictionView::shadowText() const {
  const KvEvictionLog* log = model_->evictionLog(shown_);
  if (!log || log->shadow().empty())
    return tr("No full-cache shadow for this request: tick \"shadow\" under KV eviction (Sampling panel) to see "
              "what eviction costs per token.");
  const auto& points = log->shadow();
  float maxKl = 0.0f;
  for (const KvShadowPoint& p : points) maxKl = std::max(maxKl, p.kl);
  return tr("Shadow (full cache): KL(full || pruned) per answer token, mean %2, max %3 nats over %1 tokens; "
            "top-1 differs at %4 token(s) (\u00d7).")
      .arg(points.size())
      .arg(log->shadowKlSum() / static_cast<double>(points.size()), 0, 'g', 3)
      .arg(static_cast<double>(maxKl), 0, 'g', 3)
      .arg(log->numShadowDisagreements());
}

QString KvEvictionView::positionText(int strip, int position) const {
  const RequestInfo* r = model_->request(shown_);
  const KvEvictionLog* log = model_->evictionLog(shown_);
  if (!r || !log) return {};
  const int numPrompt = static_cast<int>(r->promptIds.size());
  QString what;
  if (position < numPrompt) {
    what = tr("prompt token %1 '%2'").arg(position).arg(model_->tokenText(r->promptIds[position]));
  } else if (const int index = position - numPrompt; index < static_cast<int>(r->tokens.size())) {
    what = tr("answer token %1 '%2'").arg(index).arg(r->tokens.text(static_cast<size_t>(index)).toString());
  }
  QString head = tr("position %1").arg(position);
  if (!what.isEmpty()) head += QStringLiteral(", ") + what;
  if (strip == 1) {
    const int n = computedPositions(*r, *log);
    const int window = model_->modelInfo().kvWindow;
    return head + (position >= n - window ? tr(": kept by the sliding layers (in the last %1)").arg(window)
                                          : tr(": outside the sliding layers' window of %1").arg(window));
  }
  if (const QString evicted = log->describe(position); !evicted.isEmpty()) return head + QStringLiteral(": ") + evicted;
  const float mass = log->keptMass(position);
  return head + (std::isnan(mass) ? tr(": kept") : tr(": kept, attention mass %1").arg(static_cast<double>(mass), 0, 'f', 4));
}

void KvEvictionView::plotShadow() {
  if (plotted_ != shown_) {
    for (int g = 0; g < plot_->graphCount(); ++g) plot_->graph(g)->data()->clear();
    plotted_ = shown_;
    numPlotted_ = 0;
  }
  const KvEvictionLog* log = model_->evictionLog(shown_);
  const std::vector<KvShadowPoint> none;
  const std::vector<KvShadowPoint>& points = log ? log->shadow() : none;
  for (; numPlotted_ < points.size(); ++numPlotted_) {
    const KvShadowPoint& p = points[numPlotted_];
    plot_->graph(0)->addData(p.index, static_cast<double>(p.kl));
    if (!p.top1Agree) plot_->graph(1)->addData(p.index, static_cast<double>(p.kl));
  }
  if (!points.empty()) {
    float maxKl = 0.0f;
    int maxIndex = 0;
    for (const KvShadowPoint& p : points) {
      maxKl = std::max(maxKl, p.kl);
      maxIndex = std::max(maxIndex, p.index);
    }
    plot_->xAxis->setRange(0, std::max(1, maxIndex) + 0.5);
    plot_->yAxis->setRange(0, std::max(1e-3, static_cast<double>(maxKl) * 1.15));
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace gbui
