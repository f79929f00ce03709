// Helpers shared by the workbench tests: shared-data paths, a MainWindow with a
// throw-away session file and settings, loading stories260K and generating.
#pragma once

#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

#include "chat/chat_panel.h"
#include "window/main_window.h"
#include "panels/sampling_panel.h"
#include "session/session_model.h"

namespace gbuitest {

inline QString sharedFile(const QString& relative) {
  QString root = qEnvironmentVariable("GLASSBOX_SHARED_DIR");
  if (root.isEmpty()) root = QStringLiteral(GLASSBOX_SHARED_DIR_DEFAULT);
  return root + QLatin1Char('/') + relative;
}

inline QString storiesPath() { return sharedFile("models/stories260K/stories260K.bin"); }

// Greedy, no truncation noise: the settings of the reference generator.
inline const char* kGreedyJson = R"({"temperature":0,"top_k":0,"top_p":1,"min_p":0,"seed":7})";

inline std::unique_ptr<gbui::MainWindow> makeWindow(const QTemporaryDir& dir) {
  auto window = std::make_unique<gbui::MainWindow>(dir.filePath("session.json"));
  window->resize(1400, 900);
  window->show();
  return window;
}

inline bool loadStories(gbui::MainWindow& window) {
  QSignalSpy ready(&window, &gbui::MainWindow::modelReady);
  window.openModel(storiesPath());
  return ready.wait(30000);
}

// Sends `prompt` in completion mode and waits until the request finishes.
inline bool generate(gbui::MainWindow& window, const QString& prompt, int maxTokens, int timeoutMs = 60000) {
  gbui::Conversation c;
  c.completionMode = true;
  window.chat()->setConversation(c);
  window.chat()->setMaxTokens(maxTokens);
  window.chat()->setInputText(prompt);
  window.chat()->send();
  // The request may start and finish within one event-loop turn: wait for its id
  // in the conversation and for the panel to be idle again.
  return QTest::qWaitFor(
      [&] {
        const gbui::Conversation& conv = window.chat()->conversation();
        return !conv.turns.isEmpty() && !conv.turns.back().branches.isEmpty() && window.chat()->activeRequest() == 0;
      },
      timeoutMs);
}

// Sends one chat turn and waits until its answer finished.
inline bool chatTurn(gbui::MainWindow& window, const QString& text, int maxTokens) {
  const int before = static_cast<int>(window.chat()->conversation().turns.size());
  window.chat()->setMaxTokens(maxTokens);
  window.chat()->setInputText(text);
  window.chat()->send();
  return QTest::qWaitFor(
      [&] {
        const gbui::Conversation& conv = window.chat()->conversation();
        return conv.turns.size() == before + 2 && !conv.turns.back().branches.isEmpty() &&
               window.chat()->activeRequest() == 0;
      },
      60000);
}

}  // namespace gbuitest
