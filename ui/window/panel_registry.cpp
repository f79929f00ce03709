// The panel table. Order matters: it is the creation and docking order, and a
// row may only tabify with a row above it. Tab groups today: kv | performance |
// speculative | model | compare | serve | score (tabifyDockWidget puts the new tab
// right after the one named) and inspector | inside | experts | branches.
#include "panel_registry.h"

#include "panel_wiring.h"

#include <QCoreApplication>
#include <type_traits>

#include "panels/branches_panel.h"
#include "chat/chat_panel.h"
#include "panels/compare_view.h"
#include "panels/experts_panel.h"
#include "panels/inside_panel.h"
#include "panels/kv_cache_panel.h"
#include "panels/model_info_panel.h"
#include "panels/performance_panel.h"
#include "panels/sampling_panel.h"
#include "panels/score_view.h"
#include "panels/serve_panel.h"
#include "panels/speculative_panel.h"
#include "panels/token_inspector_panel.h"

namespace gbui {
namespace {

// A panel takes what its constructor asks for: the session model, the
// settings codec, both, or nothing.
template <class Panel>
QWidget* make(const PanelContext& c) {
  if constexpr (std::is_constructible_v<Panel, SessionModel*, const SettingsCodec&>) return new Panel(c.model, *c.codec);
  else if constexpr (std::is_constructible_v<Panel, const SettingsCodec&>) return new Panel(*c.codec);
  else if constexpr (std::is_constructible_v<Panel, SessionModel*>) return new Panel(c.model);
  else return new Panel;
}

}  // namespace

const std::vector<PanelSpec>& panelSpecs() {
  // QT_TRANSLATE_NOOP keeps the titles visible to lupdate in MainWindow's context.
  static const std::vector<PanelSpec> specs = {
      {"chat", QT_TRANSLATE_NOOP("gbui::MainWindow", "Chat"), Qt::NoDockWidgetArea, nullptr, make<ChatPanel>, wireChat},
      // Sampling has the left column to itself (its sliders need the height).
      {"sampling", QT_TRANSLATE_NOOP("gbui::MainWindow", "Sampling"), Qt::LeftDockWidgetArea, nullptr,
       make<SamplingPanel>, wireSampling},
      {"inspector", QT_TRANSLATE_NOOP("gbui::MainWindow", "Token inspector"), Qt::RightDockWidgetArea, nullptr,
       make<TokenInspectorPanel>, wireInspector},
      {"kv", QT_TRANSLATE_NOOP("gbui::MainWindow", "KV cache"), Qt::BottomDockWidgetArea, nullptr,
       make<KvCachePanel>, wireKvCache},
      {"performance", QT_TRANSLATE_NOOP("gbui::MainWindow", "Performance"), Qt::BottomDockWidgetArea, "kv",
       make<PerformancePanel>, nullptr},
      {"speculative", QT_TRANSLATE_NOOP("gbui::MainWindow", "Speculative"), Qt::BottomDockWidgetArea, "performance",
       make<SpeculativePanel>, nullptr},
      {"model", QT_TRANSLATE_NOOP("gbui::MainWindow", "Model"), Qt::BottomDockWidgetArea, "speculative",
       make<ModelInfoPanel>, nullptr},
      {"compare", QT_TRANSLATE_NOOP("gbui::MainWindow", "Compare"), Qt::BottomDockWidgetArea, "model",
       make<CompareView>, wireCompare},
      {"score", QT_TRANSLATE_NOOP("gbui::MainWindow", "Score"), Qt::BottomDockWidgetArea, "compare",
       make<ScoreView>, wireScore},
      {"branches", QT_TRANSLATE_NOOP("gbui::MainWindow", "Branches"), Qt::RightDockWidgetArea, "inspector",
       make<BranchesPanel>, wireBranches},
      {"inside", QT_TRANSLATE_NOOP("gbui::MainWindow", "Inside"), Qt::RightDockWidgetArea, "inspector",
       make<InsidePanel>, wireInside},
      {"experts", QT_TRANSLATE_NOOP("gbui::MainWindow", "Experts"), Qt::RightDockWidgetArea, "inside",
       make<ExpertsPanel>, wireExperts},
      {"serve", QT_TRANSLATE_NOOP("gbui::MainWindow", "Serve"), Qt::BottomDockWidgetArea, "compare",
       make<ServePanel>, wireServe},
  };
  return specs;
}

QStringList panelNames() {
  QStringList names;
  for (const PanelSpec& spec : panelSpecs()) names << QLatin1String(spec.name);
  return names;
}

}  // namespace gbui
