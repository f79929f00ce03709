// Code review U4: a submit, a branch switch, an edit and the redraw of an
// answer with reasoning redraw the chat from the first turn that changed, not
// the whole conversation. Two things are checked after each action:
// - the document equals what a full redraw (ChatPanel::rerender) builds from the
//   same conversation: text, block count, soft breaks, every block's text, block
//   format and character formats, every token span's token, format, colour and tooltip,
//   the token under sample positions and the user messages' ranges;
// - the blocks before the changed turn were not touched: their QTextBlock
//   revision is unchanged and no contentsChange started before the cut.
// The answers are synthetic token streams (no model), delivered through
// SessionModel in frame-sized batches like live events: several paragraphs
// longer than the view's block limit (so they hold soft breaks), code blocks
// and <think> reasoning, in chat mode (a label starts each turn) and completion
// mode (an answer continues its prompt's paragraph).
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "chat/chat_panel.h"
#include "gb_qtest_main.h"
#include "session/session_model.h"
#include "chat/token_view.h"

namespace {

constexpr int kMaxBlockChars = 90;  // small: every long paragraph is split several times

// Answer `variant`: paragraphs of 150-400 characters, a code block, and (when
// `reasoning`) a <think> block of two paragraphs first.
QString answerText(int variant, bool reasoning) {
  static const QStringList words = {"the", "sea", "waves", "rolled", "over", "sand", "and", "a", "small", "boat",
                                    "drifted", "towards", "lighthouse", "while", "gulls", "cried", "above", "it"};
  auto paragraph = [&](int seed, int numWords) {
    QString p;
    for (int w = 0; w < numWords; ++w) p += (w ? QStringLiteral(" ") : QString()) + words[(seed * 7 + w * 5 + w * w) % words.size()];
    return p + QStringLiteral(".");
  };
  QString text;
  if (reasoning) text += QStringLiteral("<think>") + paragraph(variant + 11, 30) + QStringLiteral("\n\n") + paragraph(variant + 12, 25) + QStringLiteral("</think>\n\n");
  text += paragraph(variant, 40 + variant % 5 * 9) + QStringLiteral("\n\n");
  text += QStringLiteral("```cpp\nint wave(int n) {\n  return n * %1;  // a line of code long enough to wrap in a narrow view, once\n}\n```\n\n").arg(variant);
  text += paragraph(variant + 3, 60) + QStringLiteral("\n") + paragraph(variant + 4, 12);
  return text;
}

// Tokens of 1-4 characters and the space after them (so wrapped lines start
// at a token), a newline always a token of its own.
QStringList tokenize(const QString& text) {
  QStringList out;
  QString cur;
  for (const QChar c : text) {
    const bool newline = c == QLatin1Char('\n');
    if (newline || (cur.size() >= 4 && c != QLatin1Char(' '))) {
      if (!cur.isEmpty()) out << cur;
      cur.clear();
    }
    if (newline) {
      out << QStringLiteral("\n");
      continue;
    }
    cur += c;
    if (c == QLatin1Char(' ')) {
      out << cur;
      cur.clear();
    }
  }
  if (!cur.isEmpty()) out << cur;
  return out;
}

gbui::UiToken makeToken(gbui::RequestKey request, int index, const QString& text) {
  gbui::UiToken t;
  t.request = request;
  t.index = index;
  t.position = 8 + index;
  t.tokenId = 100 + index % 300;
  t.text = text;
  t.piece = text;
  t.prob = 0.2f + 0.7f * static_cast<float>((index * 7 + static_cast<int>(request)) % 10) / 10.0f;
  t.probBefore = t.prob;
  t.entropyBefore = 0.3f * static_cast<float>(index % 9);
  t.rank = index % 4;
  if (index % 23 == 5) t.origin = static_cast<int>(gbui::UiTokenOrigin::Accepted);
  for (int c = 0; c < 4; ++c) {
    gbui::UiCandidate cand;
    cand.id = c == 0 ? t.tokenId : 500 + c;
    cand.text = c == 0 ? text : QStringLiteral("alt%1").arg(c);
    cand.probBefore = 0.5f / static_cast<float>(c + 1);
    t.top.push_back(cand);
  }
  return t;
}

// What a document shows, per block and per token span (see the file comment).
struct Drawn {
  struct Block {
    QString text;
    QTextBlockFormat format;
    QTextCharFormat charFormat;
    std::vector<std::pair<int, QTextCharFormat>> fragments;  // (length, format)
  };
  QString transcript;
  int numSoftBreaks = 0;
  std::vector<Block> blocks;
  struct Span {
    gbui::RequestKey request = 0;
    int index = 0;
    QString text;
    QTextCharFormat format;
    QColor color;  // drawn under the token
    QString tooltip;
  };
  std::vector<Span> spans;
  std::vector<std::pair<gbui::RequestKey, int>> tokenAt;  // every 5th document position; (0, -1) none
  std::vector<std::optional<std::pair<int, int>>> messages;  // system prompt, then turns 0..
};

Drawn drawn(const gbui::TokenView& view, int numTurns) {
  Drawn d;
  d.transcript = view.transcriptText();
  d.numSoftBreaks = view.numSoftBreaks();
  for (QTextBlock b = view.document()->begin(); b.isValid(); b = b.next()) {
    Drawn::Block block{b.text(), b.blockFormat(), b.charFormat(), {}};
    for (auto it = b.begin(); !it.atEnd(); ++it) block.fragments.emplace_back(it.fragment().length(), it.fragment().charFormat());
    d.blocks.push_back(block);
  }
  for (int i = 0; i < view.numTokenSpans(); ++i) {
    const std::optional<gbui::UiToken> t = view.spanToken(i);
    if (!t) {
      d.spans.push_back({0, -1, QStringLiteral("<no record>"), view.spanFormat(i), view.spanColor(i), QString()});
      continue;
    }
    d.spans.push_back({t->request, t->index, t->text, view.spanFormat(i), view.spanColor(i), view.tooltipFor(*t)});
  }
  for (int pos = 0; pos < view.document()->characterCount(); pos += 5) {
    const std::optional<gbui::UiToken> t = view.tokenAt(pos);
    d.tokenAt.emplace_back(t ? t->request : 0, t ? t->index : -1);
  }
  for (int turn = -1; turn < numTurns; ++turn) d.messages.push_back(view.messageRange(turn));
  return d;
}

// The first difference between a document and its reference (a full redraw), empty if none.
QString difference(const Drawn& partial, const Drawn& full) {
  if (partial.transcript != full.transcript) return QStringLiteral("transcripts differ");
  if (partial.blocks.size() != full.blocks.size())
    return QStringLiteral("%1 blocks, the reference has %2 (soft breaks %3 / %4)")
        .arg(partial.blocks.size())
        .arg(full.blocks.size())
        .arg(partial.numSoftBreaks)
        .arg(full.numSoftBreaks);
  for (size_t i = 0; i < full.blocks.size(); ++i) {
    const Drawn::Block &p = partial.blocks[i], &f = full.blocks[i];
    const QString where = QStringLiteral("block %1 (\"%2\"): ").arg(i).arg(f.text.left(30));
    if (p.text != f.text) return where + QStringLiteral("text \"%1\"").arg(p.text.left(30));
    if (p.format != f.format) return where + QStringLiteral("block format");
    if (p.charFormat != f.charFormat) return where + QStringLiteral("block character format");
    if (p.fragments != f.fragments) return where + QStringLiteral("character formats");
  }
  if (partial.numSoftBreaks != full.numSoftBreaks) return QStringLiteral("soft breaks");
  if (partial.spans.size() != full.spans.size()) return QStringLiteral("%1 token spans, %2").arg(partial.spans.size()).arg(full.spans.size());
  for (size_t i = 0; i < full.spans.size(); ++i) {
    const Drawn::Span &p = partial.spans[i], &f = full.spans[i];
    if (p.request != f.request || p.index != f.index || p.text != f.text) return QStringLiteral("span %1: token").arg(i);
    if (p.format != f.format) return QStringLiteral("span %1: format").arg(i);
    if (p.color != f.color) return QStringLiteral("span %1: colour").arg(i);
    if (p.tooltip != f.tooltip) return QStringLiteral("span %1: tooltip").arg(i);
  }
  if (partial.tokenAt != full.tokenAt) return QStringLiteral("tokens under document positions");
  if (partial.messages != full.messages) return QStringLiteral("message ranges");
  return {};
}

// Soft-break document positions: where the document has a separator that the
// transcript has not (a soft break is never next to a real separator).
std::vector<int> softBreaks(const gbui::TokenView& view) {
  const QString doc = view.document()->toPlainText(), transcript = view.transcriptText();
  std::vector<int> out;
  for (int d = 0, t = 0; d < doc.size(); ++d) {
    if (t < transcript.size() && doc[d] == transcript[t]) ++t;
    else out.push_back(d);
  }
  return out;
}

}  // namespace

class UiChatRedrawTest : public QObject {
  Q_OBJECT

  std::unique_ptr<gbui::SessionModel> model_;
  std::unique_ptr<gbui::ChatPanel> chat_;
  std::vector<quint64> tags_;  // assistant turns the panel asked answers for, in order
  gbui::RequestKey nextKey_ = 1;
  quint64 seq_ = 1;
  // Watching an action: the first document position a change began at, and
  // the blocks' revisions before it.
  int firstChange_ = -1;
  std::vector<int> revisions_;
  QMetaObject::Connection watch_;

  gbui::TokenView* view() const { return chat_->view(); }
  int numTurns() const { return static_cast<int>(chat_->conversation().turns.size()); }

  void newPanel(bool completionMode, const QString& systemPrompt) {
    chat_.reset();
    model_ = std::make_unique<gbui::SessionModel>();
    chat_ = std::make_unique<gbui::ChatPanel>(model_.get());
    tags_.clear();
    // A fixed text width: wrap points do not move when the scroll bar appears.
    view()->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
    view()->setMaxBlockChars(kMaxBlockChars);
    chat_->resize(560, 700);
    chat_->show();
    gbui::Conversation c;
    c.completionMode = completionMode;
    c.systemPrompt = systemPrompt;
    chat_->setConversation(c);
    connect(chat_.get(), &gbui::ChatPanel::generate, this,
            [this](const gbui::TurnCommand& turn) { tags_.push_back(turn.tag); });
  }

  void apply(std::vector<gbui::UiEvent> events) {
    for (gbui::UiEvent& e : events) e.seq = seq_++;
    model_->apply(std::make_shared<const std::vector<gbui::UiEvent>>(std::move(events)));
  }

  // The engine's side of one request for the turn the panel asked for last:
  // its id back (onRequestSubmitted), then `text` in batches of `perBatch` tokens.
  void answer(const QString& text, int perBatch = 6) {
    QVERIFY(!tags_.empty());
    const gbui::RequestKey key = nextKey_++;
    gbui::UiSubmitted sub;
    sub.request = key;
    sub.promptIds = {1, 2, 3};
    chat_->onRequestSubmitted(tags_.back(), key);
    apply({{0, 0, sub}});
    const QStringList tokens = tokenize(text);
    for (int i = 0; i < tokens.size(); i += perBatch) {
      std::vector<gbui::UiEvent> batch;
      for (int k = i; k < std::min<int>(i + perBatch, static_cast<int>(tokens.size())); ++k)
        batch.push_back({0, 0, makeToken(key, k, tokens[k])});
      apply(std::move(batch));
    }
    gbui::UiFinished done;
    done.request = key;
    done.reason = QStringLiteral("stop");
    done.numGenerated = static_cast<int>(tokens.size());
    apply({{0, 0, done}});
    QCOMPARE(chat_->activeRequest(), gbui::RequestKey{0});
  }

  void send(const QString& message, int variant, bool reasoning = false) {
    chat_->setInputText(message);
    chat_->send();
    answer(answerText(variant, reasoning));
  }

  void startWatching() {
    firstChange_ = -1;
    revisions_.clear();
    for (QTextBlock b = view()->document()->begin(); b.isValid(); b = b.next()) revisions_.push_back(b.revision());
    watch_ = connect(view()->document(), &QTextDocument::contentsChange, this, [this](int from, int, int) {
      firstChange_ = firstChange_ < 0 ? from : std::min(firstChange_, from);
    });
  }

  // The action watched changed nothing before document position `cut`, and no
  // block before `cut`'s paragraph (the paragraph was joined again when the cut
  // lies inside it).
  void checkUntouchedBefore(int cut) {
    disconnect(watch_);
    QVERIFY2(firstChange_ >= 0, "nothing was redrawn");
    QTextBlock block = view()->document()->findBlock(cut);
    const std::vector<int> soft = softBreaks(*view());
    while (block.previous().isValid() &&
           std::binary_search(soft.begin(), soft.end(), block.position() - 1))  // the paragraph's first piece
      block = block.previous();
    QVERIFY2(firstChange_ >= std::min(cut, block.position()),
             qPrintable(QStringLiteral("changed from %1, the changed turn starts at %2").arg(firstChange_).arg(cut)));
    int n = 0;
    for (QTextBlock b = view()->document()->begin(); b.isValid() && b.blockNumber() < block.blockNumber(); b = b.next(), ++n)
      QVERIFY2(b.revision() == revisions_[static_cast<size_t>(n)], qPrintable(QStringLiteral("block %1 was rewritten").arg(n)));
    QVERIFY2(n > 0 || cut == 0, "no block lies before the cut: the check would check nothing");
  }

  // Document position where turn `turn` starts: in chat mode the separator
  // before its label, in completion mode the end of the text before it (found
  // by its user message, which the tests keep unique).
  int turnStart(int turn) const {
    const gbui::Conversation& c = chat_->conversation();
    if (c.completionMode) {
      const int user = c.turns[turn].role == QLatin1String("user") ? turn : turn - 1;
      const auto range = view()->messageRange(user);
      return range ? (user == turn ? range->first : range->second) : -1;
    }
    int label = -(c.systemPrompt.isEmpty() ? 0 : 1);  // the system prompt's label comes first
    for (QTextBlock b = view()->document()->begin(); b.isValid(); b = b.next()) {
      const bool isLabel = (b.text() == QLatin1String("User") || b.text() == QLatin1String("Assistant") ||
                            b.text() == QLatin1String("System")) && b.begin().fragment().charFormat().fontWeight() == QFont::Bold;
      if (isLabel && label++ == turn) return b.position() - 1;
    }
    return -1;
  }

  void checkEqualsAFullRedraw() {
    const Drawn partial = drawn(*view(), numTurns());
    QVERIFY2(partial.numSoftBreaks > 3, "the answers should hold soft breaks");
    chat_->rerender();  // every turn again
    const Drawn full = drawn(*view(), numTurns());
    const QString diff = difference(partial, full);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
  }

  // A conversation of three exchanges: answers with paragraphs, code and reasoning.
  void threeExchanges() {
    send(QStringLiteral("Tell me about the sea."), 0);
    send(QStringLiteral("And the boats?"), 1, true);
    send(QStringLiteral("What about lighthouses?"), 2);
  }

 private slots:
  // The chat's view keeps keys, not copies: every span resolves to the model's
  // record (so a long chat costs the view 24 bytes per token). Once the model
  // keeps only compact records, a span resolves to the same token less its
  // candidates, and the hover says they were dropped.
  void spansAreTheModelsRecords() {
    newPanel(false, QString());
    threeExchanges();
    QVERIFY(view()->numTokenSpans() > 100);
    std::vector<gbui::UiToken> whole;
    for (int i = 0; i < view()->numTokenSpans(); ++i) {
      const std::optional<gbui::UiToken> t = view()->spanToken(i);
      QVERIFY(t);
      const std::optional<gbui::UiToken> m = model_->token(t->request, t->index);
      QVERIFY(m);
      QCOMPARE(t->tokenId, m->tokenId);
      QCOMPARE(t->text, m->text);
      QCOMPARE(t->top.size(), m->top.size());
      QVERIFY(!t->top.isEmpty());
      QVERIFY(!t->detailTrimmed);
      whole.push_back(*t);
    }
    const std::optional<gbui::UiToken> last = view()->spanToken(view()->numTokenSpans() - 1);
    QVERIFY(!view()->tooltipFor(*last).contains(QStringLiteral("dropped")));
    const QString text = view()->tokenText();
    model_->setDetailWindow(0);
    for (int i = 0; i < view()->numTokenSpans(); ++i) {
      const std::optional<gbui::UiToken> t = view()->spanToken(i);
      QVERIFY(t);
      const gbui::UiToken& w = whole[static_cast<size_t>(i)];
      QVERIFY(t->detailTrimmed);
      QVERIFY(t->top.isEmpty() && t->numAfterStage.isEmpty());
      QCOMPARE(t->request, w.request);
      QCOMPARE(t->index, w.index);
      QCOMPARE(t->step, w.step);
      QCOMPARE(t->position, w.position);
      QCOMPARE(t->tokenId, w.tokenId);
      QCOMPARE(t->text, w.text);
      QCOMPARE(t->piece, w.piece);
      QCOMPARE(t->stages, w.stages);
      QCOMPARE(t->stageActive, w.stageActive);
      QCOMPARE(t->prob, w.prob);
      QCOMPARE(t->probBefore, w.probBefore);
      QCOMPARE(t->rank, w.rank);
      QCOMPARE(t->entropyBefore, w.entropyBefore);
      QCOMPARE(t->origin, w.origin);
    }
    const std::optional<gbui::UiToken> trimmed = view()->spanToken(view()->numTokenSpans() - 1);
    QVERIFY2(view()->tooltipFor(*trimmed).contains(QStringLiteral("dropped from memory")),
             qPrintable(view()->tooltipFor(*trimmed)));
    QCOMPARE(view()->tokenText(), text);
  }

  void submitRedrawsOnlyTheNewTurns() {
    for (const bool completion : {false, true}) {
      newPanel(completion, completion ? QString() : QStringLiteral("You are a sailor."));
      threeExchanges();
      if (QTest::currentTestFailed()) return;
      const int end = view()->document()->characterCount() - 1;
      startWatching();
      chat_->setInputText(QStringLiteral("One more question about waves."));
      chat_->send();
      checkUntouchedBefore(end);
      answer(answerText(3, false));
      checkEqualsAFullRedraw();
      if (QTest::currentTestFailed()) return;
    }
  }

  void aNewSystemPromptRedrawsEverything() {
    // The turns before are drawn under the old system prompt: a submit after
    // it changed must draw them again (the prompt is shown above them).
    newPanel(false, QStringLiteral("You are a sailor."));
    threeExchanges();
    auto* system = chat_->findChild<QLineEdit*>(QStringLiteral("systemPrompt"));
    QVERIFY(system);
    system->setText(QStringLiteral("You are a pirate."));
    startWatching();
    send(QStringLiteral("Where is the treasure?"), 6);
    disconnect(watch_);
    QCOMPARE(firstChange_, 0);
    QVERIFY(view()->transcriptText().startsWith(QStringLiteral("System\nYou are a pirate.\n")));
    checkEqualsAFullRedraw();
  }

  void branchSwitchRedrawsOnlyTheLastTurn() {
    for (const bool completion : {false, true}) {
      newPanel(completion, QString());
      threeExchanges();
      chat_->regenerate();
      answer(answerText(7, true));
      checkEqualsAFullRedraw();
      for (const int delta : {-1, 1, -1}) {
        const int cut = turnStart(numTurns() - 1);
        QVERIFY(cut > 0);
        startWatching();
        chat_->showBranch(delta);
        checkUntouchedBefore(cut);
        checkEqualsAFullRedraw();
        if (QTest::currentTestFailed()) return;
      }
    }
  }

  void editRedrawsFromTheEditedMessage() {
    for (const bool completion : {false, true}) {
      newPanel(completion, completion ? QString() : QStringLiteral("You are a sailor."));
      threeExchanges();
      const int cut = turnStart(2);  // the second user message
      QVERIFY(cut > 0);
      startWatching();
      chat_->editMessage(2);
      chat_->setInputText(QStringLiteral("And the ships?"));
      chat_->send();
      checkUntouchedBefore(cut);
      QCOMPARE(numTurns(), 4);
      answer(answerText(5, true));
      checkEqualsAFullRedraw();
      if (QTest::currentTestFailed()) return;
    }
  }

  void reasoningRedrawsOnlyItsTurn() {
    // While an answer has a <think> block, each batch redraws that answer.
    for (const bool shown : {false, true}) {
      newPanel(false, QString());
      chat_->setShowReasoning(shown);
      send(QStringLiteral("Tell me about the sea."), 0);
      send(QStringLiteral("And the boats?"), 1);
      chat_->setInputText(QStringLiteral("Think first, then answer."));
      chat_->send();
      const int cut = turnStart(numTurns() - 1);
      QVERIFY(cut > 0);
      startWatching();
      answer(answerText(4, true), 3);
      checkUntouchedBefore(cut);
      checkEqualsAFullRedraw();
      if (QTest::currentTestFailed()) return;
    }
  }

  void truncateToLeavesWhatAppendingBuilds() {
    // TokenView alone: streamed a token at a time, cut at the start of a turn
    // or at a token where a soft break lies, the rest appended again in one
    // batch; the reference appends everything once, in one batch.
    struct Item {
      QString label;  // a role label, or a token (text)
      QString text;
    };
    std::vector<Item> items;
    std::vector<size_t> turnStarts;
    const QStringList turns = {QStringLiteral("Hello there, a short question."), answerText(1, false),
                               QStringLiteral("An edit, long enough to be split once in a narrow view of the chat: the words "
                                              "go on and on for a while until the line wraps."),
                               answerText(2, false) + answerText(3, false)};
    for (int t = 0; t < turns.size(); ++t) {
      turnStarts.push_back(items.size());
      items.push_back({t % 2 ? QStringLiteral("Assistant") : QStringLiteral("User"), {}});
      for (const QString& token : tokenize(turns[t])) items.push_back({{}, token});
    }
    auto newView = [](gbui::TokenView& v) {
      v.setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
      v.setMaxBlockChars(kMaxBlockChars);
      v.resize(480, 500);
      v.show();
    };
    auto append = [&](gbui::TokenView& v, size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        if (!items[i].label.isEmpty()) v.appendLabel(items[i].label);
        else v.appendToken(makeToken(1, static_cast<int>(i), items[i].text));
      }
    };
    gbui::TokenView whole;
    newView(whole);
    std::vector<int> starts;  // transcript position of each item
    whole.beginAppend();
    for (size_t i = 0; i < items.size(); ++i) {
      starts.push_back(whole.transcriptLength());
      append(whole, i, i + 1);
    }
    whole.endAppend();
    const Drawn reference = drawn(whole, 0);
    QVERIFY(reference.numSoftBreaks > 5);
    // Cut points: every turn's start, and every token a soft break lies before.
    std::vector<size_t> cuts(turnStarts.begin() + 1, turnStarts.end());
    const std::vector<int> soft = softBreaks(whole);
    for (size_t k = 0; k < soft.size(); ++k) {
      const int pos = soft[k] - static_cast<int>(k);  // the transcript position it lies before
      const auto it = std::find(starts.begin(), starts.end(), pos);
      if (it != starts.end()) cuts.push_back(static_cast<size_t>(it - starts.begin()));
    }
    QVERIFY2(cuts.size() > turnStarts.size() + 3, "too few soft breaks lie at a token");
    for (const size_t cut : cuts) {
      gbui::TokenView view;
      newView(view);
      append(view, 0, items.size());
      QCOMPARE(view.transcriptText(), whole.transcriptText());
      view.truncateTo(starts[cut]);
      // What appending the items before the cut builds (the cut paragraph's
      // soft breaks too, placed without the text that was after the cut).
      gbui::TokenView prefix;
      newView(prefix);
      prefix.beginAppend();
      append(prefix, 0, cut);
      prefix.endAppend();
      const QString prefixDiff = difference(drawn(view, 0), drawn(prefix, 0));
      QVERIFY2(prefixDiff.isEmpty(), qPrintable(QStringLiteral("cut at item %1 (\"%2\"), before appending: %3")
                                                    .arg(cut)
                                                    .arg(items[cut].label + items[cut].text)
                                                    .arg(prefixDiff)));
      view.beginAppend();
      append(view, cut, items.size());
      view.endAppend();
      const QString diff = difference(drawn(view, 0), reference);
      QVERIFY2(diff.isEmpty(), qPrintable(QStringLiteral("cut at item %1 (\"%2\"): %3").arg(cut).arg(items[cut].label + items[cut].text).arg(diff)));
    }
  }

  void cleanupTestCase() {
    chat_.reset();
    model_.reset();
  }
};

GB_QTEST_MAIN(UiChatRedrawTest);
#include "ui_chat_redraw_test.moc"
