// PanelSpec: the workbench's panels as data. One row per panel: the name (the
// dock's object name, what restoreState() and `glassbox --panel NAME` use), the
// title, where it docks, which dock it shares tabs with, the factory and the
// wiring (panel_wiring.h). MainWindow walks panelSpecs() in order to build the
// window and then wires each row; it keeps no member per panel. Adding a panel
// is its own file pair in ui/panels/ plus one row in panel_registry.cpp (and
// its wiring function when it talks to the engine or another panel).
// Threads: UI thread.
#pragma once

#include <QString>
#include <QStringList>
#include <Qt>
#include <vector>

class QWidget;

namespace gbui {

class MainWindow;
class SessionModel;
class SettingsCodec;

// What a panel's factory is given: the session model it shows and the settings
// codec (ui/session/settings_codec.h) for the panels that edit settings.
struct PanelContext {
  SessionModel* model = nullptr;
  const SettingsCodec* codec = nullptr;
};

struct PanelSpec {
  const char* name;   // object name: "kv", "performance", ...
  const char* title;  // untranslated; MainWindow shows tr(title) in its context
  // Qt::NoDockWidgetArea: the central widget (the chat); otherwise a dock there.
  Qt::DockWidgetArea area;
  const char* tabifyWith;  // an earlier row's name to share a tab group with, or nullptr
  QWidget* (*create)(const PanelContext& context);
  // Connects the panel (once every panel exists); nullptr: it only watches the session model.
  void (*wire)(QWidget* panel, MainWindow& window);
};

// Every panel, in the order MainWindow creates and docks them.
const std::vector<PanelSpec>& panelSpecs();
// Their names, in that order ("chat", "sampling", ...), for --panel and messages.
QStringList panelNames();

}  // namespace gbui
