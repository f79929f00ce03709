// SpeculativePanel: what speculative decoding did in this session, built only
// from UiSpeculative / UiToken / UiFinished events (so a replayed trace shows the
// same). A bar chart of acceptance rate by draft position (accepted / drafted at
// each slot, over every verification), a bar chart of decode time per token for
// plain vs speculative requests, and a summary: drafted / accepted counts, mean
// accepted length, time drafting vs verifying, target forwards per token and the
// measured speed-up.
//
// What is measured: a request is "speculative" when at least one verification
// of it appears in the stream, else "plain". Decode rate of a finished request
// = (generated - 1) / (TPOT x (generated - 1)), i.e. tokens after the first per
// second; the speed-up is the pooled decode rate of speculative requests over
// that of plain requests in this session (shown only when both exist). "Tokens
// per target forward" counts the distinct engine steps in which a speculative
// request received tokens (each is one target forward), the speed-up an
// infinitely cheap drafter would give.
// Threads: UI thread.
#pragma once

#include <QWidget>
#include <map>
#include <set>

#include "session/ui_events.h"

class QCustomPlot;
class QLabel;

namespace gbui {

class SessionModel;

class SpeculativePanel : public QWidget {
  Q_OBJECT
 public:
  struct Summary {
    qint64 numVerifications = 0, drafted = 0, accepted = 0;
    double meanAcceptedLength = 0.0;  // tokens emitted per verification (accepted + 1)
    double draftMs = 0.0, verifyMs = 0.0;
    qint64 numSpecTokens = 0, numSpecForwards = 0;  // speculative requests: tokens, steps that gave tokens
    double tokensPerForward = 0.0;
    int numSpecFinished = 0, numPlainFinished = 0;
    double specTokensPerSec = 0.0, plainTokensPerSec = 0.0;  // decode rate, finished requests
    double speedup = 0.0;                                     // spec / plain; 0 when not both measured
  };

  explicit SpeculativePanel(SessionModel* model, QWidget* parent = nullptr);

  QCustomPlot* acceptanceChart() const { return acceptance_; }
  // The acceptance chart's bar heights, position 0 first (read back from the chart).
  QVector<double> acceptanceBars() const;
  const std::vector<qint64>& draftedByPosition() const { return draftedByPos_; }
  const std::vector<qint64>& acceptedByPosition() const { return acceptedByPos_; }
  Summary summary() const;
  QString summaryText() const;

 public slots:
  void onBatch(const gbui::UiEventBatch& batch);
  void reset();

 private:
  struct PerRequest {
    qint64 numTokens = 0, numForwards = 0, lastStep = -1;
    bool finished = false;
    int numGenerated = 0;
    double tpotMs = 0.0;
  };
  void refresh();

  SessionModel* model_;
  QCustomPlot* acceptance_;
  QCustomPlot* timing_;
  QLabel* summary_;
  std::vector<qint64> draftedByPos_, acceptedByPos_;  // (max K) over every verification
  qint64 numVerifications_ = 0, emitted_ = 0;
  double draftMs_ = 0.0, verifyMs_ = 0.0;
  std::map<RequestKey, PerRequest> requests_;
  std::set<RequestKey> speculative_;  // requests with at least one verification
};

}  // namespace gbui
