// The workbench's chat path: turns go to the engine as messages and come back
// with the prompt the engine rendered (the model's template by default, a
// built-in format when chosen); "Show prompt" shows that exact text and its
// tokens against the context length; the fallback warning is visible; a second
// turn reuses the KV prefix of the first; reasoning is found and folded.
#include <QApplication>
#include <QCheckBox>
#include <QFile>
#include <QLabel>

#include "gb_qtest_main.h"
#include "chat/prompt_view.h"
#include "ui_test_support.h"

using namespace gbuitest;

namespace {

gbui::UiToken token(const QString& text) {
  gbui::UiToken t;
  t.text = text;
  return t;
}

}  // namespace

class UiChatTemplateTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    QVERIFY(dir_.isValid());
    window_ = makeWindow(dir_);
    QVERIFY(loadStories(*window_));
    window_->sampling()->setSettingsJson(kGreedyJson);
  }

  void chatTurnsAreRenderedByTheEngine() {
    gbui::ChatPanel* chat = window_->chat();
    chat->clearConversation();
    // The stories model has no chat template: it opens in completion mode.
    QVERIFY(chat->completionMode());
    chat->setCompletionMode(false);
    QCOMPARE(chat->format(), QStringLiteral("model"));
    chat->setFormat(QStringLiteral("chatml"));
    QVERIFY(chatTurn(*window_, QStringLiteral("Once upon a time"), 8));
    const gbui::UiChatPrompt* p = chat->promptFor(1);
    QVERIFY(p != nullptr);
    QCOMPARE(p->format, QStringLiteral("chatml"));
    QCOMPARE(p->text, QStringLiteral("<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n"));
    QCOMPARE(p->ids.size(), p->pieces.size());
    QCOMPARE(p->contextLength, 512);
    // The engine's prompt is what the request was given.
    const gbui::RequestInfo* r = window_->sessionModel()->request(chat->conversation().turns.back().currentRequest());
    QVERIFY(r != nullptr);
    QCOMPARE(r->promptIds, p->ids);
    QVERIFY(chat->warningText().isEmpty());

    chat->showPrompt();
    gbui::PromptView* view = chat->promptView();
    QVERIFY(view != nullptr && view->isVisible());
    QCOMPARE(view->promptText(), p->text);
    QVERIFY2(view->summaryText().contains(QStringLiteral("%1 tokens of 512").arg(p->ids.size())),
             qPrintable(view->summaryText()));
    view->close();
  }

  void secondTurnReusesTheKvPrefix() {
    gbui::ChatPanel* chat = window_->chat();
    QVERIFY(chatTurn(*window_, QStringLiteral("The end"), 8));
    const gbui::UiChatPrompt* p1 = chat->promptFor(1);
    const gbui::UiChatPrompt* p3 = chat->promptFor(3);
    QVERIFY(p1 && p3);
    QVERIFY(p3->text.startsWith(p1->text));
    const gbui::RequestInfo* r = window_->sessionModel()->request(chat->conversation().turns.back().currentRequest());
    QVERIFY(r && r->finished);
    QVERIFY2(r->finish.numCachedTokens >= 16, qPrintable(QString::number(r->finish.numCachedTokens)));
  }

  void fallbackWarningIsVisible() {
    gbui::ChatPanel* chat = window_->chat();
    gbui::UiChatPrompt p;
    p.tag = 99;
    p.warning = QStringLiteral("the model's chat template does not parse (line 3, column 7: unknown tag 'x')");
    chat->onChatPrompt(p);
    QVERIFY(chat->warningText().contains(QStringLiteral("line 3, column 7")));
    chat->clearConversation();
    QVERIFY(chat->warningText().isEmpty());
  }

  // findReasoning over the tokens of one list, as the chat passes an answer.
  static gbui::ReasoningRange reasoningOf(const std::vector<gbui::UiToken>& tokens) {
    gbui::TokenList list;
    for (const gbui::UiToken& t : tokens) list.push_back(t);
    gbui::TokenSeq seq;
    seq.append(list, 0, list.size());
    return gbui::findReasoning(seq);
  }

  void reasoningIsFoundAndCounted() {
    // <think> split over tokens, closed: the markers' tokens belong to the block.
    std::vector<gbui::UiToken> t = {token("Sure"), token("<"), token("think>"), token("hmm"), token("</think>"), token("\n42")};
    gbui::ReasoningRange r = reasoningOf(t);
    QCOMPARE(r.begin, 1);
    QCOMPARE(r.end, 5);
    QVERIFY(r.closed);
    // Still thinking.
    r = reasoningOf({token("<think>"), token("a"), token("b")});
    QCOMPARE(r.size(), 3);
    QVERIFY(!r.closed);
    // DeepSeek-R1: the template opened <think> in the prompt.
    r = reasoningOf({token("x"), token("</think>"), token("y")});
    QCOMPARE(r.begin, 0);
    QCOMPARE(r.end, 2);
    QCOMPARE(reasoningOf({token("plain")}).size(), 0);
  }

  void promptViewShowsControlTokensAsWritten() {
    QCOMPARE(gbui::PromptView::displayPiece(QStringLiteral("<|im_start|>"), true), QStringLiteral("<|im_start|>"));
    QCOMPARE(gbui::PromptView::displayPiece(QStringLiteral("\u2581the"), false), QStringLiteral("\u00b7the"));
    gbui::UiChatPrompt p;
    p.ids = {1, 2, 3, 4};
    p.control = {true, false, false, true};
    p.contextLength = 400;
    QCOMPARE(gbui::PromptView::countText(p), QStringLiteral("4 tokens of 400 (1.0%), 2 control"));
  }

 private:
  QTemporaryDir dir_;
  std::unique_ptr<gbui::MainWindow> window_;
};

GB_QTEST_MAIN(UiChatTemplateTest);
#include "ui_chat_template_test.moc"
