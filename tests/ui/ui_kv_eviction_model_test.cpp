// KV eviction end to end in the workbench, on stories260K: the sampling
// panel's policy (sink B=32) goes with the chat's request to the engine, whose
// kv_eviction events come back through the bridge into the session model; the
// chat strikes through exactly the answer tokens the events name, which for a
// sink policy are the positions between the 4 sinks and the 28 most recent
// (written out here from the policy's definition); the KV panel's strip keeps
// the engine's num_kept positions; the policy is autosaved and restored; a
// policy the codec refuses never reaches the engine.
#include <QApplication>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTabWidget>
#include <qcustomplot.h>

#include "gb_qtest_main.h"
#include "chat/token_view.h"
#include "panels/kv_cache_panel.h"
#include "panels/kv_eviction_view.h"
#include "panels/kv_policy_settings.h"
#include "widgets/kv_strip_widget.h"
#include "ui_test_support.h"

using namespace gbuitest;

class UiKvEvictionModelTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    QVERIFY(dir_.isValid());
  }

  void sinkPolicyStrikesTheMiddleOfTheAnswer() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    gbui::KvPolicyChoice sink;
    sink.policy = QStringLiteral("sink");
    sink.budget = 32;
    QCOMPARE(window->sampling()->kvPolicy()->setChoice(sink), QString());
    constexpr int kTokens = 120;
    QVERIFY(generate(*window, QStringLiteral("Once upon a time"), kTokens));
    const gbui::RequestKey key = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* r = window->sessionModel()->request(key);
    QVERIFY(r != nullptr);
    QCOMPARE(static_cast<int>(r->tokens.size()), kTokens);
    const gbui::KvEvictionLog* log = window->sessionModel()->evictionLog(key);
    QVERIFY(log != nullptr);
    QCOMPARE(log->policy(), QStringLiteral("sink B=32 S=4 R=28"));
    QCOMPARE(log->reason(), QStringLiteral("outside the recent window"));
    QCOMPARE(log->numKept(), 32);
    // Sink keeps positions 0..3 and the 28 most recent of those computed when
    // it last evicted; every position in between went.
    const int numPrompt = static_cast<int>(r->promptIds.size());
    const int computed = numPrompt + kTokens - 1;
    // The last step computed position computed - 1 and kept it with the 27
    // before it: 28 recent positions.
    const int lastEvicted = computed - 29;
    QCOMPARE(log->lastEvictedPosition(), lastEvicted);
    for (int p = 0; p < computed; ++p) QCOMPARE(log->isEvicted(p), p >= 4 && p <= lastEvicted);

    // The chat: exactly the answer tokens at evicted positions are struck through.
    gbui::TokenView* view = window->chat()->view();
    QCOMPARE(view->numTokenSpans(), kTokens);
    int numStruck = 0;
    for (int i = 0; i < kTokens; ++i) {
      const bool evicted = numPrompt + i <= lastEvicted;
      QCOMPARE(view->spanEvicted(i), evicted);
      numStruck += evicted;
      if (evicted)
        QVERIFY(view->tooltipFor(*view->spanToken(i)).contains(QStringLiteral("by sink B=32 S=4 R=28: outside the recent window")));
    }
    QCOMPARE(numStruck, lastEvicted - numPrompt + 1);

    // The KV panel shows this request: the 32 positions kept of those computed.
    auto* kv = qobject_cast<gbui::KvCachePanel*>(window->panel("kv"));
    QVERIFY(kv != nullptr);
    QCOMPARE(kv->eviction()->shownRequest(), key);
    QVERIFY(kv->evictionTabShown());
    const auto& strips = kv->eviction()->strips()->strips();
    QCOMPARE(strips.size(), 1);  // no window group in stories260K
    QCOMPARE(strips[0].cells.size(), computed);
    QCOMPARE(strips[0].numKept(), 32);

    // Autosaved with the session, restored by a new window.
    QSignalSpy saved(window.get(), &gbui::MainWindow::sessionSaved);
    window->autosaveSoon();
    QVERIFY(saved.wait(5000));
    window.reset();
    QFile file(dir_.filePath("session.json"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QJsonObject kvPolicy = QJsonDocument::fromJson(file.readAll()).object().value("kv_policy").toObject();
    QCOMPARE(kvPolicy.value("policy").toString(), QStringLiteral("sink"));
    QCOMPARE(kvPolicy.value("budget").toInt(), 32);
    auto restored = makeWindow(dir_);
    QCOMPARE(restored->sampling()->kvPolicy()->choice().resolved, QStringLiteral("sink B=32 S=4 R=28"));
  }

  // h2o with a full-cache shadow: its KL per token streams into the KV
  // panel's plot, one point per kv_shadow event and a cross per top-1
  // disagreement; the shadow is the engine's own request, not a chat branch.
  void shadowKlReachesThePlot() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    gbui::KvPolicyChoice h2o;
    h2o.policy = QStringLiteral("h2o");
    h2o.budget = 24;
    h2o.shadow = true;
    QCOMPARE(window->sampling()->kvPolicy()->setChoice(h2o), QString());
    constexpr int kTokens = 80;
    QVERIFY(generate(*window, QStringLiteral("Once upon a time"), kTokens));
    // The shadow's last events may follow its request's finish.
    QTest::qWait(200);
    const gbui::RequestKey key = window->chat()->conversation().turns.back().currentRequest();
    const gbui::KvEvictionLog* log = window->sessionModel()->evictionLog(key);
    QVERIFY(log != nullptr);
    QCOMPARE(log->policy(), QStringLiteral("h2o B=24 S=0 R=12"));
    QVERIFY(log->numEvicted() > 0);
    QVERIFY2(log->shadow().size() >= static_cast<size_t>(kTokens / 2),
             qPrintable(QStringLiteral("%1 shadow points").arg(log->shadow().size())));
    int disagreements = 0;
    for (const gbui::KvShadowPoint& p : log->shadow()) {
      QVERIFY(p.kl >= -1e-6f);
      disagreements += !p.top1Agree;
    }
    auto* kv = qobject_cast<gbui::KvCachePanel*>(window->panel("kv"));
    QCOMPARE(kv->eviction()->shownRequest(), key);
    QCOMPARE(kv->eviction()->klPlot()->graph(0)->dataCount(), static_cast<int>(log->shadow().size()));
    QCOMPARE(kv->eviction()->klPlot()->graph(1)->dataCount(), disagreements);
    // h2o ranks by attention mass: the strip carries the snapshot's masses.
    QVERIFY(!kv->eviction()->strips()->strips()[0].mass.isEmpty());
    int numShadows = 0;
    for (const auto& [k, r] : window->sessionModel()->requests()) numShadows += r.internal;
    QCOMPARE(numShadows, 1);
    QCOMPARE(window->chat()->conversation().turns.back().branches.size(), 1);
  }

  // The full policy sends no eviction: nothing is struck, no log.
  void fullPolicyEvictsNothing() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    QCOMPARE(window->sampling()->kvPolicy()->setChoice(gbui::KvPolicyChoice{}), QString());
    QVERIFY(generate(*window, QStringLiteral("Once upon a time"), 60));
    QVERIFY(window->sessionModel()->evictionLogs().empty());
    for (int i = 0; i < window->chat()->view()->numTokenSpans(); ++i) QVERIFY(!window->chat()->view()->spanEvicted(i));
  }

 private:
  QTemporaryDir dir_;
};

GB_QTEST_MAIN(UiKvEvictionModelTest);
#include "ui_kv_eviction_model_test.moc"
