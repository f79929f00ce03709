// KV map and replay: the grid built from KV trace events agrees with the
// engine's own pool snapshot after every step; a branch shares its prefix
// blocks (refcount 2); an exported trace re-opens to the same panels.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QStandardPaths>

#include <QLabel>

#include "session/branch_tree.h"
#include "chat_bench.h"
#include "gb_qtest_main.h"
#include "bridge/engine_controller.h"
#include "panels/kv_cache_panel.h"
#include "widgets/kv_grid_widget.h"
#include <qcustomplot.h>
#include "panels/performance_panel.h"
#include "panels/token_inspector_panel.h"
#include "ui_test_support.h"
#include "../ui_threads/controller_commands.h"
#include "bridge/engine_probe.h"
#include "trace/trace_jsonl.h"
#include "model/synthetic_model.h"
#include <QLabel>

using namespace gbuitest;

class UiKvReplayTest : public QObject {
  Q_OBJECT
 private slots:
  // A saved branch tree (session file, trace header) names requests by whole
  // numbers; a node whose id is negative, fractional, too large or not a number
  // is skipped, and a bad parent or seed reads as none (found by fuzz_session:
  // converting -2.0 to an unsigned id was undefined behaviour).
  void restoredTreeSkipsNodesWithBadIds() {
    QJsonArray nodes;
    for (const QJsonValue& id : {QJsonValue(-2), QJsonValue(1e300), QJsonValue(3.5), QJsonValue("4"), QJsonValue(7)})
      nodes.append(QJsonObject{{"request", id}, {"parent", -1}, {"seed", 1e300}, {"token_ids", QJsonArray{5}},
                               {"token_texts", QJsonArray{"a"}}, {"token_probs", QJsonArray{0.5}}});
    const gbui::RestoredTree tree =
        gbui::branchTreeFromJson(QJsonObject{{"nodes", nodes}}, [](quint64 id) { return gbui::RequestKey{id} + 100; });
    QCOMPARE(tree.requests.size(), size_t{1});
    QCOMPARE(tree.requests[0].key, gbui::RequestKey{107});
    QVERIFY(!tree.requests[0].parent.has_value());
    QCOMPARE(tree.requests[0].seed, qint64{-1});
    QCOMPARE(tree.requests[0].tokens.size(), size_t{1});
  }

  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    qRegisterMetaType<gbui::UiEventBatch>();
    qRegisterMetaType<gbui::UiModelInfo>();
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
  }

  // Long sessions (code review U2): only the most recent tokens keep their
  // candidates; older ones are trimmed, keep everything the chat draws, and the
  // inspector says where the rest is.
  void oldTokensDropTheirCandidates() {
    gbui::SessionModel model;
    model.setDetailWindow(100);
    QCOMPARE(model.detailWindow(), 100);
    gbui::TokenInspectorPanel inspector(&model);
    quint64 seq = 1;
    for (int frame = 0; frame < 10; ++frame) {
      auto batch = std::make_shared<std::vector<gbui::UiEvent>>();
      for (int k = 0; k < 30; ++k) {
        const int index = frame * 30 + k;
        batch->push_back({seq++, index * 1000, gbui::syntheticToken(3, index, index, 0)});
        batch->push_back({seq++, index * 1000, gbui::syntheticToken(4, index, index, 0)});  // a second request interleaved
      }
      model.apply(batch);
      int kept = 0;
      for (gbui::RequestKey key : {gbui::RequestKey{3}, gbui::RequestKey{4}})
        for (const gbui::UiToken& t : model.request(key)->tokens) kept += t.top.isEmpty() ? 0 : 1;
      QCOMPARE(kept, std::min(100, (frame + 1) * 60));
    }
    for (gbui::RequestKey key : {gbui::RequestKey{3}, gbui::RequestKey{4}}) {
      const auto& tokens = model.request(key)->tokens;
      QCOMPARE(tokens.size(), size_t{300});
      for (size_t i = 0; i < tokens.size(); ++i) {
        const gbui::UiToken expected = gbui::syntheticToken(key, static_cast<int>(i), static_cast<double>(i), 0);
        QCOMPARE(tokens[i].detailTrimmed, i < 250);   // the last 50 of each request are the newest 100
        QCOMPARE(tokens[i].top.isEmpty(), i < 250);
        QCOMPARE(tokens[i].numAfterStage.isEmpty(), i < 250);  // the per-stage counts go with them
        QCOMPARE(tokens[i].text, expected.text);       // what the chat draws stays
        QCOMPARE(tokens[i].prob, expected.prob);
        if (i >= 250) QCOMPARE(tokens[i].top.size(), expected.top.size());
        if (i >= 250) QCOMPARE(tokens[i].numAfterStage, expected.numAfterStage);
      }
    }
    const auto inspectorSays = [&](const QString& words) {
      for (const QLabel* label : inspector.findChildren<QLabel*>())
        if (label->text().contains(words)) return true;
      return false;
    };
    // Tokens of one chain share one stage-name list and one active-stage vector.
    QVERIFY(model.token(3, 10)->stages.isSharedWith(model.token(4, 299)->stages));
    QVERIFY(model.token(3, 10)->stageActive.isSharedWith(model.token(4, 299)->stageActive));
    model.selectToken(3, 10);
    QVERIFY(inspectorSays("dropped from memory"));
    model.selectToken(3, 299);
    QVERIFY(!inspectorSays("dropped from memory"));
    // A smaller window trims at once; clear() forgets the queue.
    model.setDetailWindow(10);
    QVERIFY(model.token(3, 290)->detailTrimmed);
    QVERIFY(!model.token(4, 299)->detailTrimmed);
    model.clear();
    QVERIFY(model.request(3) == nullptr);
  }

  // Long sessions: the per-step series keep the last kStepHistory steps, the
  // totals count every step, and the KV chart keeps plotting (a window of the
  // newest steps) after the front of the series is let go.
  void stepHistoryIsBounded() {
    gbui::SessionModel model;
    gbui::KvCachePanel panel(&model);
    const qint64 n = static_cast<qint64>(gbui::SessionModel::kStepHistory) + 100;
    quint64 seq = 1;
    for (qint64 first = 0; first < n; first += 500) {
      auto batch = std::make_shared<std::vector<gbui::UiEvent>>();
      for (qint64 step = first; step < std::min(n, first + 500); ++step) {
        gbui::UiStep s;
        s.step = step;
        s.preemptions = step % 7 == 0 ? 1 : 0;
        s.total = 64;
        s.free = 64;
        batch->push_back({seq++, step * 1000, s});
      }
      model.apply(batch);
    }
    QCOMPARE(model.steps().size(), gbui::SessionModel::kStepHistory);
    QCOMPARE(model.stepHistory().dropped, qint64{100});
    QCOMPARE(model.stepHistory().total(), n);
    QCOMPARE(model.steps().front().step, qint64{100});
    QCOMPARE(model.steps().back().step, n - 1);
    QCOMPARE(model.totalPreemptions(), (n + 6) / 7);  // every step counted, dropped ones too
    QCPGraph* free = panel.plot()->graph(2);
    QVERIFY(!free->data()->isEmpty());
    QCOMPARE((free->data()->constEnd() - 1)->key, double(n - 1));
    QVERIFY(free->data()->size() <= 2001);  // the chart's window, not the whole run
    model.clear();
    QCOMPARE(model.stepHistory().total(), qint64{0});
  }

  void performanceChartsAreBounded() {
    // A long single chat: one step and one token per frame of events. The
    // charts keep their newest kMaxPoints points, the latest at the end.
    gbui::SessionModel model;
    gbui::PerformancePanel panel(&model);
    const int n = gbui::PerformancePanel::kMaxPoints + 2500;
    quint64 seq = 1;
    for (int first = 0; first < n; first += 500) {
      auto batch = std::make_shared<std::vector<gbui::UiEvent>>();
      for (int i = first; i < std::min(n, first + 500); ++i) {
        gbui::UiStep s;
        s.step = i;
        s.forwardMs = 1.0;
        batch->push_back({seq++, qint64{i} * 1000, s});
        batch->push_back({seq++, qint64{i} * 1000, gbui::syntheticToken(1, i, double(i), 0)});
      }
      panel.onBatch(batch);
    }
    QCOMPARE(panel.numLatencyPoints(), gbui::PerformancePanel::kMaxPoints);
    QCOMPARE(panel.numStepPoints(), gbui::PerformancePanel::kMaxPoints);
    const QCPGraph* latency = panel.latencyPlot()->graph(0);
    QCOMPARE((latency->data()->constEnd() - 1)->key, double(n - 1));
    QCOMPARE(latency->data()->constBegin()->key, double(n - gbui::PerformancePanel::kMaxPoints));
  }

  void gridMatchesEngineAfterEachStep() {
    // Controller on this thread, stepped by hand: a deterministic per-step check.
    gbui::EngineController controller;
    gbui::SessionModel model;
    gbui::KvGridWidget grid(&model);
    connect(&controller, &gbui::EngineController::eventsReady, &model, &gbui::SessionModel::apply);
    connect(&controller, &gbui::EngineController::modelLoaded, &model, &gbui::SessionModel::setModelInfo);
    controller.setPaused(true);
    controller.loadModel(gbuitest::loadCommand(storiesPath(), "cpu"));
    QVERIFY(model.hasModel());
    QCOMPARE(grid.numCells(), model.modelInfo().numBlocks);
    // Two requests with a shared 30-token prefix, the second after the first
    // committed its full blocks: prefix hits, cached blocks and frees all happen.
    const QString prefix = "Once upon a time there was a little girl named Lily. She liked to play in the park";
    controller.submit(gbuitest::completionCommand(1, prefix, kGreedyJson, 24));
    int steps = 0;
    bool second = false;
    while (controller.stepOnce()) {
      controller.flush();
      ++steps;
      const gbui::KvCounts k = model.kvCounts();
      const QString engine = gbui::EngineProbe(controller).kvSnapshotSummary();
      QCOMPARE(QStringLiteral("%1 %2 %3 %4").arg(k.owned).arg(k.free).arg(k.cached).arg(k.total), engine);
      QCOMPARE(grid.numCells(), k.total);
      // And the step event's own statistics agree.
      const gbui::UiStep& s = model.steps().back();
      QCOMPARE(s.owned, k.owned);
      QCOMPARE(s.cached, k.cached);
      QCOMPARE(s.free, k.free);
      if (!second && steps == 3) {
        controller.submit(gbuitest::completionCommand(2, prefix + " with her dog", kGreedyJson, 16));
        second = true;
      }
    }
    QVERIFY(steps > 20);
    QVERIFY(second);
    int hit = 0;
    for (const auto& [key, r] : model.requests()) hit += r.finish.numCachedTokens;
    QVERIFY2(hit >= 16, qPrintable(QString("prefix hit tokens %1").arg(hit)));
    // Every owned block's refcount equals the engine's.
    const QVector<int> refs = gbui::EngineProbe(controller).kvRefCounts();
    QCOMPARE(refs.size(), model.kvCells().size());
    for (int b = 0; b < refs.size(); ++b) QCOMPARE(model.kvCells()[b].refCount, refs[b]);
  }

  // A model whose every layer slides (synth --arch mistral, window 8) gives
  // blocks back as it generates: the map built from the events marks exactly
  // the blocks the engine's snapshot marks, step by step.
  void slidingWindowReleasedBlocksMatchTheEngine() {
    const QString path = QDir(QDir::tempPath()).filePath(QStringLiteral("gb-ui-swa-mistral.gguf"));
    QVERIFY(gb::write_synthetic_arch_model(*gb::find_synthetic_arch("mistral"), 11, path.toStdString()).ok());
    gbui::EngineController controller;
    gbui::SessionModel model;
    connect(&controller, &gbui::EngineController::eventsReady, &model, &gbui::SessionModel::apply);
    connect(&controller, &gbui::EngineController::modelLoaded, &model, &gbui::SessionModel::setModelInfo);
    controller.setPaused(true);
    controller.loadModel(gbuitest::loadCommand(path, "cpu"));
    QVERIFY(model.hasModel());
    controller.submit(gbuitest::completionCommand(1, QStringLiteral("once upon a time"), kGreedyJson, 120));
    int steps = 0;
    while (controller.stepOnce()) {
      controller.flush();
      ++steps;
      const gbui::KvCounts k = model.kvCounts();
      QCOMPARE(QStringLiteral("%1 %2 %3 %4").arg(k.owned).arg(k.free).arg(k.cached).arg(k.total),
               gbui::EngineProbe(controller).kvSnapshotSummary());
      QCOMPARE(QStringLiteral("%1 %2").arg(k.windowReleased).arg(model.kvWindowReleasedTotal()),
               gbui::EngineProbe(controller).kvWindowSummary());
      // Between steps one request holds at most ceil((8 + 16 - 2) / 16) = 2 blocks.
      QVERIFY2(k.owned <= 2, qPrintable(QString::number(k.owned)));
    }
    QVERIFY(steps > 100);
    QVERIFY2(model.kvWindowReleasedTotal() >= 6, qPrintable(QString::number(model.kvWindowReleasedTotal())));
    // The finished answer is kept for branching: its table is the released
    // slots (-1, leading, keeping positions) then the blocks it still holds.
    QCOMPARE(static_cast<int>(model.requests().size()), 1);
    const QVector<int>& table = model.requests().begin()->second.blockTable;
    const auto firstLive = std::find_if(table.begin(), table.end(), [](int b) { return b >= 0; });
    QVERIFY(firstLive - table.begin() >= 6);
    QVERIFY(std::all_of(firstLive, table.end(), [](int b) { return b >= 0; }));
    QCOMPARE(static_cast<int>(table.end() - firstLive), model.kvCounts().owned);
    gbui::KvCachePanel panel(&model);
    QVERIFY(panel.findChild<QLabel*>(QStringLiteral("kvStats"))->text().contains(QStringLiteral("sliding window")));
  }

  void branchSharesBlocksWithRefcountTwo() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    QVERIFY(generate(*window, "Once upon a time", 30));
    const gbui::RequestKey parent = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* p = window->sessionModel()->request(parent);
    QVERIFY(p && p->tokens.size() == 30);
    // Branch before generated token 20 with its second candidate.
    window->sessionModel()->selectToken(parent, 20);
    const int alternative = window->sessionModel()->token(parent, 20)->top[1].id;
    window->inspector()->branchFromRow(1);
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->conversation().turns.back().branches.size() == 2; }, 10000));
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->activeRequest() == 0; }, 30000));
    const gbui::RequestKey child = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* c = window->sessionModel()->request(child);
    QVERIFY(c && c->parent && *c->parent == parent);
    QCOMPARE(c->forkPosition, static_cast<int>(p->promptIds.size()) + 20);
    QVERIFY(!c->tokens.empty());
    QCOMPARE(c->tokens.front().tokenId, alternative);
    // The chat shows the parent's first 20 tokens, then the branch.
    const gbui::TokenSeq shown = window->chat()->displayedTokens(child);
    QCOMPARE(static_cast<int>(shown.size()), 20 + static_cast<int>(c->tokens.size()));
    for (int i = 0; i < 20; ++i) QCOMPARE(shown[static_cast<size_t>(i)].tokenId, p->tokens[static_cast<size_t>(i)].tokenId);
    // Full blocks before the fork point are shared, not copied: refcount 2.
    QVector<int> shared;
    for (int b : c->blockTable)
      if (p->blockTable.contains(b)) shared.push_back(b);
    const int fullBlocks = c->forkPosition / window->sessionModel()->blockSize();
    QCOMPARE(static_cast<int>(shared.size()), fullBlocks);
    QVector<int> engineRefs;
    QMetaObject::invokeMethod(window->controller(), [&] { engineRefs = gbui::EngineProbe(*window->controller()).kvRefCounts(); },
                              Qt::BlockingQueuedConnection);
    for (int b : shared) {
      QCOMPARE(window->sessionModel()->kvCells()[b].refCount, 2);
      QCOMPARE(engineRefs[b], 2);
    }
    // Branch navigation: back to the first answer and forth again.
    window->chat()->showBranch(-1);
    QCOMPARE(window->chat()->conversation().turns.back().currentRequest(), parent);
    window->chat()->showBranch(1);
    QCOMPARE(window->chat()->conversation().turns.back().currentRequest(), child);
  }

  void exportThenOpenReplaysSamePanels() {
    QTemporaryDir dir;
    auto live = makeWindow(dir);
    QVERIFY(loadStories(*live));
    QCOMPARE(live->sampling()->setSettingsJson(R"({"temperature":0.9,"seed":5})"), QString());
    QVERIFY(generate(*live, "Once upon a time", 25));
    const QString path = dir.filePath("run.jsonl");
    QSignalSpy exported(live.get(), &gbui::MainWindow::exported);
    live->exportTrace(path, "jsonl");
    QVERIFY(exported.wait(10000));
    QCOMPARE(exported.front().at(1).toString(), QString());

    QTemporaryDir dir2;
    auto replay = makeWindow(dir2);
    QSignalSpy opened(replay.get(), &gbui::MainWindow::traceReady);
    replay->openTrace(path);
    QVERIFY(opened.wait(10000));
    gbui::SessionModel* a = live->sessionModel();
    gbui::SessionModel* b = replay->sessionModel();
    QVERIFY(b->isReplay());
    QCOMPARE(b->requests().size(), a->requests().size());
    for (const auto& [key, ra] : a->requests()) {
      const gbui::RequestInfo* rb = b->request(key);
      QVERIFY(rb);
      QCOMPARE(rb->promptIds, ra.promptIds);
      QCOMPARE(rb->tokens.size(), ra.tokens.size());
      for (size_t i = 0; i < ra.tokens.size(); ++i) {
        QCOMPARE(rb->tokens[i].tokenId, ra.tokens[i].tokenId);
        QCOMPARE(rb->tokens[i].text, ra.tokens[i].text);
        QCOMPARE(rb->tokens[i].prob, ra.tokens[i].prob);
        QCOMPARE(rb->tokens[i].top.size(), ra.tokens[i].top.size());
        for (qsizetype j = 0; j < ra.tokens[i].top.size(); ++j) {
          QCOMPARE(rb->tokens[i].top[j].id, ra.tokens[i].top[j].id);
          QCOMPARE(rb->tokens[i].top[j].text, ra.tokens[i].top[j].text);
          QCOMPARE(rb->tokens[i].top[j].probAfter, ra.tokens[i].top[j].probAfter);
        }
      }
      QCOMPARE(rb->blockTable, ra.blockTable);
    }
    QCOMPARE(b->steps().size(), a->steps().size());
    QCOMPARE(b->kvCells().size(), a->kvCells().size());
    const gbui::KvCounts ka = a->kvCounts(), kb = b->kvCounts();
    QCOMPARE(kb.owned, ka.owned);
    QCOMPARE(kb.cached, ka.cached);
    QCOMPARE(kb.free, ka.free);
    QCOMPARE(replay->chat()->view()->tokenText(), live->chat()->view()->tokenText());
    QCOMPARE(replay->performance()->numLatencyPoints(), live->performance()->numLatencyPoints());
    QCOMPARE(replay->kvCache()->grid()->numCells(), live->kvCache()->grid()->numCells());
  }

  void sessionTraceIsWrittenAsItHappensAndACutOneOpens() {
    // The session's events go to a spool file as they happen (no export), and
    // are on disk once the engine is idle.
    QTemporaryDir dir;
    auto live = makeWindow(dir);
    QVERIFY(loadStories(*live));
    QVERIFY(generate(*live, "Once upon a time", 20));
    const QDir spools(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/traces");
    const QStringList files = spools.entryList({"session-*.jsonl"}, QDir::Files, QDir::Time);
    QVERIFY(!files.isEmpty());
    const std::string spool = QFile::encodeName(spools.filePath(files.front())).toStdString();
    auto file = gb::read_trace_jsonl(spool);
    QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
    QVERIFY(file->warnings.empty());
    int finished = 0, tokens = 0;
    for (const gb::TraceEvent& e : file->events) {
      finished += std::holds_alternative<gb::RequestFinishedEvent>(e.body);
      tokens += std::holds_alternative<gb::TokenSampledEvent>(e.body);
    }
    QCOMPARE(finished, 1);
    QCOMPARE(tokens, static_cast<int>(live->sessionModel()->requests().begin()->second.tokens.size()));

    // What a crash mid-write leaves (a last line cut short) opens, minus that
    // line, and the model panel says so.
    QFile in(QString::fromStdString(spool));
    QVERIFY(in.open(QIODevice::ReadOnly));
    const QByteArray text = in.readAll();
    const QString cut = dir.filePath("cut.jsonl");
    QFile out(cut);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(text.left(text.size() - 30));
    out.close();
    QTemporaryDir dir2;
    auto replay = makeWindow(dir2);
    QSignalSpy opened(replay.get(), &gbui::MainWindow::traceReady);
    replay->openTrace(cut);
    QVERIFY(opened.wait(10000));
    bool warned = false;
    for (const auto& [key, value] : replay->sessionModel()->modelInfo().metadata)
      warned |= key == "warning" && value.contains("the last line is incomplete");
    QVERIFY(warned);
  }
};

GB_QTEST_MAIN(UiKvReplayTest);
#include "ui_kv_replay_test.moc"
