// A user's session, end to end: the real main window on stories260K, driven
// only by mouse clicks and key presses on its real widgets (found by object
// name, as an accessibility tool would): type a prompt and send it, regenerate
// 50 times, branch from an alternative token in the inspector, switch
// branches, move two sampler sliders, start a generation and stop it midway,
// release the kept branches, export a trace and open it again. After every
// action it checks what the user sees -- which buttons are enabled, the status
// line, the seed in the branch navigator, the KV panel's numbers against the
// engine's own snapshot -- and at the end that the engine is idle, its thread
// is not being scheduled (no spinning), and every block is free or cached.
#include <QAbstractItemView>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QAbstractItemView>
#include <QCompleter>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QToolButton>
#include <set>

#include "gb_qtest_main.h"
#include "bridge/engine_controller.h"
#include "panels/kv_cache_panel.h"
#include "panels/token_inspector_panel.h"
#include "ui_test_support.h"
#include "../ui_threads/controller_commands.h"
#include "bridge/engine_probe.h"
#include "bridge/local_engine_source.h"

using namespace gbuitest;

namespace {

// The engine thread's scheduling counters from /proc (Linux): context switches
// (voluntary + involuntary) and CPU ticks. A thread that sleeps in its event
// loop changes neither; one that spins on a zero-interval timer changes both.
struct ThreadCounters {
  bool found = false;
  long long switches = 0;
  long long ticks = 0;
};

ThreadCounters engineThreadCounters() {
  ThreadCounters c;
  for (const QString& tid : QDir("/proc/self/task").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    QFile comm("/proc/self/task/" + tid + "/comm");
    if (!comm.open(QIODevice::ReadOnly) || comm.readAll().trimmed() != "glassbox-engine") continue;
    c.found = true;
    QFile status("/proc/self/task/" + tid + "/status");
    if (status.open(QIODevice::ReadOnly))
      for (const QByteArray& line : status.readAll().split('\n'))
        if (line.contains("ctxt_switches:")) c.switches += line.split(':').at(1).trimmed().toLongLong();
    QFile stat("/proc/self/task/" + tid + "/stat");
    if (stat.open(QIODevice::ReadOnly)) {
      // Fields after the ")" that ends the command name: utime and stime are 14 and 15.
      const QByteArray s = stat.readAll();
      const QList<QByteArray> f = s.mid(s.lastIndexOf(')') + 2).split(' ');
      if (f.size() > 12) c.ticks = f.at(11).toLongLong() + f.at(12).toLongLong();
    }
  }
  return c;
}

}  // namespace

class UiUserSessionTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<gbui::MainWindow> window_;
  // Carried from one step of the session to the next.
  qint64 pinnedSeed_ = -1;
  QString pinnedText_;     // the answer regenerated with the pinned seed
  QString branchText_;     // the branch made from the inspector
  QString liveBlocks_;     // the KV panel's block line before the trace is exported

  template <typename T>
  T* find(const char* name) const {
    T* w = window_->findChild<T*>(QLatin1String(name));
    if (!w) qWarning("no widget named %s", name);
    return w;
  }
  QPushButton* button(const char* name) const { return find<QPushButton>(name); }
  QString status() const { return find<QLabel>("chatStatus")->text(); }

  void click(QAbstractButton* b) {
    QVERIFY(b);
    QVERIFY2(b->isVisible() && b->isEnabled(), qPrintable(b->objectName() + " is not clickable"));
    QTest::mouseClick(b, Qt::LeftButton);
  }

  // Opens a menu on the menu bar by its title and clicks one of its actions, as
  // a user would with the mouse. An action that opens a file dialog returns
  // when the dialog closes: arm answerFileDialog() first.
  void chooseMenu(const QString& menuTitle, const QString& actionName) {
    QMenuBar* bar = window_->menuBar();
    QMenu* menu = nullptr;
    for (QAction* a : bar->actions())
      if (a->menu() && a->text().remove('&') == menuTitle) menu = a->menu();
    QVERIFY2(menu, qPrintable("no menu " + menuTitle));
    QTest::mouseClick(bar, Qt::LeftButton, {}, bar->actionGeometry(menu->menuAction()).center());
    QTRY_VERIFY(menu->isVisible());
    QAction* action = window_->findChild<QAction*>(actionName);
    QVERIFY2(action && menu->actions().contains(action), qPrintable("no action " + actionName));
    QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(action).center());
  }

  // Answers the next file dialog by typing `path` and pressing Enter.
  void answerFileDialog(const QString& path) {
    auto poll = std::make_shared<QTimer>();
    poll->setInterval(20);
    connect(poll.get(), &QTimer::timeout, this, [poll, path] {
      auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
      if (!dialog) return;
      poll->stop();
      auto* name = dialog->findChild<QLineEdit*>("fileNameEdit");
      if (!name) return dialog->reject();
      name->selectAll();
      QTest::keyClicks(name, path);
      if (name->completer() && name->completer()->popup()) name->completer()->popup()->hide();
      QTest::keyClick(name, Qt::Key_Return);
      // Offscreen, a save dialog can take a typed absolute path for a folder
      // to open; then the path is chosen as its Save button would.
      if (dialog->isVisible()) {
        dialog->selectFile(path);
        QMetaObject::invokeMethod(dialog, "accept");
      }
    });
    poll->start();
    QTimer::singleShot(15000, poll.get(), [poll] { poll->stop(); });
  }

  // Right after a click that starts a request: nothing else can be sent.
  void expectBusy() {
    QVERIFY(!button("send")->isEnabled());
    QVERIFY(!button("regenerate")->isEnabled());
    QVERIFY(!button("editLast")->isEnabled());
    QCOMPARE(status(), QStringLiteral("generating..."));
  }

  // Waits for the answer the way a user does: until Send can be pressed again.
  void waitIdle() {
    QTRY_VERIFY_WITH_TIMEOUT(button("send")->isEnabled(), 60000);
    QVERIFY(!button("stop")->isEnabled());
    QVERIFY(button("regenerate")->isEnabled());
  }

  template <typename F>
  auto onEngineThread(F f) {
    decltype(f()) out{};
    QMetaObject::invokeMethod(window_->controller(), [&] { out = f(); }, Qt::BlockingQueuedConnection);
    return out;
  }

  // The KV panel's numbers against the engine's snapshot, and the derived ones
  // within their bounds.
  void checkKvPanel() {
    const QString text = find<QLabel>("kvStats")->text();
    const auto blocks = QRegularExpression(R"(blocks: (\d+) used, (\d+) cached, (\d+) free of (\d+))").match(text);
    QVERIFY2(blocks.hasMatch(), qPrintable(text));
    gbui::EngineController* c = window_->controller();
    const QString engine = onEngineThread([c] { return gbui::EngineProbe(*c).kvSnapshotSummary(); });
    QCOMPARE(QStringLiteral("%1 %2 %3 %4").arg(blocks.captured(1), blocks.captured(3), blocks.captured(2), blocks.captured(4)),
             engine);
    const auto hit = QRegularExpression(R"(prefix hit rate ([\d.]+)% \((\d+) of (\d+) prompt tokens reused, over (\d+))")
                         .match(text);
    QVERIFY2(hit.hasMatch(), qPrintable(text));
    const double rate = hit.captured(1).toDouble();
    const int reused = hit.captured(2).toInt(), prompt = hit.captured(3).toInt();
    QVERIFY2(rate >= 0.0 && rate <= 100.0 && reused <= prompt, qPrintable(text));
    if (prompt > 0) QVERIFY(std::abs(rate - 100.0 * reused / prompt) < 0.051);
    QVERIFY2(text.contains("= measured"), qPrintable(text));
    const auto kept = QRegularExpression(R"(kept for branching: (\d+) finished answer)").match(text);
    QVERIFY(kept.hasMatch());
    const QVector<quint64> engineKept = onEngineThread([c] { return gbui::EngineProbe(*c).keptRequests(); });
    QCOMPARE(kept.captured(1).toInt(), static_cast<int>(engineKept.size()));
    QVERIFY(engineKept.size() <= gbui::LocalEngineSource::kMaxKeptBranches);
  }

  const gbui::RequestInfo* shownRequest() const {
    const gbui::Conversation& c = window_->chat()->conversation();
    return c.turns.isEmpty() ? nullptr : window_->sessionModel()->request(c.turns.back().currentRequest());
  }

  QString shownAnswerText() const {
    QString text;
    const gbui::Conversation& c = window_->chat()->conversation();
    for (const gbui::UiToken& t : window_->chat()->displayedTokens(c.turns.back().currentRequest())) text += t.text;
    return text;
  }

  // The finished answer as the user sees it: status, branch navigator, text.
  void checkAnswer(int numBranches) {
    const gbui::RequestInfo* r = shownRequest();
    QVERIFY(r && r->finished);
    const QString seed = QString::number(r->seed);
    const auto done = QRegularExpression(R"(^(\d+) tokens, (stop|max_tokens|length|cancelled), seed (\d+))").match(status());
    QVERIFY2(done.hasMatch(), qPrintable(status()));
    QCOMPARE(done.captured(1).toInt(), r->finish.numGenerated);
    QCOMPARE(done.captured(3), seed);
    const QString label = find<QLabel>("branchLabel")->text();
    if (numBranches > 1)
      QCOMPARE(label, QStringLiteral("%1/%1 \u00b7 seed %2").arg(numBranches).arg(seed));
    else
      QCOMPARE(label, QStringLiteral("seed %1").arg(seed));
    QVERIFY(find<QToolButton>("copySeed")->isVisible());
    QCOMPARE(window_->chat()->view()->tokenText(), shownAnswerText());
    // And nothing else: the prompt, then this answer (an empty token is a dot).
    // The transcript, not QTextEdit::toPlainText(): a paragraph longer than
    // maxBlockChars() is laid out as several blocks split at wrap points, and
    // the document's text has a line break at each (the random seed decides
    // whether an answer has such a paragraph: about one run in five did).
    QString shown = QStringLiteral("Once upon a time");
    for (const gbui::UiToken& t : window_->chat()->displayedTokens(r->key)) shown += t.text.isEmpty() ? QStringLiteral("\u00b7") : t.text;
    QCOMPARE(window_->chat()->view()->transcriptText(), shown);
    checkKvPanel();
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    QVERIFY(dir_.isValid());
    window_ = makeWindow(dir_);
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));  // keyboard shortcuts need an active window
    QVERIFY(loadStories(*window_));
  }

  void everyInteractiveWidgetHasAName() {
    int checked = 0;
    for (QWidget* w : window_->findChildren<QWidget*>()) {
      const bool interactive = qobject_cast<QAbstractButton*>(w) || qobject_cast<QAbstractSlider*>(w) ||
                               qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w) ||
                               qobject_cast<QLineEdit*>(w) || qobject_cast<QAbstractScrollArea*>(w);
      if (!interactive || qobject_cast<QScrollBar*>(w)) continue;
      // Qt's own parts of a composite widget (a spin box's editor, a dock's
      // title buttons, a combo box's popup) are named by Qt or by their owner.
      QWidget* p = w->parentWidget();
      const bool part = w->objectName().startsWith("qt_") || qobject_cast<QAbstractItemView*>(p) ||
                        qobject_cast<QAbstractSpinBox*>(p) || qobject_cast<QComboBox*>(p) ||
                        (p && QByteArray(p->metaObject()->className()).startsWith("QComboBox"));
      if (part) continue;
      ++checked;
      QVERIFY2(!w->objectName().isEmpty(),
               qPrintable(QStringLiteral("unnamed %1 in %2").arg(w->metaObject()->className(),
                                                                 p ? p->metaObject()->className() : "?")));
    }
    QVERIFY(checked > 40);
  }

  void typeAPromptAndSendIt() {
    // Completion mode (stories260K continues text): the mode box, by keyboard.
    auto* mode = find<QComboBox>("chatMode");
    QTest::mouseClick(mode, Qt::LeftButton);
    QTRY_VERIFY(mode->view()->isVisible());
    QTest::keyClick(mode->view(), Qt::Key_Down);
    QTest::keyClick(mode->view(), Qt::Key_Return);
    QCOMPARE(mode->currentText(), QStringLiteral("Completion"));
    QVERIFY(!find<QLineEdit>("systemPrompt")->isEnabled());
    // Long answers: 300 tokens.
    auto* maxTokens = find<QSpinBox>("maxTokens");
    QTest::mouseClick(maxTokens, Qt::LeftButton);
    QTest::keyClick(maxTokens, Qt::Key_A, Qt::ControlModifier);
    QTest::keyClicks(maxTokens, "300");
    QTest::keyClick(maxTokens, Qt::Key_Tab);
    QCOMPARE(maxTokens->value(), 300);

    // Type a prompt and send it with Ctrl+Enter.
    auto* input = find<QPlainTextEdit>("chatInput");
    QTest::mouseClick(input->viewport(), Qt::LeftButton);
    QTest::keyClicks(input, "Once upon a time");
    const int firstSeed = find<QSpinBox>("seed")->value();
    QTest::keyClick(input, Qt::Key_Return, Qt::ControlModifier);
    expectBusy();
    QVERIFY(input->toPlainText().isEmpty());
    waitIdle();
    checkAnswer(1);
    QCOMPARE(shownRequest()->seed, firstSeed);  // Send uses the seed shown
    QVERIFY(window_->chat()->view()->transcriptText().startsWith("Once upon a time"));
  }

  void regenerateFiftyTimesThenWithAPinnedSeed() {
    // Each Regenerate draws a new seed, shown in the Sampling panel and the
    // navigator; long answers on the small pool never leave the window busy for ever.
    std::set<qint64> seeds{shownRequest()->seed};
    std::set<QString> texts{shownAnswerText()};
    for (int i = 0; i < 50; ++i) {
      click(button("regenerate"));
      expectBusy();
      const int seed = find<QSpinBox>("seed")->value();
      waitIdle();
      checkAnswer(i + 2);
      if (QTest::currentTestFailed()) return;
      QCOMPARE(shownRequest()->seed, seed);
      seeds.insert(seed);
      texts.insert(shownAnswerText());
    }
    QCOMPARE(seeds.size(), size_t{51});
    QVERIFY2(texts.size() > 40, qPrintable(QString::number(texts.size())));
    // Pinned, Regenerate keeps the seed: the same settings give the same answer.
    click(find<QCheckBox>("pinSeed"));
    pinnedText_ = shownAnswerText();
    pinnedSeed_ = shownRequest()->seed;
    click(button("regenerate"));
    waitIdle();
    checkAnswer(52);
    QCOMPARE(shownRequest()->seed, pinnedSeed_);
    QCOMPARE(shownAnswerText(), pinnedText_);
    click(find<QCheckBox>("pinSeed"));
  }

  void branchFromAnAlternativeInTheInspector() {
    // Click a token of the answer, pick an alternative in the inspector's table.
    gbui::TokenView* view = window_->chat()->view();
    const gbui::RequestInfo* parent = shownRequest();
    QPoint at;
    std::optional<gbui::UiToken> clicked;
    for (int y = 4; y < view->viewport()->height() && !clicked; y += 6)
      for (int x = 4; x < view->viewport()->width() && !clicked; x += 6) {
        const std::optional<gbui::UiToken> t = view->tokenAt(view->cursorForPosition(QPoint(x, y)).position());
        if (t && t->request == parent->key && t->index >= 3 && t->top.size() >= 2) {
          clicked = t;
          at = QPoint(x, y);
        }
      }
    QVERIFY2(clicked, "no token of the answer is on screen");
    const int index = clicked->index;
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, at);
    auto* inspector = window_->inspector();
    QTRY_VERIFY(inspector->shownToken().has_value());
    QCOMPARE(*inspector->shownToken(), std::make_pair(parent->key, index));
    QVERIFY(find<QLabel>("inspectorHeader")->text().contains(QStringLiteral("token %1").arg(index)));
    auto* table = find<QTableWidget>("inspectorTable");
    // The tooltip names three alternatives; the model (and the inspector) has every candidate.
    const std::optional<gbui::UiToken> full = window_->sessionModel()->token(parent->key, index);
    QVERIFY(full);
    QCOMPARE(table->rowCount(), static_cast<int>(full->top.size()));
    int row = 0;
    while (full->top[row].id == clicked->tokenId) ++row;
    const int alternative = full->top[row].id;
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualItemRect(table->item(row, 0)).center());
    QCOMPARE(table->currentRow(), row);
    click(find<QPushButton>("branchFromCandidate"));
    QTRY_VERIFY(shownRequest() && shownRequest()->key != parent->key);
    waitIdle();
    const gbui::RequestInfo* child = shownRequest();
    QVERIFY(child && child->parent && *child->parent == parent->key);
    QCOMPARE(child->forkPosition, static_cast<int>(parent->promptIds.size()) + index);
    QCOMPARE(child->tokens.front().tokenId, alternative);
    QCOMPARE(child->tokens.front().origin, static_cast<int>(gbui::UiTokenOrigin::Forced));
    checkAnswer(53);
    // The branch shows the parent's text up to the token, then its own.
    QString before, own;
    for (int i = 0; i < index; ++i) before += parent->tokens[static_cast<size_t>(i)].text;
    for (const gbui::UiToken& t : child->tokens) own += t.text;
    QCOMPARE(view->tokenText(), before + own);
    branchText_ = view->tokenText();
  }

  void switchBranches() {
    gbui::TokenView* view = window_->chat()->view();
    click(button("prevBranch"));
    QCOMPARE(find<QLabel>("branchLabel")->text(), QStringLiteral("52/53 \u00b7 seed %1").arg(pinnedSeed_));
    QCOMPARE(view->tokenText(), pinnedText_);
    QVERIFY(button("nextBranch")->isEnabled());
    click(button("nextBranch"));
    QCOMPARE(view->tokenText(), branchText_);
    QVERIFY(!button("nextBranch")->isEnabled());
    checkKvPanel();
  }

  void moveTwoSamplerSliders() {
    // Two sampler sliders: click one, then ten PageDown presses (a page is 10 of
    // 1000 steps): temperature falls by 0.2, top-k by 20.
    const std::pair<const char*, double> moves[] = {{"temperature", 0.2}, {"top_k", 20.0}};
    for (const auto& [key, drop] : moves) {
      auto* slider = find<QSlider>(qPrintable(QStringLiteral("slider:") + key));
      QTest::mouseClick(slider, Qt::LeftButton, {}, QPoint(slider->width() / 2, slider->height() / 2));
      const double old = window_->sampling()->value(key);
      for (int i = 0; i < 10; ++i) QTest::keyClick(slider, Qt::Key_PageDown);
      const double after = window_->sampling()->value(key);
      QVERIFY2(std::abs(old - after - drop) < 0.0051, qPrintable(QStringLiteral("%1: %2 -> %3").arg(key).arg(old).arg(after)));
      QCOMPARE(find<QDoubleSpinBox>(qPrintable(QStringLiteral("spin:") + key))->value(), after);
    }
    const int k = static_cast<int>(window_->sampling()->value("top_k"));
    const double temp = window_->sampling()->value("temperature");
    click(button("regenerate"));
    waitIdle();
    checkAnswer(54);
    const gbui::RequestInfo* tuned = shownRequest();
    QVERIFY(tuned->samplerJson.contains(QStringLiteral("\"top_k\":%1").arg(k)));
    QVERIFY(std::abs(QJsonDocument::fromJson(tuned->samplerJson.toUtf8()).object().value("temperature").toDouble() - temp) < 1e-6);
    const int topKStage = static_cast<int>(tuned->tokens.front().stages.indexOf("top_k"));
    QVERIFY(topKStage >= 0);
    for (const gbui::UiToken& t : tuned->tokens) QVERIFY(t.numAfterStage[topKStage] <= k);
  }

  void startAndStopAGenerationMidway() {
    gbui::TokenView* view = window_->chat()->view();
    // Start a generation and stop it midway. The engine is paused from its menu
    // and stepped by hand, standing in for a slow model.
    chooseMenu("Engine", "actionPause");
    QTRY_VERIFY(window_->findChild<QAction*>("actionPause")->isChecked());
    click(button("regenerate"));
    QTRY_VERIFY(button("stop")->isEnabled());
    QCOMPARE(status(), QStringLiteral("generating..."));
    gbui::EngineController* c = window_->controller();
    for (int i = 0; i < 25; ++i) onEngineThread([c] { bool did = c->stepOnce(); c->flush(); return did; });
    QTRY_VERIFY(shownRequest() && shownRequest()->tokens.size() >= 20);
    QTRY_COMPARE(view->numTokenSpans(), static_cast<int>(shownRequest()->tokens.size()));
    QVERIFY(button("stop")->isEnabled() && !button("send")->isEnabled());
    click(button("stop"));
    waitIdle();
    checkAnswer(55);
    QVERIFY(status().contains("cancelled"));
    const gbui::RequestInfo* stopped = shownRequest();
    QVERIFY(stopped->finish.numGenerated > 10 && stopped->finish.numGenerated < 300);
    QCOMPARE(static_cast<int>(stopped->tokens.size()), stopped->finish.numGenerated);
    chooseMenu("Engine", "actionPause");
    QTRY_VERIFY(!window_->findChild<QAction*>("actionPause")->isChecked());
  }

  void releaseWhatOldAnswersKeep() {
    gbui::ChatPanel* chat = window_->chat();
    gbui::EngineController* c = window_->controller();
    // New conversation (Ctrl+N), then release what the old answers keep.
    window_->activateWindow();  // back from the menus
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    QTest::keyClick(QApplication::focusWidget() ? QApplication::focusWidget() : window_.get(), Qt::Key_N,
                    Qt::ControlModifier);
    QVERIFY(chat->conversation().turns.isEmpty());
    QVERIFY(!button("regenerate")->isEnabled());
    QTRY_VERIFY(window_->kvCache()->releaseButton()->isEnabled());
    click(window_->kvCache()->releaseButton());
    QTRY_VERIFY(onEngineThread([c] { return gbui::EngineProbe(*c).keptRequests().isEmpty(); }));
    QTRY_VERIFY(!window_->kvCache()->releaseButton()->isEnabled());
    checkKvPanel();
    liveBlocks_ = find<QLabel>("kvStats")->text().section('\n', 0, 0);
    QVERIFY2(liveBlocks_.startsWith("blocks: 0 used"), qPrintable(liveBlocks_));
  }

  void exportATraceAndOpenItAgain() {
    // Export the trace through the file dialog, then open it again.
    const QString trace = dir_.filePath("session.jsonl");
    QSignalSpy exported(window_.get(), &gbui::MainWindow::exported);
    answerFileDialog(trace);
    chooseMenu("File", "actionExportTrace");
    QVERIFY(exported.count() > 0 || exported.wait(60000));  // liveness bounds: ASan on a loaded 2-core machine is slow
    QCOMPARE(exported.front().at(1).toString(), QString());
    QVERIFY(QFile::exists(trace));
    const size_t numRequests = window_->sessionModel()->requests().size();
    QSignalSpy opened(window_.get(), &gbui::MainWindow::traceReady);
    answerFileDialog(trace);
    chooseMenu("File", "actionOpenTrace");
    QVERIFY(opened.count() > 0 || opened.wait(60000));
    QVERIFY(find<QLabel>("statusModel")->text().startsWith("Replay:"));
    QCOMPARE(window_->sessionModel()->requests().size(), numRequests);
    QCOMPARE(find<QLabel>("kvStats")->text().section('\n', 0, 0), liveBlocks_);
    QVERIFY(!window_->kvCache()->releaseButton()->isEnabled());
    QVERIFY(window_->chat()->view()->numTokenSpans() > 0);
  }

  void theEngineEndsIdleAndAsleep() {
    // Idle, not scheduled while idle, every block free or cached.
    gbui::EngineController* c = window_->controller();
    QVERIFY(!onEngineThread([c] { return c->hasWork(); }));
    const QStringList snap = onEngineThread([c] { return gbui::EngineProbe(*c).kvSnapshotSummary(); }).split(' ');
    QCOMPARE(snap.at(0), QStringLiteral("0"));
    QCOMPARE(snap.at(1).toInt() + snap.at(2).toInt(), snap.at(3).toInt());
    QTest::qWait(100);  // let the last queued call return to the event loop
    const ThreadCounters before = engineThreadCounters();
    QVERIFY2(before.found, "no thread named glassbox-engine");
    QTest::qWait(600);
    const ThreadCounters after = engineThreadCounters();
    QCOMPARE(after.switches, before.switches);
    QCOMPARE(after.ticks, before.ticks);
  }

  void cleanupTestCase() { window_.reset(); }
};

GB_QTEST_MAIN(UiUserSessionTest);
#include "ui_user_session_test.moc"
