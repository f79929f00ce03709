// The workbench's remote engine end to end on loopback: workbench A serves
// stories260K (its Serve panel), workbench B connects to it as a remote engine
// (File > Connect to server..., here connectToServer). B's greedy request
// streams tokens that equal A's engine run of the same request (text, and each
// token's p within float tolerance), each with 20 alternatives and marked
// remote; B's chat goes through the server's template; B polls A's /metrics
// into its KV panel (A's pool size); the inspector says what the API cannot
// show; an unreachable server fails the connect with a message. Waits bounded.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QTest>
#include <cmath>

#include "gb_qtest_main.h"
#include "bridge/engine_controller.h"
#include "panels/kv_cache_panel.h"
#include "panels/compare_view.h"
#include "panels/performance_panel.h"
#include "panels/score_view.h"
#include "panels/serve_panel.h"
#include "panels/token_inspector_panel.h"
#include "session/session_model.h"
#include "ui_test_support.h"
#include "../ui_threads/controller_commands.h"
#include "bridge/engine_probe.h"

class UiRemoteTest : public QObject {
  Q_OBJECT
 private slots:
  void workbenchUsesAnotherWorkbenchAsItsEngine();
  void scoreViewScoresOnTheServer();
  void compareViewRunsLanesOnTheServer();
  void unreachableServerFailsTheConnect();
};

namespace {

const gbui::RequestInfo* onlyFinished(const gbui::SessionModel& m) {
  const gbui::RequestInfo* found = nullptr;
  for (const auto& [key, r] : m.requests())
    if (r.finished) found = &r;
  return found;
}

// Scores `text` in the window's Score view; its JSON, or "" when it failed.
QJsonObject scoreIn(gbui::MainWindow& w, const QString& text) {
  gbui::ScoreView* view = w.scoreView();
  QSignalSpy done(view, &gbui::ScoreView::finished);
  view->setText(text);
  view->score();
  if (!done.wait(60000)) return {};
  return QJsonDocument::fromJson(view->resultJson().toUtf8()).object();
}

// Runs the window's Compare view: lane 0 greedy, lane 1 the view's default
// sampled lane, 2 samples of 16 tokens; its JSON ({} when it failed).
QJsonObject compareIn(gbui::MainWindow& w) {
  gbui::CompareView* cv = w.compareView();
  cv->setLaneSettings(0, gbui::CompareView::presetJson("greedy"));
  cv->setPrompt("Once upon a time, there was a little girl named Lily. She loved to play");
  cv->setSamples(2);
  cv->setSeed(5);
  cv->setCrn(false);
  cv->setMaxTokens(16);
  QSignalSpy done(cv, &gbui::CompareView::finished);
  cv->run();
  if (!done.wait(60000)) return {};
  return QJsonDocument::fromJson(cv->resultJson().toUtf8()).object();
}

QStringList tokenTexts(const gbui::SessionModel& m, quint64 request) {
  QStringList out;
  if (const gbui::RequestInfo* r = m.request(request))
    for (const gbui::UiToken& t : r->tokens) out << t.text;
  return out;
}

}  // namespace

void UiRemoteTest::workbenchUsesAnotherWorkbenchAsItsEngine() {
  QTemporaryDir dirA, dirB;
  auto a = gbuitest::makeWindow(dirA);
  QVERIFY(gbuitest::loadStories(*a));
  gbui::ServePanel* serve = a->servePanel();
  serve->setPort(0);
  serve->setServing(true);
  QVERIFY(QTest::qWaitFor([&] { return !serve->address().isEmpty(); }, 20000));

  auto b = gbuitest::makeWindow(dirB);
  QSignalSpy ready(b.get(), &gbui::MainWindow::modelReady);
  b->connectToServer(serve->address() + "/v1", QString());
  QVERIFY(ready.wait(30000));
  const gbui::UiModelInfo& info = b->sessionModel()->modelInfo();
  QVERIFY(!info.remoteUrl.isEmpty());
  QCOMPARE(info.name, QStringLiteral("stories260K"));

  // A greedy completion on B runs on A's engine.
  gbui::EngineController* controller = b->controller();
  QMetaObject::invokeMethod(controller, [controller] {
    controller->submit(gbuitest::completionCommand(1, QStringLiteral("Once upon a time"), QString::fromLatin1(gbuitest::kGreedyJson), 12));
  });
  QVERIFY(QTest::qWaitFor([&] { return onlyFinished(*b->sessionModel()) && onlyFinished(*a->sessionModel()); }, 60000));
  const gbui::RequestInfo& remote = *onlyFinished(*b->sessionModel());
  const gbui::RequestInfo& local = *onlyFinished(*a->sessionModel());
  QCOMPARE(remote.finish.text, local.finish.text);
  QCOMPARE(int(remote.tokens.size()), 12);
  QCOMPARE(remote.tokens.size(), local.tokens.size());
  QString joined;
  for (size_t i = 0; i < remote.tokens.size(); ++i) {
    const gbui::UiToken& t = remote.tokens[i];
    QVERIFY(t.remote);
    QCOMPARE(int(t.top.size()), 20);
    QCOMPARE(t.rank, 0);  // greedy: the most likely alternative
    QVERIFY(std::abs(t.probBefore - local.tokens[i].probBefore) < 1e-5);
    QVERIFY(std::isnan(t.prob) && t.stages.isEmpty());  // not available, not made up
    joined += t.text;
  }
  QCOMPARE(joined, remote.finish.text);
  QVERIFY(remote.finish.ttftMs > 0.0);
  QCOMPARE(remote.finish.numPromptTokens, local.finish.numPromptTokens);

  // A's /metrics reach B's KV panel.
  // (the first sample may predate the request: wait for one that counts its prompt)
  QVERIFY(QTest::qWaitFor([&] {
    const auto& samples = b->sessionModel()->remoteMetrics();
    return !samples.empty() && samples.back().prefixQueries > 0;
  }, 20000));
  const gbui::UiRemoteMetrics& m = b->sessionModel()->remoteMetrics().back();
  QCOMPARE(m.flavour, QStringLiteral("glassbox"));
  QCOMPARE(int(m.kvBlocksTotal), a->sessionModel()->modelInfo().numBlocks);
  auto* kv = qobject_cast<gbui::KvCachePanel*>(b->panel("kv"));
  QVERIFY(kv != nullptr);
  QVERIFY2(kv->remoteStatsText().contains("glassbox /metrics"), qPrintable(kv->remoteStatsText()));
  QVERIFY2(kv->remoteStatsText().contains("prefix cache hit rate 0.0% (0 of"), qPrintable(kv->remoteStatsText()));
  auto* perf = qobject_cast<gbui::PerformancePanel*>(b->panel("performance"));
  QVERIFY(perf != nullptr);
  QVERIFY(perf->numLatencyPoints() >= 12);

  // The inspector shows the server's numbers and says what is missing.
  b->sessionModel()->selectToken(remote.key, 0);
  auto* header = b->inspector()->findChild<QLabel*>(QStringLiteral("inspectorHeader"));
  QVERIFY(header != nullptr);
  QVERIFY2(header->text().contains("Not available over the API"), qPrintable(header->text()));

  // Chat goes to /v1/chat/completions; branching is refused with a message.
  QSignalSpy failed(controller, &gbui::EngineController::requestFailed);
  QMetaObject::invokeMethod(controller, [controller] {
    controller->submit(gbuitest::chatCommand(2, {{QStringLiteral("user"), QStringLiteral("Tell me a story")}},
                                             QStringLiteral("model"), QString::fromLatin1(gbuitest::kGreedyJson), 8));
    controller->fork(gbui::ForkCommand{3, 1, 4, -1, 4});
  });
  QVERIFY(QTest::qWaitFor([&] {
    int n = 0;
    for (const auto& [key, r] : b->sessionModel()->requests()) n += r.finished;
    return n == 2;
  }, 60000));
  QVERIFY(QTest::qWaitFor([&] { return !failed.isEmpty(); }, 5000));
  QCOMPARE(failed.first().at(0).toULongLong(), 3ull);
  QVERIFY(failed.first().at(1).toString().contains("not available with a remote engine"));
  // So is a KV eviction policy (the API has none), before anything is sent.
  gbui::KvPolicyChoice sink;
  sink.policy = QStringLiteral("sink");
  sink.budget = 32;
  gbui::SubmitCommand evicting =
      gbuitest::completionCommand(4, QStringLiteral("Once upon a time"), QString::fromLatin1(gbuitest::kGreedyJson), 4);
  evicting.kvPolicy = gbui::engineSettingsCodec().checkKvPolicy(sink);
  QVERIFY(evicting.kvPolicy.ok());
  QMetaObject::invokeMethod(controller, [controller, evicting] { controller->submit(evicting); });
  QVERIFY(QTest::qWaitFor([&] { return failed.size() == 2; }, 5000));
  QCOMPARE(failed.at(1).at(0).toULongLong(), 4ull);
  QVERIFY2(failed.at(1).at(1).toString().contains("KV eviction (a policy other than full) is not available with a remote engine"),
           qPrintable(failed.at(1).at(1).toString()));
  serve->setServing(false);
}

// B's Score view over A's server (echo + logprobs) gives A's local scores:
// the same tokens, logprobs within 1e-4, ranks where the chosen token is among
// the 20 alternatives; ids and entropy are null (not available), not made up.
void UiRemoteTest::scoreViewScoresOnTheServer() {
  QTemporaryDir dirA, dirB;
  auto a = gbuitest::makeWindow(dirA);
  QVERIFY(gbuitest::loadStories(*a));
  const QString text = QStringLiteral("Once upon a time, there was a little girl named Lily. She liked to play.");
  const QJsonObject local = scoreIn(*a, text);
  const QJsonArray localTokens = local.value("tokens").toArray();
  QVERIFY2(localTokens.size() > 10, qPrintable(a->scoreView()->summary()));
  gbui::ServePanel* serve = a->servePanel();
  serve->setPort(0);
  serve->setServing(true);
  QVERIFY(QTest::qWaitFor([&] { return !serve->address().isEmpty(); }, 20000));
  auto b = gbuitest::makeWindow(dirB);
  QSignalSpy ready(b.get(), &gbui::MainWindow::modelReady);
  b->connectToServer(serve->address() + "/v1", QString());
  QVERIFY(ready.wait(30000));

  const QJsonObject remote = scoreIn(*b, text);
  const QJsonArray remoteTokens = remote.value("tokens").toArray();
  QVERIFY2(remote.value("remote").toString().startsWith(serve->address()), qPrintable(b->scoreView()->summary()));
  QCOMPARE(remoteTokens.size(), localTokens.size());
  int ranked = 0;
  for (int i = 0; i < remoteTokens.size(); ++i) {
    const QJsonObject r = remoteTokens[i].toObject(), l = localTokens[i].toObject();
    QCOMPARE(r.value("text").toString(), l.value("text").toString());
    QVERIFY2(std::abs(r.value("logprob").toDouble() - l.value("logprob").toDouble()) < 1e-4, qPrintable(QString::number(i)));
    QVERIFY(r.value("id").isNull() && r.value("entropy").isNull());
    QCOMPARE(r.value("top").toArray().size(), 20);
    if (l.value("rank").toInt() < 20) {
      QCOMPARE(r.value("rank").toInt(-1), l.value("rank").toInt());
      ++ranked;
    } else {
      QVERIFY(r.value("rank").isNull());
    }
  }
  QVERIFY(ranked > 0);
  QVERIFY(std::abs(remote.value("perplexity").toDouble() - local.value("perplexity").toDouble()) < 1e-3);
  b->scoreView()->showDetails(0);
  QVERIFY2(b->scoreView()->details().contains("entropy not available"), qPrintable(b->scoreView()->details()));
  QVERIFY2(b->scoreView()->summary().contains("not available over the API"), qPrintable(b->scoreView()->summary()));

  // KL against a base model needs the full distribution: refused with a message.
  b->scoreView()->setBasePath(gbuitest::storiesPath());
  QVERIFY(scoreIn(*b, text).isEmpty());
  QVERIFY2(b->scoreView()->summary().contains("not available with a remote engine"), qPrintable(b->scoreView()->summary()));
  serve->setServing(false);
}

// B's Compare view over A's server: every sample is a streamed request whose
// tokens fill the lane columns; the greedy lane's tokens equal A's local greedy
// lane, token by token; statistics from the token strings, and what needs the
// engine (entropy, CRN, shared blocks) null or listed as not available.
void UiRemoteTest::compareViewRunsLanesOnTheServer() {
  QTemporaryDir dirA, dirB;
  auto a = gbuitest::makeWindow(dirA);
  QVERIFY(gbuitest::loadStories(*a));
  const QJsonObject local = compareIn(*a);
  QVERIFY2(!local.isEmpty(), qPrintable(a->compareView()->status()));
  gbui::ServePanel* serve = a->servePanel();
  serve->setPort(0);
  serve->setServing(true);
  QVERIFY(QTest::qWaitFor([&] { return !serve->address().isEmpty(); }, 20000));
  auto b = gbuitest::makeWindow(dirB);
  QSignalSpy ready(b.get(), &gbui::MainWindow::modelReady);
  b->connectToServer(serve->address() + "/v1", QString());
  QVERIFY(ready.wait(30000));

  const QJsonObject remote = compareIn(*b);
  gbui::CompareView* cv = b->compareView();
  QVERIFY2(!remote.isEmpty(), qPrintable(cv->status()));
  QCOMPARE(cv->requests().size(), 4);
  const QStringList localGreedy = tokenTexts(*a->sessionModel(), a->compareView()->requestOf(0, 0));
  QCOMPARE(localGreedy.size(), 16);
  for (int j = 0; j < 2; ++j) QCOMPARE(tokenTexts(*b->sessionModel(), cv->requestOf(0, j)), localGreedy);
  QCOMPARE(cv->columnText(0), a->compareView()->columnText(0));
  const QJsonArray lanes = remote.value("lanes").toArray();
  QCOMPARE(lanes.size(), 2);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      const QJsonObject s = lanes[i].toObject().value("samples").toArray()[j].toObject();
      QCOMPARE(s.value("text").toString(), tokenTexts(*b->sessionModel(), cv->requestOf(i, j)).join(QString()));
      QCOMPARE(s.value("length").toInt(), tokenTexts(*b->sessionModel(), cv->requestOf(i, j)).size());
      QVERIFY(s.value("mean_entropy").isNull());
    }
  const QJsonObject greedyLocal = local.value("lanes").toArray()[0].toObject().value("samples").toArray()[0].toObject();
  const QJsonObject greedyRemote = lanes[0].toObject().value("samples").toArray()[0].toObject();
  QCOMPARE(greedyRemote.value("text").toString(), greedyLocal.value("text").toString());
  QVERIFY(std::abs(greedyRemote.value("mean_logprob").toDouble() - greedyLocal.value("mean_logprob").toDouble()) < 1e-4);
  QVERIFY(remote.value("not_available").toArray().contains(QStringLiteral("common random numbers (CRN)")));
  QVERIFY2(cv->status().contains("not available over the API"), qPrintable(cv->status()));

  // A KV eviction lane needs the engine's own cache: refused by name, nothing sent.
  cv->setLaneSettings(1, QStringLiteral(R"({"temperature": 0, "kv_policy": {"policy": "sink", "budget": 8}})"));
  QSignalSpy failed(cv, &gbui::CompareView::finished);
  const size_t before = b->sessionModel()->requests().size();
  cv->run();
  QVERIFY(failed.wait(10000));
  QVERIFY(cv->resultJson().isEmpty());
  QVERIFY2(cv->status().contains(QStringLiteral("Lane %1").arg(cv->laneName(1))), qPrintable(cv->status()));
  QVERIFY2(cv->status().contains(QStringLiteral("eviction")), qPrintable(cv->status()));
  QCOMPARE(b->sessionModel()->requests().size(), before);
  serve->setServing(false);
}

void UiRemoteTest::unreachableServerFailsTheConnect() {
  QTemporaryDir dir;
  auto w = gbuitest::makeWindow(dir);
  QSignalSpy failed(w.get(), &gbui::MainWindow::loadFailed);
  w->connectToServer(QStringLiteral("http://127.0.0.1:1/v1"), QString());
  QVERIFY(failed.wait(30000));
  QVERIFY2(failed.first().first().toString().contains("cannot connect"), qPrintable(failed.first().first().toString()));
  QVERIFY(!w->sessionModel()->hasModel());
}

GB_QTEST_MAIN(UiRemoteTest);
#include "ui_remote_test.moc"
