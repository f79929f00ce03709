// Formats in the workbench against the real engine on stories260K (issue #40):
// a grammar set in the Sampling panel's Format box constrains the answer, every
// token carries the grammar stage's record into the chat, the inspector and
// the Performance panel; a grammar that does not compile is refused at submit
// with its position in the panel and the chat; the exported trace re-opens
// with the grammar records, and the same trace without them (as written before
// formats existed) still opens.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPlainTextEdit>
#include <QRegularExpression>
#include <qcustomplot.h>

#include "chat/token_view.h"
#include "gb_qtest_main.h"
#include "panels/format_box.h"
#include "panels/performance_panel.h"
#include "panels/token_inspector_panel.h"
#include "ui_test_support.h"

using namespace gbuitest;

namespace {

// Lower-case words after a fixed start, ending in a full stop.
const char* kGrammar = "root ::= \"Once upon a time\" (\" \" [a-z]{1,12}){3,8} \".\"\n";

// Every "grammar" object removed, recursively (a trace as written before formats).
QJsonValue withoutGrammar(const QJsonValue& v) {
  if (v.isObject()) {
    QJsonObject o = v.toObject();
    o.remove(QStringLiteral("grammar"));
    for (auto it = o.begin(); it != o.end(); ++it) *it = withoutGrammar(*it);
    return o;
  }
  if (v.isArray()) {
    QJsonArray a = v.toArray();
    for (qsizetype i = 0; i < a.size(); ++i) a[i] = withoutGrammar(a[i]);
    return a;
  }
  return v;
}

}  // namespace

class UiFormatModelTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    QVERIFY(dir_.isValid());
  }

  void grammarConstrainsAndIsShown() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(R"({"temperature":1,"top_k":0,"top_p":1,"min_p":0,"seed":5})"),
             QString());
    gbui::FormatBox* box = window->sampling()->format();
    box->setFormat(QStringLiteral("gbnf"), QString::fromLatin1(kGrammar));
    QVERIFY2(box->lastCheck().ok(), qPrintable(box->lastCheck().error));
    QVERIFY(generate(*window, QStringLiteral("Lily"), 200));
    const gbui::RequestKey key = window->chat()->conversation().turns.back().currentRequest();
    const gbui::RequestInfo* r = window->sessionModel()->request(key);
    QVERIFY(r && !r->tokens.empty());
    QString text;
    int numForced = 0;
    for (const gbui::UiToken& t : r->tokens) {
      QVERIFY2(t.grammar, "every token of a request with a format has a grammar record");
      QVERIFY(t.grammar->numAllowed >= 1);
      QVERIFY(t.grammar->massAllowed >= 0.0f && t.grammar->massAllowed <= 1.0f);
      QVERIFY(t.stages.contains(QStringLiteral("grammar")));
      text += t.text;
      numForced += t.grammar->forced ? 1 : 0;
    }
    static const QRegularExpression shape(QStringLiteral("^Once upon a time( [a-z]{1,12}){3,8}\\.$"));
    QVERIFY2(shape.match(text).hasMatch(), qPrintable(text));
    // The chat: forced tokens on their own colour, the others on the scale.
    gbui::TokenView* view = window->chat()->view();
    for (int i = 0; i < view->numTokenSpans(); ++i) {
      const std::optional<gbui::UiToken> t = view->spanToken(i);
      QVERIFY(t);
      QCOMPARE(view->spanColor(i) == gbui::TokenView::forcedColor(), gbui::TokenView::isForced(*t));
    }
    auto* legend = window->chat()->findChild<QLabel*>(QStringLiteral("forcedLegend"));
    QCOMPARE(!legend->isHidden(), numForced > 0);
    // The inspector's grammar line for the first token.
    window->sessionModel()->selectToken(key, 0);
    QLabel* line = window->inspector()->grammarLabel();
    QVERIFY(!line->isHidden());
    QVERIFY2(line->text().contains(QStringLiteral("of the raw probability mass")), qPrintable(line->text()));
    // The Performance panel: a mass-removed point per token.
    QCOMPARE(window->performance()->numMassRemovedPoints(), static_cast<int>(r->tokens.size()));
    QVERIFY(window->performance()->massRemovedPlot()->isVisibleTo(window->performance()));
    qInfo("stories260K under \"%s\": \"%s\", %d tokens, %d forced", kGrammar, qPrintable(text),
          static_cast<int>(r->tokens.size()), numForced);

    // The trace re-opens with the grammar records.
    const QString path = dir_.filePath("format.jsonl");
    QSignalSpy exported(window.get(), &gbui::MainWindow::exported);
    window->exportTrace(path, "jsonl");
    QVERIFY(exported.wait(30000));
    QCOMPARE(exported.at(0).at(1).toString(), QString());
    auto replay = makeWindow(dir_);
    QSignalSpy ready(replay.get(), &gbui::MainWindow::traceReady);
    replay->openTrace(path);
    QVERIFY(ready.wait(30000));
    const gbui::RequestInfo* back = replay->sessionModel()->request(key);
    QVERIFY(back);
    QCOMPARE(back->tokens.size(), r->tokens.size());
    for (size_t i = 0; i < r->tokens.size(); ++i) {
      QVERIFY(back->tokens[i].grammar);
      QCOMPARE(back->tokens[i].grammar->numAllowed, r->tokens[i].grammar->numAllowed);
      QCOMPARE(back->tokens[i].grammar->massAllowed, r->tokens[i].grammar->massAllowed);
      QCOMPARE(back->tokens[i].grammar->state, r->tokens[i].grammar->state);
    }
    QCOMPARE(replay->performance()->numMassRemovedPoints(), static_cast<int>(r->tokens.size()));

    // Without the grammar records (a trace from before formats): it opens, and
    // the panels show no grammar.
    QFile in(path);
    QVERIFY(in.open(QIODevice::ReadOnly));
    QByteArray old;
    int numStripped = 0;
    while (!in.atEnd()) {
      const QByteArray lineBytes = in.readLine().trimmed();
      if (lineBytes.isEmpty()) continue;
      const QJsonDocument doc = QJsonDocument::fromJson(lineBytes);
      QVERIFY(doc.isObject());
      const QJsonObject stripped = withoutGrammar(doc.object()).toObject();
      numStripped += stripped != doc.object() ? 1 : 0;
      old += QJsonDocument(stripped).toJson(QJsonDocument::Compact) + '\n';
    }
    QVERIFY(numStripped >= static_cast<int>(r->tokens.size()));
    const QString oldPath = dir_.filePath("format-old.jsonl");
    QFile out(oldPath);
    QVERIFY(out.open(QIODevice::WriteOnly));
    QVERIFY(out.write(old) == old.size());
    out.close();
    QTemporaryDir other;
    auto oldReplay = makeWindow(other);
    QSignalSpy oldReady(oldReplay.get(), &gbui::MainWindow::traceReady);
    oldReplay->openTrace(oldPath);
    QVERIFY(oldReady.wait(30000));
    const gbui::RequestInfo* plain = oldReplay->sessionModel()->request(key);
    QVERIFY(plain);
    QCOMPARE(plain->tokens.size(), r->tokens.size());
    for (const gbui::UiToken& t : plain->tokens) QVERIFY(!t.grammar);
    oldReplay->sessionModel()->selectToken(key, 0);
    QVERIFY(oldReplay->inspector()->grammarLabel()->isHidden());
    QCOMPARE(oldReplay->performance()->numMassRemovedPoints(), 0);
  }

  void brokenGrammarIsRefusedAtSubmit() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    gbui::FormatBox* box = window->sampling()->format();
    box->setFormat(QStringLiteral("gbnf"), QStringLiteral("root ::= word \".\"\nword ::= [a-z+\n"));
    QVERIFY(!box->lastCheck().ok());
    QCOMPARE(box->lastCheck().line, 2);
    gbui::Conversation c;
    c.completionMode = true;
    window->chat()->setConversation(c);
    window->chat()->setInputText(QStringLiteral("Once"));
    window->chat()->send();
    auto* status = window->chat()->findChild<QLabel*>(QStringLiteral("chatStatus"));
    QVERIFY(status);
    QVERIFY(QTest::qWaitFor([&] { return status->text().startsWith(QStringLiteral("Error")); }, 30000));
    QVERIFY2(status->text().contains(QStringLiteral("line 2")), qPrintable(status->text()));
    QCOMPARE(window->chat()->activeRequest(), gbui::RequestKey{0});
    // The panel shows the same position, the cursor on it.
    QVERIFY(box->errorLabel()->text().contains(QStringLiteral("line 2, column")));
    QCOMPARE(box->editor()->textCursor().blockNumber(), 1);
  }

 private:
  QTemporaryDir dir_;
};

GB_QTEST_MAIN(UiFormatModelTest);
#include "ui_format_model_test.moc"
