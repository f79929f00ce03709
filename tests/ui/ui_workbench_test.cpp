// Workbench behaviour against the real engine on stories260K: streamed text,
// live sampler changes, the inspector's numbers, the latency chart, and a broken
// model file. The reference for the streamed text is the golden greedy output
// of llama2.c's run.c for the same prompt.
#include <QApplication>
#include <QFile>
#include <QMessageBox>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>

#include <QDockWidget>
#include <QScreen>

#include "gb_qtest_main.h"
#include "bridge/engine_controller.h"
#include "window/panel_registry.h"
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include "panels/performance_panel.h"
#include "panels/token_inspector_panel.h"
#include "ui_test_support.h"
#include "../ui_threads/controller_commands.h"
#include "bridge/engine_probe.h"

using namespace gbuitest;

class UiWorkbenchTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    QVERIFY(dir_.isValid());
  }

  void panelsFollowTheRegistry() {
    // Every row of panel_registry.cpp becomes its panel: the central chat or a
    // dock with the row's name, title and area, in the tab group it names. The
    // names are what --panel, saved layouts and these tests use: keep them.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QCOMPARE(gbui::panelNames(), QStringList({"chat", "sampling", "inspector", "kv", "performance", "speculative",
                                              "model", "compare", "score", "branches", "inside", "experts", "serve"}));
    for (const gbui::PanelSpec& spec : gbui::panelSpecs()) {
      QWidget* panel = window->panel(spec.name);
      QVERIFY2(panel != nullptr, spec.name);
      if (spec.area == Qt::NoDockWidgetArea) {
        QCOMPARE(window->centralWidget(), panel);
        continue;
      }
      auto* dock = qobject_cast<QDockWidget*>(panel->parentWidget());
      QVERIFY2(dock != nullptr, spec.name);
      QCOMPARE(dock->objectName(), QString(spec.name));
      QCOMPARE(dock->windowTitle(), QString(spec.title));
      QCOMPARE(window->dockWidgetArea(dock), spec.area);
      if (spec.tabifyWith != nullptr)
        QVERIFY2(window->tabifiedDockWidgets(dock).contains(window->findChild<QDockWidget*>(spec.tabifyWith)), spec.name);
    }
    QVERIFY(window->panel("no-such-panel") == nullptr);
  }

  void windowFitsALaptopScreen() {
    // With every panel docked as the registry places it, the window's minimum
    // size fits 1280x720 (a 1366x768 laptop screen less task bar and title), so
    // no part of it is off-screen; panels smaller than their content scroll.
    // A fresh window opens at 1400x900 or, on a smaller screen, its available area.
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    window->show();
    QVERIFY(QTest::qWaitForWindowExposed(window.get()));
    const QSize minimum = window->minimumSizeHint();
    QString needs;  // which panels ask for what, for the failure message
    for (QDockWidget* dock : window->findChildren<QDockWidget*>())
      needs += QStringLiteral(" %1 %2x%3").arg(dock->objectName()).arg(dock->minimumSizeHint().width()).arg(
          dock->minimumSizeHint().height());
    QVERIFY2(minimum.width() <= 1280 && minimum.height() <= 720,
             qPrintable(QStringLiteral("minimum size %1x%2;").arg(minimum.width()).arg(minimum.height()) + needs));
    QCOMPARE(gbui::MainWindow::defaultWindowSize(nullptr), QSize(1400, 900));
    const QSize available = window->screen()->availableSize();
    const QSize size = gbui::MainWindow::defaultWindowSize(window->screen());
    QVERIFY(size.width() <= std::min(1400, available.width()) && size.height() <= std::min(900, available.height()));
    QVERIFY(size.width() >= std::min(1400, available.width()) - 16 && size.height() >= std::min(900, available.height()) - 40);
  }

  void greedyStreamEqualsGenerator() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    // Reference: llama2.c run.c greedy output (shared golden vectors, made by an
    // independent implementation; see testdata/golden/README.md).
    QFile goldenFile(sharedFile("testdata/golden/once_upon_a_time_n64.json"));
    QVERIFY2(goldenFile.open(QIODevice::ReadOnly), qPrintable("missing test data: " + goldenFile.fileName()));
    const QJsonObject golden = QJsonDocument::fromJson(goldenFile.readAll()).object();
    std::vector<int> ids;
    for (const QJsonValue& v : golden.value("generated_tokens").toArray()) ids.push_back(v.toInt());
    const QString prompt = golden.value("prompt").toString();
    const QString text = golden.value("decoded_text").toString().mid(prompt.size());
    const int kTokens = static_cast<int>(ids.size());
    QVERIFY(kTokens > 30);
    QVERIFY(generate(*window, prompt, kTokens));

    const gbui::RequestInfo* r = window->sessionModel()->request(window->chat()->conversation().turns.back().currentRequest());
    QVERIFY(r);
    std::vector<int> shown;
    for (const gbui::UiToken& t : r->tokens) shown.push_back(t.tokenId);
    QCOMPARE(shown, ids);
    QCOMPARE(window->chat()->view()->tokenText(), text);
    QCOMPARE(window->chat()->view()->numTokenSpans(), static_cast<int>(ids.size()));
    // After N tokens the latency chart holds N points.
    QCOMPARE(window->performance()->numLatencyPoints(), static_cast<int>(ids.size()));
  }

  void sliderChangesNextTokenRecord() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(R"({"temperature":1,"top_k":40,"top_p":1,"min_p":0,"seed":3})"),
             QString());
    // Slow the engine down to one step per event-loop turn: pause, then step by hand.
    window->chat()->setConversation({});
    window->chat()->setMaxTokens(200);
    window->chat()->setInputText("Once upon a time");
    window->controller()->setPaused(true);
    window->chat()->send();
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->activeRequest() != 0; }, 10000));
    const gbui::RequestKey key = window->chat()->activeRequest();
    auto stepAndFlush = [&](int n) {
      for (int i = 0; i < n; ++i)
        QMetaObject::invokeMethod(window->controller(), [c = window->controller()] { c->stepOnce(); c->flush(); },
                                  Qt::BlockingQueuedConnection);
      QApplication::processEvents();
      QTest::qWait(20);
    };
    stepAndFlush(5);
    const gbui::RequestInfo* r = window->sessionModel()->request(key);
    QVERIFY(r && r->tokens.size() >= 3);
    const int topK = static_cast<int>(r->tokens.back().stages.indexOf("top_k"));
    QVERIFY(topK >= 0);
    QCOMPARE(r->tokens.back().numAfterStage[topK], 40);
    const size_t before = r->tokens.size();
    // Move the slider: top_k 40 -> 5.
    QSlider* slider = window->sampling()->slider("top_k");
    QVERIFY(slider);
    slider->setValue(25);  // 0..1000 over 0..200 -> 5
    QCOMPARE(window->sampling()->value("top_k"), 5.0);
    QTest::qWait(50);  // the queued setSamplerSettings reaches the engine thread
    stepAndFlush(3);
    r = window->sessionModel()->request(key);
    QVERIFY(r->tokens.size() > before);
    QCOMPARE(r->tokens[before].numAfterStage[topK], 5);
    for (const gbui::UiCandidate& c : r->tokens[before].top)
      if (c.removedByStage < 0 || c.removedByStage > topK) QVERIFY(c.probAfter[topK] > 0.0f);
    window->controller()->setPaused(false);
    window->chat()->stop();
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->activeRequest() == 0; }, 20000));
  }

  void inspectorShowsRecord() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(R"({"temperature":0.8,"top_k":10,"seed":11})"), QString());
    QVERIFY(generate(*window, "The cat", 12));
    const gbui::RequestKey key = window->chat()->conversation().turns.back().currentRequest();
    const std::optional<gbui::UiToken> t = window->sessionModel()->token(key, 5);
    QVERIFY(t);
    window->sessionModel()->selectToken(key, 5);
    QTableWidget* table = window->inspector()->table();
    QCOMPARE(table->rowCount(), static_cast<int>(t->top.size()));
    QCOMPARE(table->columnCount(), 4 + static_cast<int>(t->stages.size()) + 1);
    for (int i = 0; i < table->rowCount(); ++i) {
      const gbui::UiCandidate& c = t->top[i];
      QCOMPARE(table->item(i, 1)->text().toInt(), c.id);
      QCOMPARE(table->item(i, 3)->text().toFloat(), QString::number(c.probBefore, 'g', 6).toFloat());
      for (int s = 0; s < c.probAfter.size(); ++s)
        QCOMPARE(table->item(i, 4 + s)->text().toFloat(), QString::number(c.probAfter[s], 'g', 6).toFloat());
      const QString removed = table->item(i, 4 + static_cast<int>(t->stages.size()))->text();
      QCOMPARE(removed, c.removedByStage >= 0 ? t->stages[c.removedByStage] : QString());
    }
    // Top-k 10 keeps exactly 10 candidates in the table's top_k column.
    const int topK = static_cast<int>(t->stages.indexOf("top_k"));
    int kept = 0;
    for (const gbui::UiCandidate& c : t->top) kept += c.probAfter[topK] > 0.0f ? 1 : 0;
    QCOMPARE(kept, std::min(10, static_cast<int>(t->top.size())));
    // The chosen token is in the table and highlighted.
    bool found = false;
    for (int i = 0; i < table->rowCount(); ++i)
      if (table->item(i, 1)->text().toInt() == t->tokenId) found = table->item(i, 0)->background().color() != QColor();
    QVERIFY(found);
  }

  void brokenModelShowsErrorAndStaysResponsive() {
    auto window = makeWindow(dir_);
    const QString broken = dir_.filePath("broken.gguf");
    QFile f(broken);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("GGUF\x03\x00\x00\x00garbage that is not a model");
    f.close();
    QSignalSpy failed(window.get(), &gbui::MainWindow::loadFailed);
    window->openModel(broken);
    QVERIFY(failed.wait(10000));
    QVERIFY(!window->lastError().isEmpty());
    QVERIFY2(window->lastError().contains("broken.gguf"), qPrintable(window->lastError()));
    QVERIFY(window->findChild<QMessageBox*>("errorDialog"));
    QVERIFY(!window->isLoading());
    // Still usable: a good model loads and generates afterwards.
    QVERIFY(loadStories(*window));
    QVERIFY(generate(*window, "Once", 5));
  }

  void loadReportsProgressAndCanBeCancelled() {
    auto window = makeWindow(dir_);
    QSignalSpy progress(window->controller(), &gbui::EngineController::loadProgress);
    QVERIFY(loadStories(*window));
    QVERIFY(!progress.isEmpty());
    QCOMPARE(progress.last().at(0).toInt(), 100);
    // Cancel before the controller thread starts the load: the load stops at its
    // first progress report and no model replaces the current one.
    const QString before = window->sessionModel()->modelInfo().path;
    QSignalSpy ready(window.get(), &gbui::MainWindow::modelReady);
    QMetaObject::invokeMethod(window->controller(), [] { QThread::msleep(200); });  // hold the thread
    window->openModel(storiesPath());
    window->cancelLoad();
    QVERIFY(!window->isLoading());
    QVERIFY(!ready.wait(1500));
    QCOMPARE(window->sessionModel()->modelInfo().path, before);
    QVERIFY(generate(*window, "Once", 3));  // still usable
  }

  void engineErrorStaysInViewWithAWayOut() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QVERIFY(generate(*window, "Once upon a time", 40));
    window->chat()->regenerate();  // a second answer: the first one's KV is kept too
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->conversation().turns.back().branches.size() == 2 &&
                                         window->chat()->activeRequest() == 0; }, 30000));
    gbui::EngineController* c = window->controller();
    auto kept = [c] {
      QVector<quint64> out;
      QMetaObject::invokeMethod(c, [&] { out = gbui::EngineProbe(*c).keptRequests(); }, Qt::BlockingQueuedConnection);
      return out;
    };
    QCOMPARE(kept().size(), 2);
    // An engine error (as the engine reports a request it cannot start) stays in
    // the status bar with the one-click way out while answers keep KV.
    auto batch = std::make_shared<std::vector<gbui::UiEvent>>();
    batch->push_back({1u << 30, 0, gbui::UiError{std::nullopt, "request 9 cannot start: it needs 40 KV blocks"}});
    window->sessionModel()->apply(batch);
    auto* warning = window->findChild<QWidget*>("engineWarning");
    auto* release = window->findChild<QPushButton*>("releaseBranchesNow");
    QVERIFY(warning && release);
    QVERIFY(warning->isVisible());
    QVERIFY(window->findChild<QLabel*>("engineWarningText")->text().contains("cannot start"));
    QVERIFY(release->isVisible());
    QTest::mouseClick(release, Qt::LeftButton);
    // The answer on screen keeps its KV; the other is released, the warning goes.
    QTRY_COMPARE(kept().size(), 1);
    QCOMPARE(kept().front(), window->chat()->conversation().turns.back().currentRequest());
    QTRY_VERIFY(!warning->isVisible());
  }

 private:
  QTemporaryDir dir_;
};

GB_QTEST_MAIN(UiWorkbenchTest);
#include "ui_workbench_test.moc"
