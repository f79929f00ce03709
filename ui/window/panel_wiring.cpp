// The panels' connections (panel_wiring.h).
#include "panel_wiring.h"

#include <QStatusBar>

#include "bridge/engine_controller.h"
#include "chat/chat_panel.h"
#include "main_window.h"
#include "panels/branches_panel.h"
#include "panels/compare_view.h"
#include "panels/experts_panel.h"
#include "panels/inside_panel.h"
#include "panels/kv_cache_panel.h"
#include "panels/kv_policy_settings.h"
#include "panels/sampling_panel.h"
#include "panels/score_view.h"
#include "panels/serve_panel.h"
#include "panels/speculative_settings.h"
#include "panels/token_inspector_panel.h"
#include "session/session_model.h"

namespace gbui {

namespace {
// Runs command(controller) on the controller's thread (typed values copied in).
template <class F>
void post(MainWindow& w, F command) {
  w.controller()->post(std::move(command));
}
}  // namespace

void wireChat(QWidget* panel, MainWindow& w) {
  auto* chat = qobject_cast<ChatPanel*>(panel);
  EngineController* c = w.controller();
  QObject::connect(chat, &ChatPanel::generate, chat, [&w](const TurnCommand& turn) {
    // A regeneration is another sample: a new seed unless the user pinned it.
    SamplingPanel* sampling = w.sampling();
    const SubmitCommand command{turn, sampling->submitChoice(turn.regenerate), sampling->speculative()->spec(),
                                sampling->kvPolicy()->choice()};
    post(w, [command](EngineController* ec) { ec->submit(command); });
  });
  QObject::connect(c, &EngineController::requestSubmitted, chat, &ChatPanel::onRequestSubmitted);
  QObject::connect(c, &EngineController::requestFailed, chat, &ChatPanel::onRequestFailed);
  QObject::connect(c, &EngineController::chatPromptReady, chat, &ChatPanel::onChatPrompt);
  QObject::connect(chat, &ChatPanel::stopRequested, chat,
                   [&w](quint64 request) { post(w, [request](EngineController* ec) { ec->cancel(request); }); });
  QObject::connect(chat, &ChatPanel::tokenClicked, w.sessionModel(), &SessionModel::selectToken);
  QObject::connect(chat, &ChatPanel::conversationChanged, &w, &MainWindow::autosaveSoon);
}

void wireSampling(QWidget* panel, MainWindow& w) {
  auto* sampling = qobject_cast<SamplingPanel*>(panel);
  // A slider moved while an answer runs: its next token uses the new settings.
  QObject::connect(sampling, &SamplingPanel::settingsChanged, sampling, [&w, sampling] {
    const RequestKey active = w.chat()->activeRequest();
    if (active != 0)
      post(w, [active, choice = sampling->choice()](EngineController* ec) { ec->setSamplerSettings(active, choice); });
    w.autosaveSoon();
  });
  QObject::connect(sampling->speculative(), &SpeculativeSettings::specChanged, &w, &MainWindow::autosaveSoon);
  QObject::connect(sampling->kvPolicy(), &KvPolicySettings::choiceChanged, &w, &MainWindow::autosaveSoon);
}

void wireInspector(QWidget* panel, MainWindow& w) {
  auto* inspector = qobject_cast<TokenInspectorPanel*>(panel);
  QObject::connect(inspector, &TokenInspectorPanel::branchRequested, inspector,
                   [&w](quint64 request, int index, int tokenId) {
    const RequestInfo* r = w.sessionModel()->request(request);
    ChatPanel* chat = w.chat();
    const int turn = chat->turnOf(request);
    if (!r || turn < 0 || chat->activeRequest() != 0) return;
    if (isRestoredKey(request)) {
      // Restored from the session file: the running engine never saw it.
      w.statusBar()->showMessage(QObject::tr("A saved answer cannot be branched at a token; regenerate it first."), 5000);
      return;
    }
    const int numTokens = static_cast<int>(r->promptIds.size()) + index;
    const ForkCommand command{quint64(turn), request, numTokens, tokenId, chat->maxTokens()};
    post(w, [command](EngineController* ec) { ec->fork(command); });
  });
}

void wireKvCache(QWidget* panel, MainWindow& w) {
  QObject::connect(qobject_cast<KvCachePanel*>(panel), &KvCachePanel::releaseRequested, &w,
                   &MainWindow::releaseOldBranches);
}

void wireCompare(QWidget* panel, MainWindow& w) {
  auto* compare = qobject_cast<CompareView*>(panel);
  EngineController* c = w.controller();
  QObject::connect(compare, &CompareView::runRequested, compare, [&w, compare](CompareCommand command) {
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
        return compare->onFailed(command.tag, QObject::tr("The chat has no message to answer yet."));
    }
    post(w, [command](EngineController* ec) { ec->startComparison(command); });
  });
  QObject::connect(compare, &CompareView::releaseRequested, compare,
                   [&w] { post(w, [](EngineController* ec) { ec->closeComparison(); }); });
  QObject::connect(c, &EngineController::comparisonStarted, compare, &CompareView::onStarted);
  QObject::connect(c, &EngineController::comparisonFinished, compare, &CompareView::onFinished);
  QObject::connect(c, &EngineController::comparisonFailed, compare, &CompareView::onFailed);
}

void wireScore(QWidget* panel, MainWindow& w) {
  auto* score = qobject_cast<ScoreView*>(panel);
  EngineController* c = w.controller();
  QObject::connect(score, &ScoreView::scoreRequested, score, [&w](quint64 tag, const QString& text, const QString& base) {
    const ScoreCommand command{tag, text, base};
    post(w, [command](EngineController* ec) { ec->scoreText(command); });
  });
  QObject::connect(c, &EngineController::scoreFinished, score, &ScoreView::onFinished);
  QObject::connect(c, &EngineController::scoreFailed, score, &ScoreView::onFailed);
}

// A token clicked in the Score view shows its routing too (a mixture of experts).
void wireExperts(QWidget* panel, MainWindow& w) {
  QObject::connect(w.scoreView(), &ScoreView::routingPicked, qobject_cast<ExpertsPanel*>(panel),
                   &ExpertsPanel::showRouting);
}

void wireBranches(QWidget* panel, MainWindow& w) {
  auto* branches = qobject_cast<BranchesPanel*>(panel);
  QObject::connect(branches, &BranchesPanel::releaseRequested, branches,
                   [&w](quint64 request) { post(w, [request](EngineController* ec) { ec->release(request); }); });
  QObject::connect(branches, &BranchesPanel::branchActivated, &w, [&w](quint64 request) {
    // A chat branch becomes the turn's current one (a request of a path left
    // by an edit brings that path back); any other request is shown in the
    // inspector (its first token selected).
    Conversation conv = w.chat()->conversation();
    if (conv.showRequest(request)) w.chat()->setConversation(conv);
    w.sessionModel()->selectToken(request, 0);
  });
}

// Inside the model: the panel's inspections run on the controller's thread.
void wireInside(QWidget* panel, MainWindow& w) {
  auto* inside = qobject_cast<InsidePanel*>(panel);
  EngineController* c = w.controller();
  QObject::connect(inside, &InsidePanel::inspectRequested, inside, [&w](const InspectCommand& command) {
    post(w, [command](EngineController* ec) { ec->inspect(command); });
  });
  QObject::connect(c, &EngineController::inspectFinished, inside, &InsidePanel::onFinished);
  QObject::connect(c, &EngineController::inspectFailed, inside, &InsidePanel::onFailed);
  // A token clicked in the Score view is a selection too (the chat's arrive
  // through the session model's tokenSelected).
  QObject::connect(w.scoreView(), &ScoreView::tokenPicked, inside, &InsidePanel::selectSequence);
  QObject::connect(w.chat(), &ChatPanel::promptTokenClicked, inside, &InsidePanel::onPromptTokenSelected);
}

// The server: its requests are engine requests, listed in the Serve panel.
void wireServe(QWidget* panel, MainWindow& w) {
  auto* serve = qobject_cast<ServePanel*>(panel);
  EngineController* c = w.controller();
  QObject::connect(c, &EngineController::eventsReady, serve, &ServePanel::applyEvents);
  QObject::connect(c, &EngineController::servingStarted, serve, &ServePanel::onServingStarted);
  QObject::connect(c, &EngineController::servingFailed, serve, &ServePanel::onServingFailed);
  QObject::connect(c, &EngineController::servingStopped, serve, &ServePanel::onServingStopped);
  QObject::connect(serve, &ServePanel::startServing, serve, [&w](const QString& host, int port, const QString& key) {
    post(w, [host, port, key](EngineController* ec) { ec->startServing(host, port, key); });
  });
  // Selecting a request shows its first token in the inspector.
  QObject::connect(serve, &ServePanel::requestSelected, serve,
                   [&w](quint64 request) { w.sessionModel()->selectToken(request, 0); });
  QObject::connect(serve, &ServePanel::stopServing, serve,
                   [&w] { post(w, [](EngineController* ec) { ec->stopServing(); }); });
}

}  // namespace gbui
