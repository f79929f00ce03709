// KvEvictionLog: what KV eviction did to one request, rebuilt from its
// UiEviction events (and UiShadowKl events when it ran with a full-cache
// shadow), so a live run and a replayed trace show the same. SessionModel
// keeps one per evicting request (SessionModel::evictionLog).
//
// Positions count the prompt (position p is prompt token p while p < the
// prompt's length, then answer token p - prompt length: UiToken::position).
// A position once evicted never comes back (kv/kv_policy.h: positions are
// never re-assigned), so "kept" is every computed position not in the log.
// The attention mass per kept position is the latest snapshot's (the engine
// sends one with a request's first eviction event and every 8th after it);
// positions computed after the snapshot have none yet (NaN).
//
// Only the global layers' cache evicts: a window group (Gemma 3's sliding
// layers) keeps the last `window` positions by itself, whatever the policy.
//
// Memory: 16 bytes per position up to the last one evicted, the snapshot's
// kept positions, 24 bytes per shadow point.
// Threads: UI thread (a plain value).
#pragma once

#include <QMap>
#include <QString>
#include <QVector>
#include <cmath>
#include <vector>

#include "ui_events.h"

namespace gbui {

struct KvEvictedToken {
  qint64 step = -1;          // the step that evicted it; -1: not evicted
  float mass = std::nanf(""); // its accumulated attention mass then (NaN: the policy reports none, e.g. sink)
  bool evicted() const { return step >= 0; }
};

// The full-cache shadow's verdict on one answer token (UiShadowKl, compact).
struct KvShadowPoint {
  int index = 0;     // answer token (0 = the first generated)
  int position = 0;  // in the request, prompt included
  float kl = 0.0f;   // KL(full || pruned), nats
  bool top1Agree = true;
  float logprobPruned = 0.0f, logprobFull = 0.0f;
};

class KvEvictionLog {
 public:
  void apply(const UiEviction& e);
  void apply(const UiShadowKl& s);

  // "sink B=32 S=4 R=28" (the engine's spelling), "" before the first event.
  const QString& policy() const { return policy_; }
  // The policy's reason for its evictions ("outside the recent window").
  const QString& reason() const { return reason_; }
  // Positions the cache held after the latest eviction step.
  int numKept() const { return numKept_; }
  int numEvicted() const { return numEvicted_; }
  int numEvents() const { return numEvents_; }
  qint64 lastStep() const { return lastStep_; }
  // The highest position any event named (evicted or kept), -1 none.
  int lastKnownPosition() const { return lastKnown_; }
  // The highest position evicted, -1 none.
  int lastEvictedPosition() const { return static_cast<int>(evicted_.size()) - 1; }

  // The eviction of `position`, or a default (not evicted) record.
  KvEvictedToken at(int position) const;
  bool isEvicted(int position) const { return at(position).evicted(); }
  // "evicted at step 40 by sink B=32 S=4 R=28: outside the recent window", with
  // the mass in parentheses where the policy ranks by it; "" when kept.
  QString describe(int position) const;
  // Positions below `position` evicted at a step <= `step` (the cache's
  // evictions come before a step's forward pass): what a query computed in
  // that step could no longer see, with describe()'s line for each.
  QMap<int, QString> evictedBy(qint64 step, int position) const;

  // The latest kept snapshot: its step (-1: none yet), positions (ascending,
  // whatever order the event listed them in) and masses (empty for sink).
  qint64 snapshotStep() const { return snapshotStep_; }
  const QVector<int>& snapshotPositions() const { return snapshotPositions_; }
  const QVector<float>& snapshotMass() const { return snapshotMass_; }
  // A kept position's mass in the snapshot (NaN: not in it, or no mass).
  float keptMass(int position) const;
  float maxKeptMass() const { return maxKeptMass_; }

  const std::vector<KvShadowPoint>& shadow() const { return shadow_; }
  int numShadowDisagreements() const { return numDisagreements_; }
  double shadowKlSum() const { return klSum_; }

 private:
  QString policy_, reason_;
  int numKept_ = 0, numEvicted_ = 0, numEvents_ = 0;
  qint64 lastStep_ = -1;
  int lastKnown_ = -1;
  std::vector<KvEvictedToken> evicted_;  // (lastEvicted + 1) index = position
  qint64 snapshotStep_ = -1;
  QVector<int> snapshotPositions_;
  QVector<float> snapshotMass_;
  float maxKeptMass_ = 0.0f;
  std::vector<KvShadowPoint> shadow_;  // in arrival order (answer order)
  int numDisagreements_ = 0;
  double klSum_ = 0.0;
};

}  // namespace gbui
