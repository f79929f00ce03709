// The Compare view's, the Score view's and the Branches panel's connections: UI -> engine through
// queued invocations on the controller's thread, engine -> UI through its
// queued signals; branch switching through the chat's conversation.
#include <QMetaObject>

#include "panels/branches_panel.h"
#include "chat/chat_panel.h"
#include "panels/compare_view.h"
#include "bridge/engine_controller.h"
#include "main_window.h"
#include "panels/score_view.h"
#include "session/session_model.h"

namespace gbui {

void connectCompareAndBranches(MainWindow& w) {
  EngineController* c = w.controller();
  CompareView* compare = w.compareView();
  BranchesPanel* branches = w.branchesPanel();
  // The lambdas run on the UI thread (their context is a UI object) and post
  // the command to the controller's thread.
  QObject::connect(compare, &CompareView::runRequested, compare, [c, &w](CompareCommand command) {
    if (command.fromChat) {
      // The chat up to its last answer: the lanes answer its last message again.
      const Conversation& conv = w.chat()->conversation();
      int end = static_cast<int>(conv.turns.size());
      if (end > 0 && conv.turns.back().role == QLatin1String("assistant")) --end;
      Conversation chatOnly = conv;
      chatOnly.completionMode = false;
      command.chat = chatOnly.messagesBefore(end);
      command.chatFormat = w.chat()->format();
      if (command.chat.isEmpty() || command.chat.back().role == QLatin1String("assistant"))
        return w.compareView()->onFailed(command.tag, QObject::tr("The chat has no message to answer yet."));
    }
    c->post([command](EngineController* ec) { ec->startComparison(command); });
  });
  QObject::connect(compare, &CompareView::releaseRequested, compare,
                   [c] { c->post([](EngineController* ec) { ec->closeComparison(); }); });
  QObject::connect(c, &EngineController::comparisonStarted, compare, &CompareView::onStarted);
  QObject::connect(c, &EngineController::comparisonFinished, compare, &CompareView::onFinished);
  QObject::connect(c, &EngineController::comparisonFailed, compare, &CompareView::onFailed);

  ScoreView* score = w.scoreView();
  QObject::connect(score, &ScoreView::scoreRequested, score, [c](quint64 tag, const QString& text, const QString& base) {
    const ScoreCommand command{tag, text, base};
    c->post([command](EngineController* ec) { ec->scoreText(command); });
  });
  QObject::connect(c, &EngineController::scoreFinished, score, &ScoreView::onFinished);
  QObject::connect(c, &EngineController::scoreFailed, score, &ScoreView::onFailed);

  QObject::connect(branches, &BranchesPanel::releaseRequested, branches,
                   [c](quint64 request) { c->post([=](EngineController* ec) { ec->release(request); }); });
  QObject::connect(branches, &BranchesPanel::branchActivated, &w, [&w](quint64 request) {
    // A chat branch becomes the turn's current one; any other request is
    // shown in the inspector (its first token selected).
    // A request of a path left by an edit brings that path back.
    Conversation conv = w.chat()->conversation();
    if (conv.showRequest(request)) w.chat()->setConversation(conv);
    w.sessionModel()->selectToken(request, 0);
  });
}

}  // namespace gbui
