// The Compare view and the Branches panel against the real engine on
// stories260K (offscreen): lanes are added, duplicated and removed; a run
// streams each lane into its column and the columns equal the engine's result
// JSON; a duplicated lane matches its source token for token (CRN); the summary
// table and the distribution bars show the engine's numbers and the drawn
// token; the prompt's KV blocks are shared by every sample and all return when
// released; exports write JSON, CSV and PNG. The Branches panel draws a fork
// under its parent with the alternative's probability and shared blocks,
// switches the chat to a branch, and releasing a branch frees its blocks. The
// Score view shows the engine's teacher-forced log-probabilities as a heatmap,
// KL 0 against the same model as base, and refuses another vocabulary.
#include <QApplication>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTreeWidget>
#include <map>

#include "gb_qtest_main.h"
#include "panels/branches_panel.h"
#include "panels/compare_view.h"
#include "widgets/distribution_bars.h"
#include "backend/backend.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/make_backend.h"
#include "runtime/text_scorer.h"
#include "tokenizer/tokenizer.h"
#include "panels/score_view.h"
#include "bridge/engine_controller.h"
#include "panels/token_inspector_panel.h"
#include "ui_test_support.h"
#include "../ui_threads/controller_commands.h"
#include "bridge/engine_probe.h"

using namespace gbuitest;

namespace {

QJsonArray idsOf(const gbui::SessionModel& model, gbui::RequestKey request) {
  QJsonArray out;
  if (const gbui::RequestInfo* r = model.request(request))
    for (const gbui::UiToken& t : r->tokens) out.append(t.tokenId);
  return out;
}

int ownedBlocks(gbui::MainWindow& window) {
  QString summary;
  QMetaObject::invokeMethod(window.controller(), [&] { summary = gbui::EngineProbe(*window.controller()).kvSnapshotSummary(); },
                            Qt::BlockingQueuedConnection);
  return summary.section(QLatin1Char(' '), 0, 0).toInt();
}

}  // namespace

class UiCompareTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    qRegisterMetaType<gbui::UiEventBatch>();
    qRegisterMetaType<gbui::UiModelInfo>();
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
  }

  void aLaneTheCodecRefusesIsReportedAndNothingRuns() {
    // Lanes are parsed once, by the settings codec, in the view: a lane whose
    // settings do not validate never reaches the engine.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    gbui::CompareView* cv = window->compareView();
    cv->setLaneSettings(1, QStringLiteral(R"({"temperature": -3})"));
    QSignalSpy requested(cv, &gbui::CompareView::runRequested);
    QSignalSpy started(window->controller(), &gbui::EngineController::comparisonStarted);
    cv->run();
    QCOMPARE(requested.count(), 0);
    QVERIFY2(cv->status().startsWith(QStringLiteral("Lane %1: ").arg(cv->laneName(1))), qPrintable(cv->status()));
    QVERIFY2(cv->status().contains(QStringLiteral("temperature")), qPrintable(cv->status()));
    QTest::qWait(100);
    QCOMPARE(started.count(), 0);
    // Fixed, it runs.
    cv->setLaneSettings(1, gbui::CompareView::presetJson(QStringLiteral("greedy")));
    cv->setMaxTokens(4);
    cv->setSamples(1);
    QSignalSpy done(cv, &gbui::CompareView::finished);
    cv->run();
    QCOMPARE(requested.count(), 1);
    QVERIFY(done.wait(60000));
    QVERIFY2(!cv->resultJson().isEmpty(), qPrintable(cv->status()));
  }

  void kvPolicyLanesRunBesideTheFullLane() {
    // A lane's JSON may name a KV eviction policy: the label under it shows the
    // engine's resolved spelling (or the refusal), the run puts the pruned lane
    // beside the full one, and the summary and the JSON name each lane's policy.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    gbui::CompareView* cv = window->compareView();
    QCOMPARE(cv->laneCount(), 2);
    cv->setLaneSettings(0, gbui::CompareView::presetJson(QStringLiteral("greedy")));
    cv->setLaneSettings(1, QStringLiteral(R"({"temperature": 0, "kv_policy": {"policy": "sink", "budget": 9}})"));
    cv->addLane(QStringLiteral("h2o"), gbui::CompareView::presetJson(QStringLiteral("h2o B=256")));
    auto* kv1 = cv->findChild<QLabel*>(QStringLiteral("compareLane2Kv"));
    QVERIFY(kv1);
    QVERIFY2(kv1->text().contains(QStringLiteral("sink B=9 S=4 R=5")), qPrintable(kv1->text()));
    // A policy the engine refuses: shown under the lane, and the run stops in the view.
    cv->setLaneSettings(1, QStringLiteral(R"({"temperature": 0, "kv_policy": {"policy": "sink"}})"));
    QVERIFY2(kv1->text().contains(QStringLiteral("budget")), qPrintable(kv1->text()));
    QSignalSpy requested(cv, &gbui::CompareView::runRequested);
    cv->run();
    QCOMPARE(requested.count(), 0);
    QVERIFY2(cv->status().startsWith(QStringLiteral("Lane %1: ").arg(cv->laneName(1))), qPrintable(cv->status()));
    cv->setLaneSettings(1, QStringLiteral(R"({"temperature": 0, "kv_policy": {"policy": "sink", "budget": 9}})"));

    cv->setPrompt("Once upon a time, there was a little girl named Lily. She loved to play");
    cv->setSamples(1);
    cv->setMaxTokens(40);
    QSignalSpy done(cv, &gbui::CompareView::finished);
    cv->run();
    QVERIFY(done.wait(60000));
    QVERIFY2(!cv->resultJson().isEmpty(), qPrintable(cv->status()));
    const QJsonArray lanes = QJsonDocument::fromJson(cv->resultJson().toUtf8()).object().value("lanes").toArray();
    QCOMPARE(lanes.size(), 3);
    QCOMPARE(lanes[0].toObject().value("kv_policy").toString(), QStringLiteral("full"));
    QCOMPARE(lanes[1].toObject().value("kv_policy").toObject().value("policy").toString(), QStringLiteral("sink"));
    QCOMPARE(lanes[1].toObject().value("kv_policy").toObject().value("budget").toInt(), 9);
    // B=256 holds this whole run: greedy-identical to the full lane.
    const auto ids = [&](int lane) { return lanes[lane].toObject().value("samples").toArray()[0].toObject().value("token_ids"); };
    QCOMPARE(ids(2), ids(0));
    QVERIFY(lanes[2].toObject().value("samples").toArray()[0].toObject().value("first_divergence").isNull());
    // The pruned lane evicted while it ran: the chat model saw its evictions.
    QVERIFY(QTest::qWaitFor([&] { return window->sessionModel()->evictionLog(cv->requestOf(1, 0)) != nullptr; }, 10000));
    QVERIFY(window->sessionModel()->evictionLog(cv->requestOf(0, 0)) == nullptr);
    // Its column strikes the answer tokens its cache let go (the full lane's none).
    cv->setShownSample(0);
    auto* pruned = cv->findChild<QTextBrowser*>(QStringLiteral("compareLane2Output"));
    auto* full = cv->findChild<QTextBrowser*>(QStringLiteral("compareLane1Output"));
    QVERIFY(pruned && full);
    QVERIFY(QTest::qWaitFor([&] { return pruned->toHtml().contains(QStringLiteral("line-through")); }, 10000));
    QVERIFY(!full->toHtml().contains(QStringLiteral("line-through")));
    QTableWidget* table = cv->summaryTable();
    QCOMPARE(table->item(0, 1)->text(), QStringLiteral("full"));
    QCOMPARE(table->item(1, 1)->text(), QStringLiteral("sink B=9"));
    QCOMPARE(table->item(2, 1)->text(), QStringLiteral("h2o B=256"));
  }

  void compareViewRunsLanesSideBySide() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    gbui::CompareView* cv = window->compareView();
    QVERIFY(window->panel("compare") == cv);
    QCOMPARE(cv->laneCount(), 2);
    cv->duplicateLane(0);
    QCOMPARE(cv->laneCount(), 3);
    QCOMPARE(cv->laneName(1), QStringLiteral("A copy"));
    QCOMPARE(cv->laneSettings(1), cv->laneSettings(0));
    cv->addLane("greedy", gbui::CompareView::presetJson("greedy"));
    QCOMPARE(cv->laneCount(), 4);
    QCOMPARE(cv->laneName(3), QStringLiteral("greedy"));
    cv->removeLane(2);  // B
    QCOMPARE(cv->laneCount(), 3);
    QCOMPARE(cv->laneName(2), QStringLiteral("greedy"));

    cv->setPrompt("Once upon a time, there was a little girl named Lily. She loved to play");
    cv->setSamples(2);
    cv->setSeed(5);
    cv->setCrn(true);
    cv->setMaxTokens(20);
    QSignalSpy done(cv, &gbui::CompareView::finished);
    // The most owners each block had at once, from the KV events as they arrive.
    std::map<int, int> maxRefsOf;
    connect(window->sessionModel(), &gbui::SessionModel::batchApplied, this, [&](const gbui::UiEventBatch& batch) {
      for (const gbui::UiEvent& e : *batch)
        if (const auto* kv = std::get_if<gbui::UiKv>(&e.body)) maxRefsOf[kv->block] = std::max(maxRefsOf[kv->block], kv->refCount);
    });
    cv->run();
    QVERIFY(done.wait(60000));
    QVERIFY2(!cv->resultJson().isEmpty(), qPrintable(cv->status()));
    QCOMPARE(cv->requests().size(), 6);
    QVERIFY(QTest::qWaitFor([&] {
      const gbui::RequestInfo* r = window->sessionModel()->request(cv->requestOf(2, 1));
      return r && r->finished;
    }, 10000));
    cv->setShownSample(0);

    const QJsonObject root = QJsonDocument::fromJson(cv->resultJson().toUtf8()).object();
    const QJsonArray lanes = root.value("lanes").toArray();
    QCOMPARE(lanes.size(), 3);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        const QJsonObject s = lanes[i].toObject().value("samples").toArray()[j].toObject();
        // What streamed into the UI is what the engine reports.
        QCOMPARE(idsOf(*window->sessionModel(), cv->requestOf(i, j)), s.value("token_ids").toArray());
        if (i == 1) QVERIFY(s.value("first_divergence").isNull());  // the duplicate
      }
    QVERIFY(!cv->columnText(0).isEmpty());
    QCOMPARE(cv->columnText(1), cv->columnText(0));

    // Summary table: one row per lane with the engine's numbers.
    QTableWidget* table = cv->summaryTable();
    QCOMPARE(table->rowCount(), 3);
    QCOMPARE(table->item(2, 0)->text(), QStringLiteral("greedy"));
    const double lp = lanes[2].toObject().value("summary").toObject().value("mean_logprob").toDouble();
    QCOMPARE(table->item(2, 1)->text(), QStringLiteral("full"));
    QCOMPARE(table->item(2, 2)->text(), QString::number(lp, 'f', 3));

    // Distribution bars at position 4: the drawn token is marked in every lane.
    cv->setPosition(4);
    const QVector<gbui::LaneDistribution>& bars = cv->bars()->distributions();
    QCOMPARE(bars.size(), 3);
    for (int i = 0; i < 3; ++i) {
      QVERIFY(bars[i].present);
      const std::optional<gbui::UiToken> t = window->sessionModel()->token(cv->requestOf(i, 0), 4);
      QVERIFY(t);
      QVERIFY(bars[i].drawn >= 0);
      QCOMPARE(bars[i].texts[bars[i].drawn], window->sessionModel()->tokenText(t->tokenId));
      float sum = 0;
      for (float p : bars[i].probs) sum += p;
      QVERIFY(sum <= 1.0001f);
    }
    QCOMPARE(bars[2].probs[bars[2].drawn], 1.0f);  // greedy keeps only the argmax

    // The prompt's full blocks are held by the prompt request and all 6 samples.
    const int shared = root.value("kv").toObject().value("num_prompt_blocks_shared").toInt();
    QVERIFY(shared >= 1);
    const int block = root.value("kv").toObject().value("shared_prompt_blocks").toArray()[0].toInt();
    // The KV events showed it held by 7 tables at once (the samples have freed
    // their own blocks since; the prompt keeps its blocks until released).
    QCOMPARE(maxRefsOf[block], 7);
    QCOMPARE(window->sessionModel()->kvCells()[block].refCount, 1);

    // Exports.
    QCOMPARE(cv->exportJson(dir.filePath("c.json")), QString());
    QCOMPARE(cv->exportCsv(dir.filePath("c.csv")), QString());
    QCOMPARE(cv->exportPng(dir.filePath("c.png")), QString());
    QFile csv(dir.filePath("c.csv"));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    QCOMPARE(csv.readAll().count('\n'), 7);
    QVERIFY(!QImage(dir.filePath("c.png")).isNull());
    QFile json(dir.filePath("c.json"));
    QVERIFY(json.open(QIODevice::ReadOnly));
    QCOMPARE(QJsonDocument::fromJson(json.readAll()).object().value("lanes").toArray().size(), 3);

    // Releasing the comparison returns every block.
    QVERIFY(ownedBlocks(*window) > 0);
    QPushButton* release = nullptr;
    for (QPushButton* b : cv->findChildren<QPushButton*>())
      if (b->text() == QStringLiteral("Release KV")) release = b;
    QVERIFY(release);
    release->click();
    QVERIFY(QTest::qWaitFor([&] { return ownedBlocks(*window) == 0; }, 10000));
  }

  void branchesPanelShowsTreeSwitchesAndReleases() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    QVERIFY(generate(*window, "Once upon a time", 30));
    const gbui::RequestKey parent = window->chat()->conversation().turns.back().currentRequest();
    window->sessionModel()->selectToken(parent, 20);
    const float altProb = window->sessionModel()->token(parent, 20)->top[1].probBefore;
    window->inspector()->branchFromRow(1);
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->conversation().turns.back().branches.size() == 2; }, 10000));
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->activeRequest() == 0; }, 30000));
    const gbui::RequestKey child = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* c = window->sessionModel()->request(child);
    QVERIFY(c);
    // Each block once in the child's table (a fork's copy-on-write is not counted twice).
    QCOMPARE(QSet<int>(c->blockTable.begin(), c->blockTable.end()).size(), c->blockTable.size());

    gbui::BranchesPanel* panel = window->branchesPanel();
    QVERIFY(window->panel("branches") == panel);
    panel->rebuild();
    QTreeWidgetItem* childItem = panel->itemOf(child);
    QVERIFY(childItem && childItem->parent() == panel->itemOf(parent));
    const int fullBlocks = c->forkPosition / window->sessionModel()->blockSize();
    QCOMPARE(panel->sharedBlocks(child), fullBlocks);
    QVERIFY(childItem->text(4).startsWith(QString::number(fullBlocks) + " / "));
    QCOMPARE(panel->forkProbability(child), static_cast<double>(altProb));
    QCOMPARE(childItem->text(2), QString::number(static_cast<double>(altProb), 'f', 3));

    // Switching back to the first answer through the panel.
    emit panel->branchActivated(parent);
    QCOMPARE(window->chat()->conversation().turns.back().currentRequest(), parent);

    // Releasing the branch frees its private blocks; the shared ones stay with the parent.
    const int before = ownedBlocks(*window);
    const int privateBlocks = static_cast<int>(c->blockTable.size()) - fullBlocks;
    panel->selectRequest(child);
    emit panel->releaseRequested(child);
    QVERIFY(QTest::qWaitFor([&] { return window->sessionModel()->request(child)->blockTable.isEmpty(); }, 10000));
    QCOMPARE(ownedBlocks(*window), before - privateBlocks);
    panel->rebuild();
    QVERIFY(panel->itemOf(child)->text(5).contains("released"));
  }

  void scoreViewShowsTheEnginesScores() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    gbui::ScoreView* sv = window->scoreView();
    QVERIFY(window->panel("score") == sv);
    const QString text = QStringLiteral("Tom had a red ball. He liked to play with it every day.");
    sv->setText(text);
    sv->setBasePath(storiesPath());  // the same model as base: KL must be 0
    QSignalSpy done(sv, &gbui::ScoreView::finished);
    sv->score();
    QVERIFY(done.wait(30000));
    QVERIFY2(!sv->resultJson().isEmpty(), qPrintable(sv->summary()));
    // Reference: the engine's scorer run here on a one-thread backend.
    gb::LoadOptions options;
    options.context_length = 512;
    auto model = gb::load_model(storiesPath().toStdString(), options);
    QVERIFY(model.ok());
    auto tok = gb::load_tokenizer(**model, "");
    QVERIFY(tok.ok());
    auto backend = gb::make_backend(*model, {gb::Device::Cpu, 1});
    QVERIFY(backend.ok());
    gb::ScoreOptions scoreOptions;  // the engine's KV types, as the view scores
    scoreOptions.k_type = scoreOptions.v_type = gb::EngineConfig{}.kv_types.k;
    auto ref = gb::score_tokens(**model, **backend, nullptr, nullptr, (*tok)->encode(text.toStdString(), true),
                                scoreOptions);
    QVERIFY(ref.ok());
    const QJsonObject root = QJsonDocument::fromJson(sv->resultJson().toUtf8()).object();
    const QJsonArray tokens = root.value("tokens").toArray();
    QCOMPARE(sv->numTokens(), static_cast<int>(ref->tokens.size()));
    sv->setMode("logprob");
    for (int k = 0; k < tokens.size(); ++k) {
      const double lp = tokens[k].toObject().value("logprob").toDouble();
      QVERIFY(std::abs(lp - ref->tokens[static_cast<size_t>(k)].logprob) < 1e-4);
      QVERIFY(std::abs(sv->heat(k) - (1.0 - std::exp(lp))) < 1e-12);
      QCOMPARE(tokens[k].toObject().value("kl").toDouble(), 0.0);
    }
    QCOMPARE(root.value("top1_agreement").toDouble(), 1.0);
    sv->setMode("kl");
    for (int k = 0; k < tokens.size(); ++k) QCOMPARE(sv->heat(k), 0.0);
    sv->showDetails(2);
    QVERIFY(sv->details().contains("rank"));

    // Another vocabulary: the engine's message, nothing scored.
    sv->setBasePath(sharedFile("models/llama-2-tiny-random/llama-2-tiny-random.gguf"));
    sv->score();
    QVERIFY(done.wait(30000));
    QVERIFY(sv->resultJson().isEmpty());
    QVERIFY2(sv->summary().contains("cannot compare"), qPrintable(sv->summary()));
  }
};

GB_QTEST_MAIN(UiCompareTest);
#include "ui_compare_test.moc"
