// PerformancePanel: live charts from trace events — per-token latency (TTFT for
// a request's first token, then TPOT) over the token index, TTFT per request,
// rolling tokens/s, and the step time split (schedule / forward / sample) with
// the queue length; for requests with a format, the probability mass the grammar
// removed per token (where the model wanted to leave the format: shown once a
// token with grammar info arrives). A scrolling window, pause, PNG and CSV export.
// Points are appended as batches arrive and plots use queued replots, so many
// batches per frame cost one repaint.
// Threads: UI thread.
#pragma once

#include <QWidget>
#include <deque>
#include <map>

#include "session/ui_events.h"

class QCheckBox;
class QCustomPlot;
class QLabel;
class QSpinBox;

namespace gbui {

class SessionModel;

class PerformancePanel : public QWidget {
  Q_OBJECT
 public:
  explicit PerformancePanel(SessionModel* model, QWidget* parent = nullptr);
  // Each chart keeps its newest kMaxPoints points (tokens, steps, rate samples),
  // the largest window it can show; the CSV export holds the same, the trace
  // file every one. A long chat's charts stay the same size (5 step series
  // and a latency point were 96 bytes per token of a single chat).
  static constexpr int kMaxPoints = 20000;
  int numLatencyPoints() const;
  int numStepPoints() const;
  QCustomPlot* latencyPlot() const { return latency_; }
  // 1 - massAllowed per token of a request with a format, over the token index
  // of the latency chart; hidden while no token had grammar info.
  QCustomPlot* massRemovedPlot() const { return massRemoved_; }
  int numMassRemovedPoints() const;
  QString csv() const;

 public slots:
  void onBatch(const gbui::UiEventBatch& batch);
  void reset();
  bool exportPng(const QString& path);
  bool exportCsv(const QString& path);

 private:
  void rescale();
  SessionModel* model_;
  QCustomPlot* latency_;
  QCustomPlot* ttft_;
  QCustomPlot* throughput_;
  QCustomPlot* steps_;
  QCustomPlot* massRemoved_;
  QCheckBox* pause_;
  QSpinBox* window_;
  QLabel* summary_;
  std::map<RequestKey, double> lastTokenMs_;
  std::deque<double> tokenTimesMs_;  // the last second's token times, for the rolling rate
  double firstTokenMs_ = -1.0;       // the session's first token (-1: none yet)
  double lastRateMs_ = -1e300;       // when the rate chart last got a point
  int numTokens_ = 0;
  int numRequests_ = 0;
  int numRemoteSamples_ = 0;  // remote engine: /metrics samples charted
};

}  // namespace gbui
