// Helper process for ui_autosave_test: a workbench that autosaves in a tight
// loop until it is killed. Save N holds a conversation whose last message is
// "message N"; "saved N" is printed (and flushed) once saveSession() returned.
#include <QApplication>
#include <cstdio>

#include "session/conversation.h"
#include "chat/chat_panel.h"
#include "window/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: ui_autosave_child SESSION_FILE\n");
    return 2;
  }
  gbui::MainWindow window(QString::fromLocal8Bit(argv[1]));
  for (int i = 1; i <= 1000000; ++i) {
    gbui::Conversation c;
    // A few KiB that change size from save to save, so a torn write would show.
    for (int t = 0; t < 1 + i % 40; ++t) c.turns.push_back({QStringLiteral("user"), QStringLiteral("filler %1 ").arg(t).repeated(20), {}, 0});
    c.turns.push_back({QStringLiteral("user"), QStringLiteral("message %1").arg(i), {}, 0});
    window.chat()->setConversation(c);
    window.saveSession();
    if (!window.lastError().isEmpty()) {
      std::fprintf(stderr, "%s\n", qPrintable(window.lastError()));
      return 1;
    }
    std::printf("saved %d\n", i);
    std::fflush(stdout);
  }
  return 0;
}
