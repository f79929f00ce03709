#include "kv_eviction_log.h"

#include <algorithm>

namespace gbui {

void KvEvictionLog::apply(const UiEviction& e) {
  ++numEvents_;
  policy_ = e.policy;
  reason_ = e.reason;
  numKept_ = e.numKept;
  lastStep_ = std::max(lastStep_, e.step);
  for (qsizetype i = 0; i < e.positions.size(); ++i) {
    const int p = e.positions[i];
    if (p < 0) continue;
    if (static_cast<size_t>(p) >= evicted_.size()) evicted_.resize(static_cast<size_t>(p) + 1);
    KvEvictedToken& t = evicted_[static_cast<size_t>(p)];
    if (!t.evicted()) ++numEvicted_;
    t.step = e.step;
    t.mass = i < e.mass.size() ? e.mass[i] : std::nanf("");
    lastKnown_ = std::max(lastKnown_, p);
  }
  if (!e.keptPositions.isEmpty()) {
    // The engine lists its cache's slots in slot order (a freed slot takes
    // the next position): sorted by position here, masses alongside.
    const bool withMass = e.keptMass.size() == e.keptPositions.size();
    std::vector<std::pair<int, float>> kept;
    kept.reserve(static_cast<size_t>(e.keptPositions.size()));
    for (qsizetype i = 0; i < e.keptPositions.size(); ++i)
      kept.emplace_back(e.keptPositions[i], withMass ? e.keptMass[i] : std::nanf(""));
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    snapshotStep_ = e.step;
    snapshotPositions_.clear();
    snapshotMass_.clear();
    maxKeptMass_ = 0.0f;
    for (const auto& [position, mass] : kept) {
      snapshotPositions_.push_back(position);
      if (!withMass) continue;
      snapshotMass_.push_back(mass);
      if (std::isfinite(mass)) maxKeptMass_ = std::max(maxKeptMass_, mass);
    }
    lastKnown_ = std::max(lastKnown_, snapshotPositions_.back());
  }
}

void KvEvictionLog::apply(const UiShadowKl& s) {
  shadow_.push_back({s.index, s.position, static_cast<float>(s.kl), s.top1Agree, static_cast<float>(s.logprobPruned),
                     static_cast<float>(s.logprobFull)});
  if (!s.top1Agree) ++numDisagreements_;
  if (std::isfinite(s.kl)) klSum_ += s.kl;
}

KvEvictedToken KvEvictionLog::at(int position) const {
  if (position < 0 || static_cast<size_t>(position) >= evicted_.size()) return {};
  return evicted_[static_cast<size_t>(position)];
}

QString KvEvictionLog::describe(int position) const {
  const KvEvictedToken t = at(position);
  if (!t.evicted()) return {};
  QString text = QStringLiteral("evicted at step %1 by %2: %3").arg(t.step).arg(policy_, reason_);
  if (!std::isnan(t.mass)) text += QStringLiteral(" (%1)").arg(static_cast<double>(t.mass), 0, 'f', 4);
  return text;
}

QMap<int, QString> KvEvictionLog::evictedBy(qint64 step, int position) const {
  QMap<int, QString> out;
  const int end = std::min(position, lastEvictedPosition() + 1);
  for (int q = 0; q < end; ++q) {
    const KvEvictedToken t = at(q);
    if (t.evicted() && t.step <= step) out.insert(q, describe(q));
  }
  return out;
}

float KvEvictionLog::keptMass(int position) const {
  if (snapshotMass_.isEmpty()) return std::nanf("");
  const auto it = std::lower_bound(snapshotPositions_.begin(), snapshotPositions_.end(), position);
  if (it == snapshotPositions_.end() || *it != position) return std::nanf("");
  return snapshotMass_[it - snapshotPositions_.begin()];
}

}  // namespace gbui
