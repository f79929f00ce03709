#include "engine_probe.h"

#include "engine_controller.h"
#include "local_engine_source.h"

#include "runtime/engine.h"

namespace gbui {
namespace {
const gb::Engine* engineOf(const EngineController& controller) {
  const auto* local = dynamic_cast<const LocalEngineSource*>(controller.source());
  return local ? &local->engine() : nullptr;
}
}  // namespace

QString EngineProbe::kvSnapshotSummary() const {
  const gb::Engine* engine = engineOf(controller_);
  if (!engine) return {};
  const gb::KvSnapshot snap = engine->kv_snapshot();
  return QStringLiteral("%1 %2 %3 %4")
      .arg(snap.num_owned)
      .arg(snap.num_free)
      .arg(snap.num_cached)
      .arg(static_cast<int>(snap.blocks.size()));
}

QString EngineProbe::kvWindowSummary() const {
  const gb::Engine* engine = engineOf(controller_);
  if (!engine) return {};
  const gb::KvSnapshot snap = engine->kv_snapshot();
  return QStringLiteral("%1 %2").arg(snap.num_window_released).arg(snap.num_window_released_total);
}

QVector<int> EngineProbe::kvRefCounts() const {
  QVector<int> out;
  if (const gb::Engine* engine = engineOf(controller_))
    for (const gb::KvBlockView& b : engine->kv_snapshot().blocks) out.push_back(b.ref_count);
  return out;
}

QVector<quint64> EngineProbe::keptRequests() const {
  QVector<quint64> out;
  if (const gb::Engine* engine = engineOf(controller_))
    for (gb::RequestId id : engine->retained_requests()) out.push_back(id.value);
  return out;
}

}  // namespace gbui
