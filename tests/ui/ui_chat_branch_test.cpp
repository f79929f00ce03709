// Editing an earlier chat message in the workbench, on tiny-qwen2 (its own
// Qwen2.5 template), driven by real clicks and keys: two turns are sent, the
// first user message is double-clicked in the transcript, changed and sent.
// The edit is a new node of the Branches tree under a request of the old
// conversation; the engine reused exactly the common token prefix of the old
// and new renderings (computed here from the prompts' ids); the old path with
// its later turns comes back through the Branches panel. Editing the system
// prompt and regenerating branch the same way. The Compare view takes the
// current chat as its prompt. The session file and an exported trace keep the
// tree and the conversation's paths; reopening restores them, and an old
// session file without a tree still opens.
#include <QApplication>
#include <QCheckBox>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTextDocument>
#include <QTreeWidget>

#include <tuple>

#include "panels/branches_panel.h"
#include "panels/compare_view.h"
#include "bridge/engine_controller.h"
#include "gb_qtest_main.h"
#include "chat/token_view.h"
#include "ui_test_support.h"
#include "session/ui_commands.h"

using namespace gbuitest;

namespace {

QString qwenPath() { return sharedFile("models/tiny-qwen2/tiny-qwen2-F16.gguf"); }

int commonPrefix(const QVector<int>& a, const QVector<int>& b) {
  int n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

class UiChatBranchTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<gbui::MainWindow> window_;

  template <typename T>
  T* find(const char* name) const {
    T* w = window_->findChild<T*>(QLatin1String(name));
    if (!w) qWarning("no widget named %s", name);
    return w;
  }
  QPushButton* button(const char* name) const { return find<QPushButton>(name); }
  gbui::ChatPanel* chat() const { return window_->chat(); }
  const gbui::Conversation& conv() const { return chat()->conversation(); }
  const gbui::RequestInfo* request(quint64 key) const { return window_->sessionModel()->request(key); }

  void click(QAbstractButton* b) {
    QVERIFY(b);
    QVERIFY2(b->isVisible() && b->isEnabled(), qPrintable(b->objectName() + " is not clickable"));
    QTest::mouseClick(b, Qt::LeftButton);
  }
  void waitIdle() { QTRY_VERIFY_WITH_TIMEOUT(button("send")->isEnabled() && chat()->activeRequest() == 0, 60000); }

  void typeAndSend(const QString& text) {
    auto* input = find<QPlainTextEdit>("chatInput");
    QTest::mouseClick(input->viewport(), Qt::LeftButton);
    QTest::keyClick(input, Qt::Key_A, Qt::ControlModifier);
    QTest::keyClicks(input, text);
    QTest::keyClick(input, Qt::Key_Return, Qt::ControlModifier);
    waitIdle();
  }

  // Double-clicks the message of `turn` (-1: the system prompt) in the transcript.
  void doubleClickMessage(int turn) {
    gbui::TokenView* view = chat()->view();
    const auto range = view->messageRange(turn);
    QVERIFY(range.has_value());
    QTextCursor c(view->document());
    c.setPosition(range->first + 1);
    view->ensureCursorVisible();
    const QPoint at = view->cursorRect(c).center();
    const std::optional<int> under = view->messageAt(view->cursorForPosition(at).position());
    QVERIFY(under.has_value() && *under == turn);
    QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, at);
  }

  // The newest answer as a branch: its parent, and the reused prompt tokens equal
  // the common prefix of its rendering and the parent's tokens.
  void checkBranch(const gbui::RequestInfo& r, const QVector<quint64>& oldRequests) {
    QVERIFY(r.finished);
    QVERIFY(r.parent.has_value());
    QVERIFY2(oldRequests.contains(*r.parent), "the edit branches from a request of the old conversation");
    const gbui::RequestInfo* parent = request(*r.parent);
    QVERIFY(parent);
    const int common = commonPrefix(r.promptIds, parent->allTokenIds());
    QVERIFY(common > 0 && common < r.promptIds.size());
    QCOMPARE(r.forkPosition, common);
    QCOMPARE(r.finish.numCachedTokens, common);
    // The tree: the edit is a child of the request it branched from.
    gbui::BranchesPanel* panel = window_->branchesPanel();
    QTreeWidgetItem* item = panel->itemOf(r.key);
    QVERIFY(item && item->parent());
    QCOMPARE(item->parent(), panel->itemOf(*r.parent));
    QVERIFY2(item->text(0).startsWith(QStringLiteral("edit at token %1").arg(common)), qPrintable(item->text(0)));
  }

  // Code review U4: a submit or a branch switch redraws only the turn that
  // changed. Checked two ways: the document is changed only from that turn's
  // start on, and the result equals a full redraw (text, token spans, colours).
  struct Drawn {
    QString text;
    std::vector<std::tuple<quint64, int, QColor>> spans;
    bool operator==(const Drawn&) const = default;
  };
  Drawn drawn() const {
    gbui::TokenView* view = chat()->view();
    Drawn d{view->transcriptText(), {}};
    for (int i = 0; i < view->numTokenSpans(); ++i)
      d.spans.emplace_back(view->spanToken(i)->request, view->spanToken(i)->index, view->spanColor(i));
    return d;
  }
  void checkEqualsAFullRedraw() {
    const Drawn partial = drawn();
    chat()->setConversation(chat()->conversation());  // redraws every turn
    const Drawn full = drawn();
    QCOMPARE(partial.text, full.text);
    QVERIFY2(partial == full, "token spans differ from a full redraw");
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(qwenPath()), qPrintable("missing test data: " + qwenPath()));
    QVERIFY(dir_.isValid());
    window_ = makeWindow(dir_);
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    QSignalSpy ready(window_.get(), &gbui::MainWindow::modelReady);
    window_->openModel(qwenPath());
    QVERIFY(ready.wait(60000));
    window_->sampling()->setSettingsJson(kGreedyJson);
    auto* maxTokens = find<QSpinBox>("maxTokens");
    QTest::mouseClick(maxTokens, Qt::LeftButton);
    QTest::keyClick(maxTokens, Qt::Key_A, Qt::ControlModifier);
    QTest::keyClicks(maxTokens, "6");
    QTest::keyClick(maxTokens, Qt::Key_Tab);
    QCOMPARE(maxTokens->value(), 6);
  }

  void editAnEarlierMessage() {
    auto* system = find<QLineEdit>("systemPrompt");
    QTest::mouseClick(system, Qt::LeftButton);
    QTest::keyClicks(system, "You are a brief assistant.");
    typeAndSend("Tell me something about the sea and its tides.");
    typeAndSend("And what about the sky at night?");
    QCOMPARE(conv().turns.size(), 4);
    const QVector<quint64> old = conv().requestsOfPath();
    const quint64 oldLast = conv().turns[3].currentRequest();

    doubleClickMessage(0);
    auto* input = find<QPlainTextEdit>("chatInput");
    QCOMPARE(input->toPlainText(), QStringLiteral("Tell me something about the sea and its tides."));
    QVERIFY(button("cancelEdit")->isVisible());
    QVERIFY2(find<QLabel>("chatStatus")->text().contains("Editing message 1"), qPrintable(find<QLabel>("chatStatus")->text()));
    typeAndSend("Tell me something about the sea and its fish.");

    // The new path: the edited message and its answer; the old one is kept.
    QCOMPARE(conv().turns.size(), 2);
    QCOMPARE(conv().turns[0].text, QStringLiteral("Tell me something about the sea and its fish."));
    QCOMPARE(conv().otherPaths.size(), 1);
    QCOMPARE(conv().otherPaths[0].turns.size(), 4);
    QVERIFY(!button("cancelEdit")->isVisible());
    const gbui::RequestInfo* r = request(conv().turns[1].currentRequest());
    QVERIFY(r);
    checkBranch(*r, old);
    // Independently: the common prefix of the two renderings of the first turn.
    const gbui::RequestInfo* oldFirst = request(old.front());
    QCOMPARE(r->finish.numCachedTokens, commonPrefix(r->promptIds, oldFirst->promptIds));
    QVERIFY(chat()->view()->toPlainText().contains("its fish."));
    QVERIFY(!chat()->view()->toPlainText().contains("sky at night"));

    // The old conversation, later turns included, comes back from the tree.
    gbui::BranchesPanel* panel = window_->branchesPanel();
    QTreeWidgetItem* item = panel->itemOf(oldLast);
    QVERIFY(item);
    panel->tree()->scrollToItem(item);
    // On the item's first column (the row may be wider than the dock).
    const QRect row = panel->tree()->visualItemRect(item);
    QTest::mouseClick(panel->tree()->viewport(), Qt::LeftButton, {}, QPoint(row.left() + 8, row.center().y()));
    QCOMPARE(panel->selectedRequest(), oldLast);
    click(button("branchesSwitch"));
    QCOMPARE(conv().turns.size(), 4);
    QCOMPARE(conv().turns[3].currentRequest(), oldLast);
    QVERIFY(chat()->view()->toPlainText().contains("sky at night"));
    QCOMPARE(conv().otherPaths.size(), 1);
    QCOMPARE(conv().otherPaths[0].turns.size(), 2);
  }

  void editTheSystemPromptAndRegenerate() {
    const QVector<quint64> old = conv().requestsOfPath();
    doubleClickMessage(-1);
    QCOMPARE(find<QPlainTextEdit>("chatInput")->toPlainText(), QStringLiteral("You are a brief assistant."));
    typeAndSend("You are a patient assistant.");
    QCOMPARE(conv().systemPrompt, QStringLiteral("You are a patient assistant."));
    QCOMPARE(find<QLineEdit>("systemPrompt")->text(), conv().systemPrompt);
    QCOMPARE(conv().turns.size(), 2);  // the first message, answered again
    QCOMPARE(conv().otherPaths.size(), 2);
    const gbui::RequestInfo* r = request(conv().turns[1].currentRequest());
    QVERIFY(r);
    checkBranch(*r, old);

    // Regenerate: a branch of the shown answer that reuses all of its prompt but
    // the last token (recomputed for its logits).
    const quint64 shown = conv().turns[1].currentRequest();
    click(button("regenerate"));
    waitIdle();
    const gbui::RequestInfo* again = request(conv().turns[1].currentRequest());
    QVERIFY(again && again->key != shown && again->finished);
    QVERIFY(again->parent.has_value() && *again->parent == shown);
    QCOMPARE(again->finish.numCachedTokens, static_cast<int>(again->promptIds.size()) - 1);
    QCOMPARE(conv().turns[1].branches.size(), 2);
  }

  void compareOnTheCurrentChat() {
    // The Compare view's prompt is the chat up to its last answer, rendered by
    // the model's template: exactly the prompt of that answer's request.
    gbui::CompareView* cv = window_->compareView();
    const gbui::RequestInfo* shown = request(conv().turns.back().currentRequest());
    QVERIFY(shown);
    auto* useChat = find<QCheckBox>("compareUseChat");
    window_->panel("compare")->parentWidget()->show();
    window_->panel("compare")->parentWidget()->raise();
    QTRY_VERIFY(useChat->isVisible());
    click(useChat);
    QVERIFY(cv->useChat());
    QVERIFY(!find<QLineEdit>("comparePrompt")->isEnabled());
    cv->setMaxTokens(4);
    QSignalSpy done(cv, &gbui::CompareView::finished);
    click(button("compareRun"));
    QVERIFY(done.wait(60000));
    const QJsonObject root = QJsonDocument::fromJson(cv->resultJson().toUtf8()).object();
    QVERIFY2(!root.isEmpty(), qPrintable(cv->status()));
    QVector<int> ids;
    for (const QJsonValue& v : root.value("prompt_ids").toArray()) ids.push_back(v.toInt());
    QCOMPARE(ids, shown->promptIds);
    QVERIFY(root.value("prompt").toString().contains(QStringLiteral("<|im_start|>assistant\n")));
    click(button("compareRelease"));
    click(useChat);
  }

  // The tree as it is on screen: for each request of the conversation, its
  // answer text and its parent's text ("" for a root), and which are shown.
  static QStringList treeShape(const gbui::MainWindow& w) {
    QStringList out;
    const gbui::Conversation& c = w.chat()->conversation();
    QVector<QVector<gbui::Turn>> paths{c.turns};
    for (const gbui::ConversationPath& p : c.otherPaths) paths.push_back(p.turns);
    for (const auto& path : paths)
      for (const gbui::Turn& t : path)
        for (quint64 k : t.branches) {
          const gbui::RequestInfo* r = w.sessionModel()->request(k);
          if (!r) return {QStringLiteral("unknown request %1").arg(k)};
          QString text;
          for (const gbui::UiToken& tok : r->tokens) text += tok.text;
          const gbui::RequestInfo* p = r->parent ? w.sessionModel()->request(*r->parent) : nullptr;
          QString parentText = r->parent ? QStringLiteral("?") : QString();
          if (p) {
            parentText.clear();
            for (const gbui::UiToken& tok : p->tokens) parentText += tok.text;
          }
          out << QStringLiteral("%1 <- %2 @%3 p=%4 %5")
                     .arg(text, parentText)
                     .arg(r->forkPosition)
                     .arg(w.sessionModel()->forkProbability(k), 0, 'f', 4)
                     .arg(t.currentRequest() == k ? "current" : "");
        }
    return out;
  }

  void sessionFileKeepsTheTree() {
    // Branch from an alternative token too, so the tree has a token fork with a
    // probability at the fork.
    const quint64 shown = conv().turns.back().currentRequest();
    const gbui::RequestInfo* r = request(shown);
    QVERIFY(r && r->tokens.size() >= 2 && r->tokens[1].top.size() >= 2);
    const int alt = r->tokens[1].top[1].id;
    QMetaObject::invokeMethod(window_->controller(), [c = window_->controller(), shown, n = int(r->promptIds.size()) + 1, alt] {
      c->fork(gbui::ForkCommand{1, shown, n, alt, 4});
    });
    QTRY_VERIFY_WITH_TIMEOUT(conv().turns[1].branches.size() == 3 && chat()->activeRequest() == 0 &&
                                 request(conv().turns[1].currentRequest())->finished, 30000);
    QVERIFY(window_->sessionModel()->forkProbability(conv().turns[1].currentRequest()) > 0.0);
    const QStringList before = treeShape(*window_);
    QCOMPARE(before.size(), 6);  // 3 answers on screen, 3 on the paths left by the edits
    window_->saveSession();

    // Reopened: the same conversation paths and the same tree, from the file.
    QTemporaryDir other;
    QVERIFY(QFile::copy(dir_.filePath("session.json"), other.filePath("session.json")));
    auto reopened = makeWindow(other);
    QCOMPARE(treeShape(*reopened), before);
    const gbui::Conversation& c = reopened->chat()->conversation();
    QCOMPARE(c.turns.size(), conv().turns.size());
    QCOMPARE(c.otherPaths.size(), conv().otherPaths.size());
    QCOMPARE(c.systemPrompt, conv().systemPrompt);
    for (const gbui::Turn& t : c.turns)
      for (quint64 k : t.branches) QVERIFY(gbui::isRestoredKey(k));
    QCOMPARE(reopened->chat()->view()->toPlainText(), chat()->view()->toPlainText());
    gbui::BranchesPanel* panel = reopened->branchesPanel();
    QTreeWidgetItem* item = panel->itemOf(c.turns[1].currentRequest());
    QVERIFY(item && item->parent());
    QVERIFY2(item->text(5).contains("saved"), qPrintable(item->text(5)));
    // A request of the new engine never takes a restored one's place.
    QSignalSpy ready(reopened.get(), &gbui::MainWindow::modelReady);
    reopened->openModel(qwenPath());
    QVERIFY(ready.wait(60000));
    QCOMPARE(treeShape(*reopened), before);
    const int numTurns = static_cast<int>(c.turns.size());
    reopened->chat()->setInputText(QStringLiteral("One more question."));
    reopened->chat()->send();
    QTRY_VERIFY_WITH_TIMEOUT(reopened->chat()->conversation().turns.size() == numTurns + 2 &&
                                 !reopened->chat()->conversation().turns.back().branches.isEmpty() &&
                                 reopened->chat()->activeRequest() == 0,
                             60000);
    QVERIFY(!gbui::isRestoredKey(reopened->chat()->conversation().turns.back().currentRequest()));
    const QStringList after = treeShape(*reopened);
    QCOMPARE(after.size(), before.size() + 1);
    for (const QString& node : before) QVERIFY2(after.contains(node), qPrintable(node));
  }

  void oldSessionFileWithoutTreeOpens() {
    QTemporaryDir old;
    QFile f(old.filePath("session.json"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"model": "", "conversation": {"system": "Be kind.", "completion": false, "format": "model",
               "turns": [{"role": "user", "text": "Hello", "branches": [], "current": 0},
                         {"role": "assistant", "text": "Hi there!", "branches": ["3"], "current": 0}]}})");
    f.close();
    auto w = makeWindow(old);
    const gbui::Conversation& c = w->chat()->conversation();
    QCOMPARE(c.turns.size(), 2);
    QCOMPARE(c.otherPaths.size(), 0);
    QVERIFY(gbui::isRestoredKey(c.turns[1].currentRequest()));  // never an id of the new engine
    QVERIFY(w->chat()->view()->toPlainText().contains("Hi there!"));
    QCOMPARE(w->branchesPanel()->tree()->topLevelItemCount(), 0);
  }

  void exportedTraceKeepsTheTree() {
    const QStringList before = treeShape(*window_);
    const QString path = dir_.filePath("branches.jsonl");
    QSignalSpy exported(window_.get(), &gbui::MainWindow::exported);
    window_->exportTrace(path, "jsonl");
    QVERIFY(exported.wait(30000));
    QCOMPARE(exported.at(0).at(1).toString(), QString());
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QJsonObject header = QJsonDocument::fromJson(file.readLine()).object();
    const QJsonArray nodes = header.value("branches").toObject().value("nodes").toArray();
    QVERIFY(nodes.size() >= before.size());
    // Replayed: the conversation and the tree come back, the requests are the
    // trace's own (their ids as recorded).
    QTemporaryDir other;
    auto replay = makeWindow(other);
    QSignalSpy ready(replay.get(), &gbui::MainWindow::traceReady);
    replay->openTrace(path);
    QVERIFY(ready.wait(30000));
    QCOMPARE(replay->chat()->conversation().turns.size(), conv().turns.size());
    QCOMPARE(replay->chat()->conversation().otherPaths.size(), conv().otherPaths.size());
    QCOMPARE(replay->chat()->conversation().turns[1].currentRequest(), conv().turns[1].currentRequest());
    QCOMPARE(treeShape(*replay), before);
  }

  // Code review U4 (see drawn() above).
  void aSubmitOrABranchSwitchRedrawsOneTurn() {
    // The tests before end on a re-opened trace: load the model for a live chat.
    QSignalSpy ready(window_.get(), &gbui::MainWindow::modelReady);
    window_->openModel(qwenPath());
    QVERIFY(ready.wait(60000));
    window_->sampling()->setSettingsJson(kGreedyJson);
    chat()->clearConversation();
    window_->activateWindow();  // the send shortcut needs the window active (a re-opened one was)
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    typeAndSend("Tell me something about the sea.");
    QVERIFY2(conv().turns.size() == 2, qPrintable(QStringLiteral("%1 turns; status: %2").arg(conv().turns.size()).arg(find<QLabel>("chatStatus")->text())));
    QTextDocument* doc = chat()->view()->document();
    int firstChange = -1;
    const QMetaObject::Connection watch = connect(doc, &QTextDocument::contentsChange, this, [&](int from, int, int) {
      firstChange = firstChange < 0 ? from : std::min(firstChange, from);
    });
    // Send: the turns before stay untouched.
    const int endBefore = doc->characterCount() - 1;
    firstChange = -1;
    typeAndSend("One more question about waves.");
    QVERIFY2(firstChange >= endBefore - 1, qPrintable(QStringLiteral("changed from %1, the old end was %2").arg(firstChange).arg(endBefore)));
    checkEqualsAFullRedraw();
    // Regenerate, then switch back to the first answer: only the last turn is redrawn.
    click(button("regenerate"));
    waitIdle();
    checkEqualsAFullRedraw();
    const QString text = doc->toPlainText();
    const int lastTurn = static_cast<int>(text.lastIndexOf(QStringLiteral("Assistant")));
    QVERIFY(lastTurn > 0);
    firstChange = -1;
    click(button("prevBranch"));
    QVERIFY2(firstChange >= lastTurn - 1, qPrintable(QStringLiteral("changed from %1, the last turn starts at %2").arg(firstChange).arg(lastTurn)));
    checkEqualsAFullRedraw();
    disconnect(watch);
  }

  void cleanupTestCase() { window_.reset(); }
};

GB_QTEST_MAIN(UiChatBranchTest);
#include "ui_chat_branch_test.moc"
