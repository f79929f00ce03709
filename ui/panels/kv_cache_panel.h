// KvCachePanel: the live block grid beside used/cached/free blocks over steps,
// and the numbers that size a deployment: bytes per token (formula
// 2 x layers x kv_heads x head_dim x 4 next to the measured pool bytes / pool
// slots), capacity in tokens, prefix hit rate (cached prompt tokens / prompt
// tokens over the finished requests), preemptions, and the finished answers
// that keep blocks for branching, with a button to release them
// (releaseRequested). Beside the grid, two tabs: the pool over steps, and
// Eviction (KvEvictionView: what an evicting request's cache keeps, per layer
// group, and its full-cache shadow's KL per token), brought to the front once
// for each request that starts evicting. Everything comes from SessionModel,
// i.e. from trace events.
// Threads: UI thread.
#pragma once

#include <QWidget>

class QCustomPlot;
class QLabel;
class QPushButton;
class QScrollArea;
class QTabWidget;

namespace gbui {

class KvEvictionView;
class KvGridWidget;
class SessionModel;

class KvCachePanel : public QWidget {
  Q_OBJECT
 public:
  explicit KvCachePanel(SessionModel* model, QWidget* parent = nullptr);
  KvGridWidget* grid() const { return grid_; }
  QCustomPlot* plot() const { return plot_; }
  KvEvictionView* eviction() const { return eviction_; }
  QTabWidget* tabs() const { return tabs_; }
  bool evictionTabShown() const;
  QString statsText() const;
  // A remote engine: its polled /metrics instead of the block map (which the API does not show).
  QString remoteStatsText() const;
  QPushButton* releaseButton() const { return release_; }
  // Finished requests whose blocks are still held (kept for branching).
  int numKeptRequests() const;

 signals:
  void releaseRequested();

 public slots:
  void refresh();

 private:
  void rebuildPlot();
  void plotRemote();
  SessionModel* model_;
  KvGridWidget* grid_;
  QCustomPlot* plot_;
  QLabel* stats_;
  QPushButton* release_;
  QTabWidget* tabs_;
  KvEvictionView* eviction_;
  QScrollArea* evictionTab_;  // holds eviction_
  quint64 evictionShownFor_ = 0;  // the last request whose eviction brought its tab to the front
  qint64 plottedSteps_ = 0;    // of stepHistory().total()
  qint64 plottedMetrics_ = 0;  // of remoteMetricsHistory().total()
};

}  // namespace gbui
