// Each panel's wiring, one function per row of the panel table
// (panel_registry.cpp): UI -> engine through typed commands posted to the
// controller's thread, engine -> UI through its queued signals, panel -> panel
// through the window. MainWindow calls them once every panel exists.
// Threads: UI thread.
#pragma once

class QWidget;

namespace gbui {

class MainWindow;

void wireChat(QWidget* panel, MainWindow& window);
void wireSampling(QWidget* panel, MainWindow& window);
void wireInspector(QWidget* panel, MainWindow& window);
void wireKvCache(QWidget* panel, MainWindow& window);
void wireCompare(QWidget* panel, MainWindow& window);
void wireScore(QWidget* panel, MainWindow& window);
void wireBranches(QWidget* panel, MainWindow& window);
void wireInside(QWidget* panel, MainWindow& window);
void wireExperts(QWidget* panel, MainWindow& window);
void wireServe(QWidget* panel, MainWindow& window);

}  // namespace gbui
