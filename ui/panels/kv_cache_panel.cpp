#include "kv_cache_panel.h"

#include <cmath>

#include <QHBoxLayout>
#include <algorithm>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QTabWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "kv_eviction_view.h"
#include "widgets/kv_grid_widget.h"
#include "session/session_model.h"

namespace gbui {

namespace {
// The y axis reaches this far above the pool size, so the legend in the top
// right corner sits above the "free" line (which starts at the pool size).
constexpr double kLegendHeadroom = 1.3;
// The chart shows the last this many steps and drops older points (a fixed
// window, as in the QCustomPlot real-time demo): drawing costs the same at
// step 100 and step 100,000 (U5).
constexpr double kStepWindow = 2000.0;
}  // namespace

KvCachePanel::KvCachePanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* left = new QVBoxLayout;
  auto* legend = new QLabel(tr("<small>colour = owning request, height = slots used, \u25cf shared (refcount &gt; 1), "
                               "<span style='color:#3c6ec8'>outline</span> = cached without owner, "
                               "<span style='background:#f5d79e'>&nbsp;amber, struck&nbsp;</span> = released by the "
                               "sliding window</small>"));
  legend->setWordWrap(true);
  left->addWidget(legend);
  auto* scroll = new QScrollArea;
  scroll->setObjectName(QStringLiteral("kvScroll"));
  scroll->setWidgetResizable(true);
  grid_ = new KvGridWidget(model);
  grid_->setObjectName(QStringLiteral("kvGrid"));
  scroll->setWidget(grid_);
  left->addWidget(scroll, 1);
  stats_ = new QLabel;
  stats_->setObjectName(QStringLiteral("kvStats"));
  stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  stats_->setWordWrap(true);
  left->addWidget(stats_);
  release_ = new QPushButton(tr("Release old branches"));
  release_->setObjectName(QStringLiteral("releaseBranches"));
  release_->setToolTip(tr("Free the KV blocks that finished answers keep for branching (the branches on screen "
                          "stay). Full blocks stay in the prefix cache; branching from a released answer "
                          "recomputes what is missing."));
  auto* releaseRow = new QHBoxLayout;
  releaseRow->addWidget(release_);
  releaseRow->addStretch();
  left->addLayout(releaseRow);
  connect(release_, &QPushButton::clicked, this, &KvCachePanel::releaseRequested);
  layout->addLayout(left, 1);
  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("kvPlot"));
  plot_->setMinimumWidth(260);
  const QList<QPair<QString, QColor>> series = {{tr("used"), QColor(220, 110, 50)},
                                                {tr("cached"), QColor(60, 110, 200)},
                                                {tr("free"), QColor(150, 150, 150)}};
  for (const auto& [name, color] : series) {
    QCPGraph* g = plot_->addGraph();
    g->setName(name);
    // 1 px: a wider pen goes through Qt's stroker, which cost ~40 ms per
    // redraw of 2,000 steps (the whole frame budget); the 1 px line drawer is cheap.
    g->setPen(QPen(color, 1.0));
  }
  plot_->xAxis->setLabel(tr("step"));
  plot_->yAxis->setLabel(tr("blocks"));
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  tabs_ = new QTabWidget;
  tabs_->setObjectName(QStringLiteral("kvTabs"));
  tabs_->setDocumentMode(true);
  tabs_->addTab(plot_, tr("Pool over steps"));
  eviction_ = new KvEvictionView(model);
  eviction_->setObjectName(QStringLiteral("kvEviction"));
  // Scrolled when the dock is short: the window still fits a 1280x720 screen.
  evictionTab_ = new QScrollArea;
  evictionTab_->setObjectName(QStringLiteral("kvEvictionScroll"));
  evictionTab_->setWidgetResizable(true);
  evictionTab_->setFrameShape(QFrame::NoFrame);
  evictionTab_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  evictionTab_->setWidget(eviction_);
  tabs_->addTab(evictionTab_, tr("Eviction"));
  layout->addWidget(tabs_, 1);
  connect(model_, &SessionModel::batchApplied, this, &KvCachePanel::refresh);
  connect(model_, &SessionModel::cleared, this, [this] {
    plottedSteps_ = 0;
    plottedMetrics_ = 0;
    if (plot_->graphCount() > 3) plot_->removeGraph(3);  // a remote engine's prefix hit rate
    plot_->yAxis2->setVisible(false);
    for (int i = 0; i < plot_->graphCount(); ++i) plot_->graph(i)->data()->clear();
    refresh();
  });
  refresh();
}

bool KvCachePanel::evictionTabShown() const { return tabs_->currentWidget() == evictionTab_; }

int KvCachePanel::numKeptRequests() const {
  int n = 0;
  for (const auto& [key, r] : model_->requests()) n += r.finished && !r.blockTable.isEmpty();
  return n;
}

QString KvCachePanel::remoteStatsText() const {
  const auto& samples = model_->remoteMetrics();
  if (samples.empty())
    return tr("Remote engine: the block map is not available over the API, and the server has no /metrics the "
              "workbench can read (Glassbox, llama-server with --metrics, vLLM), so KV usage is not available.");
  const UiRemoteMetrics& m = samples.back();
  const auto known = [](double v) { return !std::isnan(v); };
  QString kv = known(m.kvUsage) ? tr("KV cache usage %1%").arg(100.0 * m.kvUsage, 0, 'f', 1) : tr("KV usage not exported");
  if (known(m.kvBlocksTotal))
    kv += tr(" (%1 used, %2 cached of %3 blocks)").arg(m.kvBlocksUsed).arg(m.kvBlocksCached).arg(m.kvBlocksTotal);
  const bool counted = known(m.prefixQueries) && known(m.prefixHits);
  const QString hits = !counted                ? tr("prefix hits not exported")
                       : m.prefixQueries <= 0 ? tr("prefix cache hit rate: no prompt looked up yet")
                                              : tr("prefix cache hit rate %1% (%2 of %3 prompt tokens)")
                                                    .arg(100.0 * m.prefixHits / m.prefixQueries, 0, 'f', 1)
                                                    .arg(m.prefixHits)
                                                    .arg(m.prefixQueries);
  return tr("Remote engine (%1 /metrics, %2 samples): %3; running %4, waiting %5; %6; preemptions %7.\n"
            "The block map is not available over the API.")
      .arg(m.flavour)
      .arg(model_->remoteMetricsHistory().total())
      .arg(kv)
      .arg(known(m.numRunning) ? QString::number(m.numRunning) : tr("n/a"))
      .arg(known(m.numWaiting) ? QString::number(m.numWaiting) : tr("n/a"))
      .arg(hits)
      .arg(known(m.preemptions) ? QString::number(m.preemptions) : tr("n/a"));
}

// Glassbox servers export blocks (used, cached, free); the others only a usage
// fraction, charted in percent (used and free). Where the server counts
// prefix-cache queries and hits (Glassbox, vLLM), the hit rate since its start
// is a fourth line on the right axis.
void KvCachePanel::plotRemote() {
  const RecentHistory<UiRemoteMetrics>& history = model_->remoteMetricsHistory();
  const auto& samples = history.items;
  plottedMetrics_ = std::max(plottedMetrics_, history.dropped);
  for (; plottedMetrics_ < history.total(); ++plottedMetrics_) {
    const UiRemoteMetrics& m = samples[static_cast<size_t>(plottedMetrics_ - history.dropped)];
    const double x = double(plottedMetrics_);
    if (!std::isnan(m.prefixQueries) && !std::isnan(m.prefixHits) && m.prefixQueries > 0) {
      if (plot_->graphCount() == 3) {
        QCPGraph* g = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
        g->setName(tr("prefix hit rate % (right)"));
        g->setPen(QPen(QColor(60, 160, 90), 1.5, Qt::DashLine));
        plot_->yAxis2->setVisible(true);
        plot_->yAxis2->setRange(0, 100);
        plot_->yAxis2->setLabel(tr("prefix hit rate %"));
      }
      plot_->graph(3)->addData(x, 100.0 * m.prefixHits / m.prefixQueries);
    }
    if (!std::isnan(m.kvBlocksTotal)) {
      plot_->graph(0)->addData(x, m.kvBlocksUsed);
      plot_->graph(1)->addData(x, m.kvBlocksCached);
      plot_->graph(2)->addData(x, m.kvBlocksTotal - m.kvBlocksUsed - m.kvBlocksCached);
    } else if (!std::isnan(m.kvUsage)) {
      plot_->graph(0)->addData(x, 100.0 * m.kvUsage);
      plot_->graph(2)->addData(x, 100.0 - 100.0 * m.kvUsage);
    }
  }
  const bool blocks = !samples.empty() && !std::isnan(samples.back().kvBlocksTotal);
  plot_->xAxis->setLabel(tr("/metrics sample"));
  plot_->yAxis->setLabel(blocks ? tr("blocks (server)") : tr("% of the server's KV cache"));
  if (!samples.empty()) {
    const double last = double(history.total() - 1), first = std::max(0.0, last - kStepWindow);
    for (int g = 0; g < plot_->graphCount(); ++g) plot_->graph(g)->data()->removeBefore(first);
    plot_->xAxis->setRange(first, std::max(first + 1.0, last));
    plot_->yAxis->setRange(0, (blocks ? std::max(1.0, samples.back().kvBlocksTotal) : 100.0) * kLegendHeadroom);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString KvCachePanel::statsText() const {
  if (model_->isRemote()) return remoteStatsText();
  const UiModelInfo& info = model_->modelInfo();
  const KvCounts k = model_->kvCounts();
  const int poolTokens = k.total * model_->blockSize();
  // Hit rate: prompt tokens whose K/V was reused (prefix cache, or a branch's
  // shared blocks) over prompt tokens, both summed over finished requests.
  long long hit = 0, prompt = 0, preemptions = 0;
  int numFinished = 0, numKept = 0;
  QSet<int> keptBlocks;
  for (const auto& [key, r] : model_->requests()) {
    if (!r.finished || isRestoredKey(key)) continue;  // restored from a file: not this engine's
    ++numFinished;
    hit += std::min(r.finish.numCachedTokens, r.finish.numPromptTokens);
    prompt += r.finish.numPromptTokens;
    if (r.blockTable.isEmpty()) continue;
    ++numKept;
    for (int b : r.blockTable)
      if (b >= 0) keptBlocks.insert(b);
  }
  preemptions = model_->totalPreemptions();
  // Only a model whose every layer slides gives blocks back mid-request.
  const QString window = model_->kvWindowReleasedTotal() == 0
                             ? QString()
                             : tr("\nreleased by the sliding window: %1 blocks so far, %2 of them not taken again yet")
                                   .arg(model_->kvWindowReleasedTotal())
                                   .arg(k.windowReleased);
  // Memory: the pool is reserved and committed as blocks are first written, so
  // what it holds is the used and cached blocks, not its capacity.
  const quint64 blockBytes = info.kvBytesPerTokenFormula * quint64(std::max(0, model_->blockSize()));
  const QLocale locale;
  const auto size = [&](quint64 b) { return locale.formattedDataSize(static_cast<qint64>(b)); };
  const quint64 measured = info.kvBytesPerTokenMeasured();
  QString bytes;
  if (measured == 0) bytes = tr("measured n/a");
  else if (measured == info.kvBytesPerTokenFormula) bytes = tr("= measured");
  else bytes = tr("\u2260 measured %1").arg(measured);
  QString memory = tr("KV %1 B/token = %2 layers \u00d7 (K %3 %4 B + V %5 %6 B) %7; holding %8 in %9 blocks of %10 "
                      "reserved (%11 blocks, %12 self-draft scratch)")
                       .arg(info.kvBytesPerTokenFormula)
                       .arg(info.kvMainLayers > 0 ? info.kvMainLayers : info.numLayers)
                       .arg(info.kvTypeK)
                       .arg(info.kvRowBytesK)
                       .arg(info.kvTypeV)
                       .arg(info.kvRowBytesV)
                       .arg(bytes)
                       .arg(size(blockBytes * quint64(k.owned + k.cached)))
                       .arg(k.owned + k.cached)
                       .arg(size(info.kvPoolBytes))
                       .arg(info.numBlocks)
                       .arg(info.numScratchBlocks);
  if (info.kvWindowBlocks > 0) {
    // Live from the last step: what the window group holds now.
    const std::deque<UiStep>& steps = model_->stepHistory().items;
    if (!steps.empty() && steps.back().windowTotal > 0) {
      const UiStep& last = steps.back();
      const quint64 windowBlockBytes = info.kvWindowBytesPerToken * quint64(std::max(0, model_->blockSize()));
      memory += tr("\nsliding layers hold %1 in %2 blocks (%3 used, %4 cached) of %5")
                    .arg(size(windowBlockBytes * quint64(last.windowOwned + last.windowCached)))
                    .arg(last.windowOwned + last.windowCached)
                    .arg(last.windowOwned)
                    .arg(last.windowCached)
                    .arg(last.windowTotal);
    }
    memory += tr("\nsliding layers (window %1): %2 layers \u00d7 %3 B/token, only the window, in a pool of their own: "
                 "%4 blocks (%5); every token would take %6 per context")
                  .arg(info.kvWindow)
                  .arg(info.kvWindowLayers)
                  .arg(info.kvWindowLayers > 0 ? info.kvWindowBytesPerToken / quint64(info.kvWindowLayers) : 0)
                  .arg(info.kvWindowBlocks)
                  .arg(size(info.kvWindowPoolBytes))
                  .arg(size(info.kvWindowBytesPerToken * quint64(std::max(0, info.contextLength))));
  }
  if (info.kvBudgetBytes > 0) memory += tr("; budget %1").arg(size(info.kvBudgetBytes));
  if (!info.kvPlanNote.isEmpty()) memory += QStringLiteral("\n") + info.kvPlanNote;
  return tr("blocks: %1 used, %2 cached, %3 free of %4 (%5 tokens each, %6 tokens); kept for branching: %7 "
            "finished answer(s), %8 blocks\n"
            "prefix hit rate %9% (%10 of %11 prompt tokens reused, over %12 finished requests); preemptions %13\n"
            "%14%15")
      .arg(k.owned)
      .arg(k.cached)
      .arg(k.free)
      .arg(k.total)
      .arg(model_->blockSize())
      .arg(poolTokens)
      .arg(numKept)
      .arg(keptBlocks.size())
      .arg(prompt > 0 ? 100.0 * double(hit) / double(prompt) : 0.0, 0, 'f', 1)
      .arg(hit)
      .arg(prompt)
      .arg(numFinished)
      .arg(preemptions)
      .arg(memory)
      .arg(window);
}

void KvCachePanel::rebuildPlot() {
  if (model_->isRemote()) return plotRemote();
  plot_->xAxis->setLabel(tr("step"));
  plot_->yAxis->setLabel(tr("blocks"));
  const RecentHistory<UiStep>& history = model_->stepHistory();
  const std::deque<UiStep>& steps = history.items;
  for (plottedSteps_ = std::max(plottedSteps_, history.dropped); plottedSteps_ < history.total(); ++plottedSteps_) {
    const UiStep& s = steps[static_cast<size_t>(plottedSteps_ - history.dropped)];
    plot_->graph(0)->addData(double(s.step), s.owned);
    plot_->graph(1)->addData(double(s.step), s.cached);
    plot_->graph(2)->addData(double(s.step), s.free);
  }
  if (!steps.empty()) {
    const double last = double(steps.back().step), first = std::max(double(steps.front().step), last - kStepWindow);
    for (int g = 0; g < 3; ++g) plot_->graph(g)->data()->removeBefore(first);
    plot_->xAxis->setRange(first, std::max(last, first + 1.0));
    plot_->yAxis->setRange(0, std::max(1, steps.back().total) * kLegendHeadroom);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void KvCachePanel::refresh() {
  grid_->updateGeometry();
  grid_->update();
  stats_->setText(statsText());
  release_->setEnabled(numKeptRequests() > 0 && !model_->isReplay());
  rebuildPlot();
  // A request that starts evicting shows its cache (once: the user may go back).
  eviction_->refresh();
  if (const RequestKey shown = eviction_->shownRequest(); shown != 0 && shown != evictionShownFor_) {
    evictionShownFor_ = shown;
    tabs_->setCurrentWidget(evictionTab_);
  }
}

}  // namespace gbui
