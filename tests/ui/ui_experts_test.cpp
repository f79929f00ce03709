// The Experts panel against the real engine on the converted tiny Qwen3-MoE file
// (tests/data/converted; offscreen): a clicked token's strip holds exactly its
// record's routing (each layer's experts with their weights, nothing else), the
// session load counts every generated token once per layer (each row's shares
// sum to the experts per token; an inspection's own request is not counted), a
// token clicked in the Score view shows the routing its score carries, and a
// dense model (stories260K) says it is not
// a mixture.
#include <QApplication>
#include <QDockWidget>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>

#include "gb_qtest_main.h"
#include "panels/experts_panel.h"
#include "panels/inside_panel.h"
#include "panels/score_view.h"
#include "ui_test_support.h"

using namespace gbuitest;

namespace {

gbui::ExpertsPanel* showExperts(gbui::MainWindow& window) {
  auto* panel = window.panelAs<gbui::ExpertsPanel>("experts");
  qobject_cast<QDockWidget*>(panel->parentWidget())->raise();
  return QTest::qWaitFor([&] { return panel->isVisible(); }, 5000) ? panel : nullptr;
}

QString moePath() { return QStringLiteral(GLASSBOX_CONVERTED_DIR) + QStringLiteral("/qwen3moe.gguf"); }

bool openMoe(gbui::MainWindow& window) {
  QSignalSpy ready(&window, &gbui::MainWindow::modelReady);
  window.openModel(moePath());
  return ready.wait(30000);
}

}  // namespace

class UiExpertsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    qRegisterMetaType<gbui::UiEventBatch>();
    qRegisterMetaType<gbui::UiModelInfo>();
    QVERIFY2(QFile::exists(moePath()), qPrintable("missing test data: " + moePath()));
  }

  void aTokensRoutingAndTheSessionLoadAreDrawn() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(openMoe(*window));
    gbui::ExpertsPanel* panel = showExperts(*window);
    QVERIFY(panel != nullptr);
    QCOMPARE(panel->tokenGrid()->rows(), 2);     // layers
    QCOMPARE(panel->tokenGrid()->columns(), 8);  // experts
    QVERIFY(generate(*window, QStringLiteral("the program"), 12));
    const gbui::RequestKey request = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* info = window->sessionModel()->request(request);
    QVERIFY(info != nullptr);
    const int generated = static_cast<int>(info->tokens.size());
    QVERIFY(generated >= 3);

    // The load: every generated token counted once; each layer's shares sum to 2.
    QCOMPARE(panel->tokensCounted(), generated);
    for (int layer = 0; layer < 2; ++layer) {
      double sum = 0.0;
      for (int e = 0; e < 8; ++e) sum += panel->loadGrid()->value(layer, e);
      QVERIFY2(std::abs(sum - 2.0) < 1e-9, qPrintable(QString::number(sum)));
    }

    // A click on the third generated token: the strip is its record's routing.
    const int index = 2;
    emit window->chat()->tokenClicked(request, index);
    const std::optional<gbui::UiToken> token = window->sessionModel()->token(request, index);
    QVERIFY(token && token->routing);
    const gbui::UiRouting& r = *token->routing;
    QCOMPARE(r.perToken, 2);
    QCOMPARE(r.numLayers(), 2);
    for (int layer = 0; layer < 2; ++layer) {
      double sum = 0.0;
      int used = 0;
      for (int e = 0; e < 8; ++e) {
        const double w = panel->tokenGrid()->value(layer, e);
        sum += w;
        used += w > 0.0 ? 1 : 0;
      }
      QCOMPARE(used, 2);
      QVERIFY(std::abs(sum - 1.0) < 1e-5);
      for (int j = 0; j < r.perToken; ++j)
        QCOMPARE(panel->tokenGrid()->value(layer, r.experts[layer * 2 + j]), double(r.weights[layer * 2 + j]));
    }
    QVERIFY2(panel->header()->text().contains(QStringLiteral("Token 2")), qPrintable(panel->header()->text()));

    // An inspection of the token (the Inside panel's own engine request) adds
    // nothing to the conversation's load.
    auto* inside = window->panelAs<gbui::InsidePanel>("inside");
    qobject_cast<QDockWidget*>(inside->parentWidget())->raise();
    QVERIFY(QTest::qWaitFor([&] { return inside->isVisible(); }, 5000));
    emit window->chat()->tokenClicked(request, 1);
    QVERIFY(QTest::qWaitFor([&] { return !inside->waiting() && inside->report().has_value(); }, 60000));
    QCOMPARE(panel->tokensCounted(), generated);
  }

  void aScoredTokensRoutingIsShown() {
    // A token clicked in the Score view: the strip is the routing of the pass
    // that scored it, as the score's JSON gives it.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(openMoe(*window));
    gbui::ExpertsPanel* panel = showExperts(*window);
    QVERIFY(panel != nullptr);
    gbui::ScoreView* score = window->scoreView();
    QSignalSpy scored(score, &gbui::ScoreView::finished);
    score->setText(QStringLiteral("the program is free software"));
    score->score();
    QVERIFY(scored.wait(60000));
    const QJsonObject root = QJsonDocument::fromJson(score->resultJson().toUtf8()).object();
    const QJsonObject token = root.value("tokens").toArray()[2].toObject();
    const QJsonObject routing = token.value("routing").toObject();
    QCOMPARE(routing.value("experts_per_token").toInt(), 2);
    const QJsonArray experts = routing.value("experts").toArray(), weights = routing.value("weights").toArray();
    QCOMPARE(experts.size(), 4);  // 2 layers x 2
    score->showDetails(2);
    for (int i = 0; i < experts.size(); ++i)
      QVERIFY(std::abs(panel->tokenGrid()->value(i / 2, experts[i].toInt()) - weights[i].toDouble()) < 1e-6);
    QVERIFY2(panel->header()->text().contains(QStringLiteral("Scored token at position %1").arg(token.value("position").toInt())),
             qPrintable(panel->header()->text()));
  }

  void aDenseModelSaysItIsNotAMixture() {
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    gbui::ExpertsPanel* panel = showExperts(*window);
    QVERIFY(panel != nullptr);
    QVERIFY(panel->header()->text().contains(QStringLiteral("not a mixture of experts")));
    QCOMPARE(panel->tokenGrid()->columns(), 0);
    QVERIFY(panel->tokenGrid()->isHidden() && panel->loadGrid()->isHidden());
    QVERIFY(generate(*window, QStringLiteral("Once upon a time"), 4));
    QCOMPARE(panel->tokensCounted(), 0);
  }
};

GB_QTEST_MAIN(UiExpertsTest);
#include "ui_experts_test.moc"
