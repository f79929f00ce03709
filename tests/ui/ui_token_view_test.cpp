// TokenView with long paragraphs (code review U3): a long answer is kept in
// blocks of bounded size, and that must change nothing the user sees, copies,
// hovers or clicks. The references are independent of the splitting: the
// expected transcript is the tokens' text concatenated here, the expected look
// is the same tokens rendered into a view that never splits (one block), and
// clicks are real mouse clicks at a character's on-screen position.
#include <QApplication>
#include <QClipboard>
#include <QImage>
#include <QMimeData>
#include <QPainter>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <random>
#include <vector>

#include "gb_qtest_main.h"
#include "chat/token_view.h"

namespace {

constexpr gbui::RequestKey kRequest = 7;

// Words, accents, a surrogate pair and empty tokens (shown as a middle dot), no newline.
gbui::UiToken makeToken(int i) {
  gbui::UiToken t;
  t.request = kRequest;
  t.index = i;
  t.tokenId = 1000 + i;
  t.text = i % 17 == 0   ? QString()
           : i % 13 == 0 ? QStringLiteral("\U0001F600")
           : i % 11 == 0 ? QStringLiteral("\u00e9t\u00e9")
           : i % 3 == 0  ? QStringLiteral(" word")
                         : QStringLiteral("ab");
  t.piece = t.text;
  t.prob = static_cast<float>(i % 10) / 10.0f;
  t.rank = i % 4;
  return t;
}

QString shown(const gbui::UiToken& t) { return t.text.isEmpty() ? QStringLiteral("\u00b7") : t.text; }

QImage render(gbui::TokenView& view) {
  QTextDocument* doc = view.document();
  QImage image(doc->size().toSize(), QImage::Format_ARGB32);
  image.fill(Qt::white);
  QPainter painter(&image);
  view.paintTokenBackgrounds(painter, QRectF(QPointF(0, 0), doc->size()));
  doc->drawContents(&painter);
  return image;
}

}  // namespace

class TokenViewTest : public QObject {
  Q_OBJECT
 private slots:
  void init() {
    split_ = std::make_unique<gbui::TokenView>();
    whole_ = std::make_unique<gbui::TokenView>();
    split_->setMaxBlockChars(200);
    whole_->setMaxBlockChars(1 << 30);  // the reference: one block per paragraph
    expected_ = QStringLiteral("Assistant\n");
    owner_.assign(expected_.size(), -1);
    for (gbui::TokenView* v : {split_.get(), whole_.get()}) {
      v->resize(520, 400);
      v->show();
      v->appendLabel(QStringLiteral("Assistant"));
    }
    // The reference is laid out once; the split view streams the first half one
    // token at a time and the rest in batches of 34 (a frame's worth, as the chat does).
    whole_->beginAppend();
    for (int i = 0; i < kTokens; ++i) {
      const gbui::UiToken t = makeToken(i);
      const bool batched = i >= kTokens / 2;
      if (batched && i % 34 == 0) split_->beginAppend();
      split_->appendToken(t);
      if (batched && (i % 34 == 33 || i + 1 == kTokens)) split_->endAppend();
      whole_->appendToken(t);
      expected_ += shown(t);
      owner_.resize(static_cast<size_t>(expected_.size()), i);
    }
    whole_->endAppend();
  }

  void blocksStayBounded() {
    QVERIFY(split_->numSoftBreaks() >= 10);
    QCOMPARE(whole_->numSoftBreaks(), 0);
    for (QTextBlock b = split_->document()->begin(); b.isValid(); b = b.next())
      QVERIFY2(b.length() - 1 <= split_->maxBlockChars(), qPrintable(QString::number(b.length())));
    QCOMPARE(split_->numTokenSpans(), kTokens);
    QCOMPARE(split_->transcriptText(), expected_);
    QCOMPARE(whole_->transcriptText(), expected_);
    QCOMPARE(whole_->document()->toPlainText(), expected_);
  }

  void looksTheSameAsOneBlock() {
    // The scroll bar appeared while the answer streamed in, narrowing the text:
    // the breaks placed before that move to the new wrap points by themselves.
    QTRY_VERIFY_WITH_TIMEOUT(sameLook(), 3000);
    // Narrower: the old breaks are no longer at wrap points until reflow moves them.
    for (gbui::TokenView* v : {split_.get(), whole_.get()}) v->resize(330, 400);
    QTRY_VERIFY(split_->document()->textWidth() < 330);
    split_->reflow();
    QVERIFY(sameLook());
    QCOMPARE(split_->transcriptText(), expected_);
    for (QTextBlock b = split_->document()->begin(); b.isValid(); b = b.next())
      QVERIFY(b.length() - 1 <= split_->maxBlockChars());
    // The resize alone schedules the reflow.
    for (gbui::TokenView* v : {split_.get(), whole_.get()}) v->resize(610, 400);
    QTRY_VERIFY_WITH_TIMEOUT(sameLook(), 3000);
  }

  // The colours are painted under the text by the widget itself, where the
  // tokens are on screen after scrolling: tokens of spaces (no ink) read back
  // from a grab of the viewport show their span's colour, over several lines
  // and past soft breaks.
  void backgroundsArePaintedWhereTheTokensAre() {
    gbui::TokenView view;
    view.setMaxBlockChars(120);
    view.resize(400, 300);
    view.show();
    constexpr int kSpaces = 600;
    view.beginAppend();
    for (int i = 0; i < kSpaces; ++i) {
      gbui::UiToken t = makeToken(i);
      t.text = QStringLiteral("   ");
      t.rank = i % 5;
      view.appendToken(t);
    }
    view.endAppend();
    QVERIFY(view.numSoftBreaks() > 3);
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.verticalScrollBar()->setValue(view.verticalScrollBar()->maximum() / 2);
    QApplication::processEvents();
    const QImage shot = view.viewport()->grab().toImage();
    // Each token's first document position (soft breaks are no token's).
    std::vector<int> firstPos(kSpaces, -1);
    for (int p = 0; p < view.document()->characterCount(); ++p)
      if (const std::optional<gbui::UiToken> under = view.tokenAt(p); under && firstPos[under->index] < 0)
        firstPos[under->index] = p;
    int checked = 0;
    for (int i = 0; i < kSpaces; ++i) {
      QVERIFY(firstPos[i] >= 0);
      // The middle of the token's first character, in viewport coordinates.
      QTextCursor at(view.document());
      at.setPosition(firstPos[i]);
      const QRect left = view.cursorRect(at);
      at.setPosition(firstPos[i] + 1);
      const QRect right = view.cursorRect(at);
      if (right.top() != left.top() || right.left() - left.left() < 3) continue;  // wrapped there
      const QPoint middle((left.left() + right.left()) / 2, left.center().y());
      if (middle.x() < 0 || middle.x() >= shot.width() || middle.y() < 4 || middle.y() > shot.height() - 4) continue;
      QCOMPARE(QColor(shot.pixel(middle)).rgb(), view.spanColor(i).rgb());
      ++checked;
    }
    QVERIFY2(checked > 20, qPrintable(QString::number(checked)));
  }

  void everyPositionMapsToItsToken() {
    // Walk the document: a newline that the transcript does not have is a soft break.
    const QString doc = split_->document()->toPlainText();
    int t = 0;
    for (int pos = 0; pos < doc.size(); ++pos) {
      if (doc[pos] != expected_[t]) {
        QCOMPARE(doc[pos], QLatin1Char('\n'));
        continue;
      }
      const std::optional<gbui::UiToken> token = split_->tokenAt(pos);
      const int want = owner_[static_cast<size_t>(t)];
      if (want < 0) QVERIFY(!token);
      else QVERIFY2(token && token->index == want, qPrintable(QStringLiteral("position %1").arg(pos)));
      ++t;
    }
    QCOMPARE(t, expected_.size());
    // Each span's stored format is its token's colour.
    for (int i = 0; i < kTokens; i += 7) {
      QVERIFY(split_->spanToken(i));
      QCOMPARE(split_->spanToken(i)->index, i);
      QCOMPARE(split_->spanColor(i).rgba(), split_->colorFor(makeToken(i)).rgba());
    }
  }

  void clickInspectsTheTokenUnderTheMouse() {
    QSignalSpy clicked(split_.get(), &gbui::TokenView::tokenClicked);
    // Tokens right after each soft break and a few others: click the middle of
    // their first character where it is drawn.
    const QString doc = split_->document()->toPlainText();
    int t = 0, checked = 0;
    for (int pos = 0; pos + 1 < doc.size() && checked < 40; ++pos) {
      if (doc[pos] != expected_[t]) continue;
      const int want = owner_[static_cast<size_t>(t++)];
      const bool afterBreak = pos > 0 && doc[pos - 1] == QLatin1Char('\n') && t > 10;
      if (want < 0 || doc[pos].isLowSurrogate() || !(afterBreak || t % 97 == 0)) continue;
      QTextCursor c(split_->document());
      c.setPosition(pos);
      split_->setTextCursor(c);
      split_->ensureCursorVisible();
      const QRect left = split_->cursorRect(c);
      c.setPosition(pos + (doc[pos].isHighSurrogate() ? 2 : 1));
      const QRect right = split_->cursorRect(c);
      if (right.top() != left.top()) continue;  // the character ends its line
      const QPoint at((left.left() + right.left()) / 2, left.center().y());
      clicked.clear();
      QTest::mouseClick(split_->viewport(), Qt::LeftButton, {}, at);
      QCOMPARE(clicked.size(), 1);
      QCOMPARE(clicked[0][0].toULongLong(), static_cast<qulonglong>(kRequest));
      QCOMPARE(clicked[0][1].toInt(), want);
      ++checked;
    }
    QVERIFY(checked >= 10);
  }

  void selectionFindsEveryShownCopyOfTheToken() {
    // Random streams: three requests interleaved, runs of consecutive indices,
    // jumps, repeated indices, and cuts (truncateTo) at span starts. The model
    // is the list of appended (request, index, start) left after the cuts; a
    // selection must mark exactly the spans that show that token.
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      std::mt19937 rng(seed);
      gbui::TokenView view;
      view.resize(400, 300);
      struct Shown {
        gbui::RequestKey request;
        int index, start;
      };
      std::vector<Shown> model;
      int next[3] = {0, 0, 0};
      for (int step = 0; step < 400; ++step) {
        const int r = static_cast<int>(rng() % 3);
        const uint32_t kind = rng() % 40;
        if (kind == 0 && !model.empty()) {  // cut at one of the last 30 spans' starts (a regenerated answer)
          const size_t back = std::min<size_t>(model.size(), 30);
          const int start = model[model.size() - 1 - rng() % back].start;
          view.truncateTo(start);
          std::erase_if(model, [start](const Shown& m) { return m.start >= start; });
          continue;
        }
        if (kind == 1) next[r] += 1 + static_cast<int>(rng() % 5);  // a gap
        if (kind == 2 && next[r] > 0) next[r] -= 1 + static_cast<int>(rng() % std::min(next[r], 3));  // shown again
        gbui::UiToken t = makeToken(next[r]);
        t.request = static_cast<gbui::RequestKey>(10 + r);
        const int start = static_cast<int>(view.transcriptText().size());
        view.appendToken(t);
        model.push_back({t.request, t.index, start});
        ++next[r];
      }
      QCOMPARE(view.numTokenSpans(), static_cast<int>(model.size()));
      int checked = 0;
      for (int r = 0; r < 3; ++r) {
        for (int index = 0; index <= next[r] + 1; ++index) {
          const auto request = static_cast<gbui::RequestKey>(10 + r);
          std::vector<int> want;
          for (const Shown& m : model)
            if (m.request == request && m.index == index) want.push_back(m.start);
          view.setSelected(request, index);
          const QList<QTextEdit::ExtraSelection> sel = view.extraSelections();
          QCOMPARE(sel.size(), static_cast<qsizetype>(want.size()));
          for (const QTextEdit::ExtraSelection& e : sel) {
            const std::optional<gbui::UiToken> at = view.tokenAt(e.cursor.selectionStart());
            QVERIFY(at);
            QCOMPARE(at->request, request);
            QCOMPARE(at->index, index);
          }
          checked += static_cast<int>(want.size());
        }
      }
      QVERIFY(checked > 50);
    }
  }

  void copyGivesTheTranscript() {
    split_->selectAll();
    split_->copy();
    QCOMPARE(QApplication::clipboard()->text(), expected_);
    // A selection across several soft breaks, starting and ending inside tokens.
    QTextCursor c(split_->document());
    const int from = 15, to = split_->document()->characterCount() - 40;
    c.setPosition(from);
    c.setPosition(to, QTextCursor::KeepAnchor);
    split_->setTextCursor(c);
    split_->copy();
    const QString doc = split_->document()->toPlainText();
    QString want;  // the selected characters that are transcript characters
    for (int pos = 0, t = 0; pos < to; ++pos) {
      if (doc[pos] != expected_[t]) continue;
      if (pos >= from) want += expected_[t];
      ++t;
    }
    QCOMPARE(QApplication::clipboard()->text(), want);
    QVERIFY(QApplication::clipboard()->mimeData()->hasHtml());
  }

 private:
  // Every transcript character is drawn at the same place in both views, and
  // the pictures differ at most by a trailing space's background per soft break
  // (a wrapped line does not paint its trailing space; the end of a block does).
  bool sameLook() {
    const QString doc = split_->document()->toPlainText();
    int t = 0;
    for (int pos = 0; pos < doc.size(); ++pos) {
      if (doc[pos] != expected_[t]) continue;  // a soft break
      QTextCursor a(split_->document()), b(whole_->document());
      a.setPosition(pos);
      b.setPosition(t++);
      if (split_->cursorRect(a).translated(0, split_->verticalScrollBar()->value()) !=
          whole_->cursorRect(b).translated(0, whole_->verticalScrollBar()->value())) {
        return false;
      }
    }
    const QImage x = render(*split_), y = render(*whole_);
    if (x.size() != y.size()) return false;
    const QFontMetrics metrics(split_->font());
    const qint64 allowed = static_cast<qint64>(split_->numSoftBreaks()) *
                           (metrics.horizontalAdvance(QLatin1Char(' ')) + 1) * metrics.lineSpacing();
    qint64 differ = 0;
    for (int row = 0; row < x.height(); ++row)
      for (int col = 0; col < x.width(); ++col) differ += x.pixel(col, row) != y.pixel(col, row);
    return differ <= allowed;
  }

  static constexpr int kTokens = 1000;
  std::unique_ptr<gbui::TokenView> split_, whole_;
  QString expected_;
  std::vector<int> owner_;  // (transcript characters) the token each one belongs to, -1 none
};

GB_QTEST_MAIN(TokenViewTest);
#include "ui_token_view_test.moc"
