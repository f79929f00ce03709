// The Inside panel against the real engine on stories260K (offscreen): a
// token clicked in the chat is inspected on its request's sequence (prompt +
// generated ids) at its position; the report is the engine's JSON; the strip
// highlights the argmax of the picked head's row (computed here from the JSON
// on its own), also for the mean over a KV group; the sink-mass sort orders
// each layer's heads by the JSON's sink masses; export writes the report; a
// position past the sequence shows the engine's error instead of a report.
#include <QApplication>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QDockWidget>
#include <QTableWidget>
#include <algorithm>
#include <qcustomplot.h>

#include "gb_qtest_main.h"
#include "panels/inside_attention_view.h"
#include "panels/inside_panel.h"
#include "panels/kv_policy_settings.h"
#include "panels/sampling_panel.h"
#include "chat/chat_panel.h"
#include "chat/prompt_view.h"
#include "panels/score_view.h"
#include "ui_test_support.h"

using namespace gbuitest;

namespace {

// Index of the largest weight of a JSON row (the first of equal ones).
int jsonArgmax(const QJsonArray& row) {
  int best = -1;
  double bestW = -1.0;
  for (int i = 0; i < row.size(); ++i)
    if (row[i].toDouble() > bestW) bestW = row[i].toDouble(), best = i;
  return best;
}

// The Inside panel's dock raised, once it shows (null if it does not).
gbui::InsidePanel* showInside(gbui::MainWindow& window) {
  auto* panel = window.panelAs<gbui::InsidePanel>("inside");
  qobject_cast<QDockWidget*>(panel->parentWidget())->raise();
  return QTest::qWaitFor([&] { return panel->isVisible(); }, 5000) ? panel : nullptr;
}

bool waitReport(gbui::InsidePanel& panel) {
  return QTest::qWaitFor([&] { return !panel.waiting(); }, 60000);
}

}  // namespace

class UiInsideTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    qRegisterMetaType<gbui::UiEventBatch>();
    qRegisterMetaType<gbui::UiModelInfo>();
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
  }

  void aChatTokenIsInspectedAndDrawn() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QVERIFY(generate(*window, QStringLiteral("Once upon a time, there was a little"), 6));
    const gbui::RequestKey request = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* info = window->sessionModel()->request(request);
    QVERIFY(info != nullptr);
    QVERIFY(info->tokens.size() >= 3);

    // Bring its tab to the front: with "Auto" a selection is inspected at once.
    gbui::InsidePanel* panel = showInside(*window);
    QVERIFY(panel != nullptr);

    // A click on the second generated token in the chat.
    const int index = 1;
    emit window->chat()->tokenClicked(request, index);
    QVERIFY2(panel->waiting(), qPrintable(panel->headerText()));
    QVERIFY(panel->headerText().contains(QStringLiteral("computing")));
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->errorText().isEmpty(), qPrintable(panel->errorText()));

    const QJsonObject root = QJsonDocument::fromJson(panel->reportJson().toUtf8()).object();
    QCOMPARE(root.value("schema").toString(), QStringLiteral("glassbox-inside-v1"));
    const int position = static_cast<int>(info->promptIds.size()) + index;
    QCOMPARE(root.value("position").toInt(), position);
    QCOMPARE(root.value("token").toObject().value("id").toInt(), info->tokens.tokenId(index));
    // The sequence went with it: the lens ranks the token that came next.
    QCOMPARE(root.value("target").toObject().value("source").toString(), QStringLiteral("next"));
    QCOMPARE(root.value("target").toObject().value("id").toInt(), info->tokens.tokenId(index + 1));
    QCOMPARE(root.value("context").toArray().size(), position + 1);
    QVERIFY(panel->headerText().contains(QStringLiteral("Position %1").arg(position)));
    QVERIFY(panel->headerText().contains(QStringLiteral("reused")));

    const QJsonArray layers = root.value("layers").toArray();
    const int numHeads = root.value("num_heads").toInt();
    const int numKvHeads = root.value("num_kv_heads").toInt();
    QVERIFY(layers.size() >= 2);
    QVERIFY(numHeads >= 2);

    // (a) Pick a layer and head: the strip's highlighted position is the argmax
    // of that head's row in the JSON.
    gbui::InsideAttentionView* attention = panel->attention();
    const int li = 1, head = numHeads - 1;
    attention->pickHead(li, head);
    QCOMPARE(attention->pickedLayer(), li);
    QCOMPARE(attention->pickedHead(), head);
    const QJsonObject layer = layers[li].toObject();
    const QJsonArray row = layer.value("attention").toArray()[head].toArray();
    const int first = layer.value("first_position").toInt();
    QCOMPARE(row.size(), position - first + 1);
    const int expectedTop = first + jsonArgmax(row);
    QCOMPARE(attention->topPosition(), expectedTop);
    QCOMPARE(attention->topTable()->item(0, 0)->text().toInt(), expectedTop);
    QVERIFY(attention->stripHtml().contains(QStringLiteral("font-weight")));
    // The same for the mean over the heads sharing its KV head.
    if (numKvHeads > 0 && numKvHeads < numHeads) {
      const int group = numHeads / numKvHeads;
      QVector<double> mean(row.size(), 0.0);
      for (int h = head / group * group; h < head / group * group + group; ++h) {
        const QJsonArray r = layer.value("attention").toArray()[h].toArray();
        for (int i = 0; i < r.size(); ++i) mean[i] += r[i].toDouble() / group;
      }
      QJsonArray meanRow;
      for (double w : mean) meanRow.append(w);
      attention->setMeanOverGroup(true);
      QCOMPARE(attention->topPosition(), first + jsonArgmax(meanRow));
      attention->setMeanOverGroup(false);
      QCOMPARE(attention->topPosition(), expectedTop);
    }

    // (b) Sorted by sink mass, each layer's heads go from the most to the least.
    attention->setSort(gbui::InsideHeadSort::SinkMass);
    for (int l = 0; l < layers.size(); ++l) {
      const QJsonArray sink = layers[l].toObject().value("head_sink_mass").toArray();
      const QVector<int> order = attention->headOrder(l);
      QCOMPARE(order.size(), numHeads);
      QVector<int> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      for (int h = 0; h < numHeads; ++h) QCOMPARE(sorted[h], h);  // a permutation
      for (int c = 1; c < numHeads; ++c)
        QVERIFY2(sink[order[c - 1]].toDouble() >= sink[order[c]].toDouble(), qPrintable(QString::number(l)));
    }
    attention->setSort(gbui::InsideHeadSort::Natural);
    for (int h = 0; h < numHeads; ++h) QCOMPARE(attention->headOrder(0)[h], h);

    // The lens table and charts: one row and point per layer.
    QCOMPARE(panel->lensTable()->rowCount(), layers.size());
    QCOMPARE(panel->lensTable()->item(li, 1)->text().toInt(),
             layers[li].toObject().value("lens").toObject().value("target_rank").toInt());
    QCOMPARE(panel->lensPlot()->graph(0)->dataCount(), layers.size());
    for (int i = 0; i < 4; ++i) QCOMPARE(panel->signalPlot(i)->graph(0)->dataCount(), layers.size());

    // (c) Export writes the report.
    const QString path = dir.filePath("inside.json");
    QCOMPARE(panel->exportJson(path), QString());
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject exported = QJsonDocument::fromJson(f.readAll()).object();
    QCOMPARE(exported.value("schema").toString(), QStringLiteral("glassbox-inside-v1"));
    QCOMPARE(exported.value("position").toInt(), position);

    // A position past the sequence: the engine's error, no report, no crash.
    QVector<int> ids = info->allTokenIds();
    panel->inspect(ids, static_cast<int>(ids.size()) + 3);
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->errorText().contains(QStringLiteral("outside")), qPrintable(panel->errorText()));
    QVERIFY(panel->headerText().contains(panel->errorText().toHtmlEscaped()) ||
            panel->headerText().contains(panel->errorText()));
    QVERIFY(panel->reportJson().isEmpty());
    QCOMPARE(attention->topPosition(), -1);
    QVERIFY(!panel->exportJson(dir.filePath("none.json")).isEmpty());

    // And the panel still works after it (the last generated token: the lens
    // then ranks the model's own argmax).
    emit window->chat()->tokenClicked(request, static_cast<int>(info->tokens.size()) - 1);
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->errorText().isEmpty(), qPrintable(panel->errorText()));
    const QJsonObject last = QJsonDocument::fromJson(panel->reportJson().toUtf8()).object();
    QCOMPARE(last.value("position").toInt(), static_cast<int>(ids.size()) - 1);
    QCOMPARE(last.value("target").toObject().value("source").toString(), QStringLiteral("argmax"));
  }

  void aHiddenPanelWaitsForInspect() {
    // Not visible and not asked: nothing is sent; "Inspect" sends the selection.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QVERIFY(generate(*window, QStringLiteral("Once upon a time"), 3));
    const gbui::RequestKey request = window->chat()->conversation().turns.back().currentRequest();
    auto* panel = window->panelAs<gbui::InsidePanel>("inside");
    panel->setAuto(false);
    QSignalSpy sent(panel, &gbui::InsidePanel::inspectRequested);
    emit window->chat()->tokenClicked(request, 0);
    QCOMPARE(sent.count(), 0);
    QVERIFY(panel->inspectSelected());
    QCOMPARE(sent.count(), 1);
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->errorText().isEmpty(), qPrintable(panel->errorText()));
    QCOMPARE(panel->report()->position, static_cast<int>(window->sessionModel()->request(request)->promptIds.size()));
  }

  void aSlidingLayerMarksThePositionsOutsideItsWindow() {
    // A report of our own (no model): layer 0 sees every position, layer 1
    // slides (window 3, from position 2); 2 heads on 1 KV head.
    gbui::InsideReportView r;
    r.numLayers = r.numHeads = 2;
    r.numKvHeads = 1;
    r.position = 4;
    for (int p = 0; p <= 4; ++p) r.context.push_back({p + 10, QStringLiteral("t%1").arg(p), 0.0});
    gbui::InsideLayerView full;
    full.attention = {{0.5, 0.1, 0.1, 0.1, 0.2}, {0.1, 0.1, 0.6, 0.1, 0.1}};
    full.headEntropy = {1.0, 0.5};
    full.headSinkMass = {0.5, 0.1};
    gbui::InsideLayerView sliding;
    sliding.layer = 1;
    sliding.sliding = true;
    sliding.window = 3;
    sliding.firstPosition = 2;
    sliding.attention = {{0.2, 0.7, 0.1}, {0.3, 0.3, 0.4}};
    sliding.headEntropy = {0.8, 1.1};
    sliding.headSinkMass = {0.0, 0.0};
    r.layers = {full, sliding};
    gbui::InsideAttentionView view;
    view.setReport(&r);
    view.pickHead(1, 0);
    QCOMPARE(view.topPosition(), 3);  // first_position 2 + argmax 1
    QCOMPARE(view.shownRow().size(), 3);
    QVERIFY(view.stripHtml().contains(QStringLiteral("line-through")));
    QVERIFY(view.stripHtml().contains(QStringLiteral("outside")));
    QCOMPARE(view.topTable()->rowCount(), 3);  // only the window's positions
    QCOMPARE(view.topTable()->item(0, 1)->text(), QStringLiteral("t3"));
    view.setMeanOverGroup(true);  // (0.25, 0.5, 0.25)
    QCOMPARE(view.topPosition(), 3);
    view.pickHead(0, 0);  // the mean (0.3, 0.1, 0.35, 0.1, 0.15)
    QCOMPARE(view.topPosition(), 2);
    QVERIFY(!view.stripHtml().contains(QStringLiteral("line-through")));
    view.setMeanOverGroup(false);  // head 0 alone: the sink
    QCOMPARE(view.topPosition(), 0);
    QCOMPARE(view.topTable()->rowCount(), 5);
    view.setSort(gbui::InsideHeadSort::Entropy);  // lowest first
    QCOMPARE(view.headOrder(0), QVector<int>({1, 0}));
    QCOMPARE(view.headOrder(1), QVector<int>({0, 1}));
  }

  void aPromptTokenIsASelection() {
    // A prompt token clicked in the chat's "Show prompt": its request's
    // sequence (prompt + answer) at that prompt position, so the lens ranks
    // the prompt's next token.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    gbui::InsidePanel* panel = showInside(*window);
    QVERIFY(panel != nullptr);
    gbui::ChatPanel* chat = window->chat();
    chat->setCompletionMode(false);
    chat->setFormat(QStringLiteral("chatml"));
    QVERIFY(chatTurn(*window, QStringLiteral("Once upon a time"), 4));
    const gbui::RequestInfo* r = window->sessionModel()->request(chat->conversation().turns.back().currentRequest());
    QVERIFY(r != nullptr && r->promptIds.size() > 5);
    chat->showPrompt();
    gbui::PromptView* view = chat->promptView();
    QVERIFY(view != nullptr && view->isVisible());
    QVERIFY(view->tokensHtml().contains(QStringLiteral("token:3")));  // each token is a link to itself
    view->pickToken(3);
    QVERIFY(panel->waiting());
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->errorText().isEmpty(), qPrintable(panel->errorText()));
    const QJsonObject report = QJsonDocument::fromJson(panel->reportJson().toUtf8()).object();
    QCOMPARE(report.value("position").toInt(), 3);
    QCOMPARE(report.value("token").toObject().value("id").toInt(), r->promptIds[3]);
    QCOMPARE(report.value("target").toObject().value("id").toInt(), r->promptIds[4]);
    QCOMPARE(report.value("target").toObject().value("source").toString(), QStringLiteral("next"));
    view->close();
  }

  void anEvictingRequestsDroppedPositionsAreStruck() {
    // A request that ran with sink B=16 (S=4, R=12): the inspection of an
    // answer token recomputes with every token cached, and the strip strikes
    // the positions the request's own cache no longer held when it computed
    // that token -- by the policy's definition 4 .. p - 12 (12 recent kept,
    // the new token among them); the header says so.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    gbui::KvPolicyChoice sink;
    sink.policy = QStringLiteral("sink");
    sink.budget = 16;
    QCOMPARE(window->sampling()->kvPolicy()->setChoice(sink), QString());
    QVERIFY(generate(*window, QStringLiteral("Once upon a time"), 40));
    const gbui::RequestKey request = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* info = window->sessionModel()->request(request);
    QVERIFY(info != nullptr && info->tokens.size() == 40);
    gbui::InsidePanel* panel = showInside(*window);
    QVERIFY(panel != nullptr);
    const int index = 30;
    emit window->chat()->tokenClicked(request, index);
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->errorText().isEmpty(), qPrintable(panel->errorText()));
    const int p = static_cast<int>(info->promptIds.size()) + index;
    QVERIFY2(panel->headerText().contains(QStringLiteral("KV eviction (sink B=16 S=4 R=12)")), qPrintable(panel->headerText()));
    QVERIFY2(panel->headerText().contains(QStringLiteral("%1 of the %2 positions").arg(p - 15).arg(p)),
             qPrintable(panel->headerText()));
    panel->attention()->pickHead(0, 0);
    const QString strip = panel->attention()->stripHtml();
    QCOMPARE(static_cast<int>(strip.count(QStringLiteral("line-through"))), p - 15);
    const QMap<int, QString>& evicted = panel->attention()->evicted();
    QCOMPARE(static_cast<int>(evicted.size()), p - 15);
    QCOMPARE(evicted.firstKey(), 4);
    QCOMPARE(evicted.lastKey(), p - 12);
    QVERIFY2(evicted.first().startsWith(QStringLiteral("evicted at step")), qPrintable(evicted.first()));

    // An early token, computed before the cache reached its budget: nothing had gone.
    emit window->chat()->tokenClicked(request, 0);
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->headerText().contains(QStringLiteral("still held every one of the %1 positions").arg(info->promptIds.size())),
             qPrintable(panel->headerText()));
    QVERIFY(panel->attention()->evicted().isEmpty());

    // The same sequence from the Score view is nobody's request: nothing struck.
    panel->selectSequence(info->allTokenIds(), p);
    QVERIFY(panel->inspectSelected());
    QVERIFY(waitReport(*panel));
    QVERIFY(!panel->headerText().contains(QStringLiteral("KV eviction")));
    QVERIFY(!panel->attention()->stripHtml().contains(QStringLiteral("line-through")));
  }

  void aScoreTokenIsASelection() {
    // A token clicked in the Score view: the scored sequence at its position.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    gbui::InsidePanel* panel = showInside(*window);
    QVERIFY(panel != nullptr);
    gbui::ScoreView* score = window->scoreView();
    QSignalSpy scored(score, &gbui::ScoreView::finished);
    score->setText(QStringLiteral("Once upon a time, there was a little girl."));
    score->score();
    QVERIFY(scored.wait(60000));
    const QJsonObject root = QJsonDocument::fromJson(score->resultJson().toUtf8()).object();
    const QJsonObject token = root.value("tokens").toArray()[3].toObject();
    score->showDetails(3);
    QVERIFY(panel->waiting());
    QVERIFY(waitReport(*panel));
    QVERIFY2(panel->errorText().isEmpty(), qPrintable(panel->errorText()));
    const QJsonObject report = QJsonDocument::fromJson(panel->reportJson().toUtf8()).object();
    QCOMPARE(report.value("position").toInt(), token.value("position").toInt());
    QCOMPARE(report.value("token").toObject().value("id").toInt(), token.value("id").toInt());
    const QJsonArray ids = root.value("token_ids").toArray();
    const QJsonArray context = report.value("context").toArray();
    QCOMPARE(context.size(), token.value("position").toInt() + 1);
    for (int i = 0; i < context.size(); ++i) QCOMPARE(context[i].toObject().value("id").toInt(), ids[i].toInt());
  }
};

GB_QTEST_MAIN(UiInsideTest);
#include "ui_inside_test.moc"
