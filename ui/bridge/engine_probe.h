// EngineProbe: the engine's own view for tests, checked against what the
// workbench's models show (KV blocks, kept requests). Test-only: the
// window never uses it. Empty answers when no local model is loaded.
// Threads: the controller's thread (tests drive it there or while it is idle).
#pragma once

#include <QString>
#include <QVector>

namespace gbui {

class EngineController;

class EngineProbe {
 public:
  explicit EngineProbe(const EngineController& controller) : controller_(controller) {}
  // "owned free cached total" of the main KV pool.
  QString kvSnapshotSummary() const;
  // "<blocks marked released by the sliding window now> <WindowReleased events so far>".
  QString kvWindowSummary() const;
  // Ref counts per block of the main pool (index = block id).
  QVector<int> kvRefCounts() const;
  // Finished requests that keep KV blocks, longest unused first.
  QVector<quint64> keptRequests() const;

 private:
  const EngineController& controller_;
};

}  // namespace gbui
