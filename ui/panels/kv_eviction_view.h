// KvEvictionView: the KV panel's Eviction tab. For one request -- the one of
// the selected token when it evicted, else the newest request that did -- the
// policy line (the engine's spelling, positions kept / evicted, the last step),
// a KvStripWidget with a strip per layer group (the global layers: kept vs
// evicted, with the latest snapshot's attention mass for h2o / snapkv; a
// window group's sliding layers: the last W positions), and the full-cache
// shadow's KL per answer token as it streams (a QCustomPlot, top-1
// disagreements marked with red crosses, queued replots that coalesce).
// Everything comes from SessionModel's KvEvictionLog (UiEviction, UiShadowKl),
// so a replayed trace shows the same.
// Threads: UI thread.
#pragma once

#include <QWidget>

#include "session/ui_events.h"

class QCustomPlot;
class QLabel;

namespace gbui {

class KvStripWidget;
class SessionModel;

class KvEvictionView : public QWidget {
  Q_OBJECT
 public:
  explicit KvEvictionView(SessionModel* model, QWidget* parent = nullptr);

  // The request shown (0: none evicted yet).
  RequestKey shownRequest() const { return shown_; }
  QString policyText() const;
  QString shadowText() const;
  KvStripWidget* strips() const { return strips_; }
  QCustomPlot* klPlot() const { return plot_; }
  // The strip hover text of a position ("position 40, answer token 8 'the':
  // evicted at step 12 by ...").
  QString positionText(int strip, int position) const;

 public slots:
  void refresh();

 private:
  RequestKey chooseRequest() const;
  void rebuildStrips();
  void plotShadow();

  SessionModel* model_;
  QLabel* policy_;
  KvStripWidget* strips_;
  QLabel* shadow_;
  QCustomPlot* plot_;
  RequestKey shown_ = 0;
  quint64 shownRevision_ = 0;  // SessionModel::evictionRevision() the strips were built for
  size_t shownTokens_ = 0;     // the shown request's tokens then
  RequestKey plotted_ = 0;     // the request whose points the plot holds
  size_t numPlotted_ = 0;      // of its shadow points
};

}  // namespace gbui
