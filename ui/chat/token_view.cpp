#include "token_view.h"

#include <QAbstractTextDocumentLayout>
#include <QMimeData>
#include <QMouseEvent>
#include <QPainter>
#include <QPaintEvent>
#include <QTextBlock>
#include <QTextDocumentFragment>
#include <QScrollBar>
#include <QTextLayout>
#include <QTimer>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace gbui {

TokenView::TokenView(QWidget* parent) : QTextEdit(parent) {
  setReadOnly(true);
  setMouseTracking(true);
  viewport()->setMouseTracking(true);
  setUndoRedoEnabled(false);
  document()->setDocumentMargin(10);
  reflowTimer_ = new QTimer(this);
  reflowTimer_->setSingleShot(true);
  reflowTimer_->setInterval(150);  // after the last resize step of a drag
  connect(reflowTimer_, &QTimer::timeout, this, &TokenView::reflow);
}

void TokenView::clearAll() {
  reasoning_ = false;
  if (appendDepth_ > 0) appendBatch_.endEditBlock();
  appendDepth_ = 0;
  clear();
  spans_.clear();
  runs_.clear();
  own_.clear();
  messages_.clear();
  breaks_.clear();
}

void TokenView::truncateTo(int pos) {
  pos = std::clamp(pos, 0, transcriptEnd());
  if (pos == transcriptEnd()) return;
  // Soft breaks at or after `pos` go with the text they split (one at `pos`
  // sits just before it: the cut starts at that break).
  const auto firstGone = std::lower_bound(breaks_.begin(), breaks_.end(), pos);
  const int cut = pos + static_cast<int>(firstGone - breaks_.begin());
  // The paragraph holding `pos` goes on past it unless a real paragraph
  // separator (a chat turn's label starts one) sits there.
  const bool paragraphGoesOn = document()->characterAt(toDocument(pos)) != QChar::ParagraphSeparator;
  // Removing the rest merges the cut block with the document's last one:
  // it keeps its own formats, as appending its text left them.
  const QTextBlock kept = document()->findBlock(cut);
  const QTextBlockFormat blockFormat = kept.blockFormat();
  const QTextCharFormat charFormat = kept.charFormat();
  QTextCursor c(document());
  c.setPosition(cut);
  c.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
  c.removeSelectedText();
  if (c.blockFormat() != blockFormat) c.setBlockFormat(blockFormat);
  if (c.blockCharFormat() != charFormat) c.setBlockCharFormat(charFormat);
  breaks_.erase(firstGone, breaks_.end());
  spans_.erase(std::lower_bound(spans_.begin(), spans_.end(), pos, [](const Span& s, int p) { return s.begin < p; }),
               spans_.end());
  while (!runs_.empty() && runs_.back().first >= spans_.size()) runs_.pop_back();
  if (!runs_.empty()) runs_.back().count = std::min(runs_.back().count, spans_.size() - runs_.back().first);
  std::erase_if(messages_, [pos](const MessageSpan& m) { return m.begin >= pos; });
  reasoning_ = false;
  // The paragraph before the cut is the open one now: its soft breaks must be
  // those the open paragraph gets (splitOffset).
  QTextBlock last = document()->lastBlock();
  if (!paragraphGoesOn) {
    // Closed, it may have had its last line split off, which an open one
    // keeps (text appended could still move that line's start): the only
    // split that differs, as every earlier one has a line start past its limit.
    document()->documentLayout()->blockBoundingRect(last);  // lays the block out
    if (softBreakAt(last.position() - 1) && last.layout() && last.layout()->lineCount() <= 1) {
      breaks_.pop_back();
      joinBlocks(last);
      boundBlock(document()->lastBlock());
    }
    return;
  }
  // Its wrap points near the cut were chosen with the text that is gone after
  // it (a word that went on past the cut): it is joined again and bounded anew.
  for (; softBreakAt(last.position() - 1); last = document()->lastBlock()) {
    breaks_.pop_back();
    joinBlocks(last);
  }
  boundBlock(last);
}

bool TokenView::softBreakAt(int documentPos) const {
  if (documentPos < 0 || breaks_.empty()) return false;
  const int pos = toTranscript(documentPos);  // the break's transcript position if there is one
  const auto it = std::lower_bound(breaks_.begin(), breaks_.end(), pos);
  return it != breaks_.end() && *it == pos && *it + static_cast<int>(it - breaks_.begin()) == documentPos;
}

void TokenView::joinBlocks(const QTextBlock& second) {
  // A split gave the second piece the first one's block format; the joined
  // block keeps the first piece's formats whichever ones the deletion keeps.
  const QTextBlock first = second.previous();
  const QTextBlockFormat blockFormat = first.blockFormat();
  const QTextCharFormat charFormat = first.charFormat();
  QTextCursor c(document());
  c.setPosition(second.position() - 1);
  c.deleteChar();
  if (c.blockFormat() != blockFormat) c.setBlockFormat(blockFormat);
  if (c.blockCharFormat() != charFormat) c.setBlockCharFormat(charFormat);
}

int TokenView::toDocument(int pos) const {
  // Breaks before character `pos` (a break at `pos` sits before it).
  return pos + static_cast<int>(std::upper_bound(breaks_.begin(), breaks_.end(), pos) - breaks_.begin());
}

int TokenView::toTranscript(int documentPos) const {
  // Break k sits at document position breaks_[k] + k, which grows with k.
  int lo = 0, hi = static_cast<int>(breaks_.size());
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (breaks_[static_cast<size_t>(mid)] + mid < documentPos) lo = mid + 1;
    else hi = mid;
  }
  return documentPos - lo;
}

std::pair<int, int> TokenView::documentRange(int begin, int end) const {
  if (end <= begin) return {toDocument(begin), toDocument(begin)};
  return {toDocument(begin), toDocument(end - 1) + 1};
}

int TokenView::transcriptEnd() const {
  return document()->characterCount() - 1 - static_cast<int>(breaks_.size());
}

int TokenView::splitOffset(const QTextBlock& block) const {
  // The start of the last wrapped line that leaves at most maxBlockChars_
  // before it: the lines then look exactly as they did in one block.
  document()->documentLayout()->blockBoundingRect(block);  // lays the block out
  const QTextLayout* layout = block.layout();
  const int numLines = layout ? layout->lineCount() : 0;
  if (numLines >= 2) {
    // Text appended to a paragraph can still move its last wrap points (a
    // word that grows moves to the next line): in the paragraph that goes on
    // (the document's last block, or a piece a soft break continues) those up
    // to the limit are final only once a line begins past it.
    const bool closed = block.next().isValid() && !softBreakAt(block.position() + block.length() - 1);
    int best = 0;
    bool pastLimit = false;
    for (int i = 1; i < numLines && !pastLimit; ++i) {
      const int start = layout->lineAt(i).textStart();
      pastLimit = start > maxBlockChars_;
      if (!pastLimit) best = start;
    }
    if (!pastLimit && !closed) return 0;
    if (best > 0) return best;
  }
  // No wrap point within the limit (no width yet, or one unbroken line): after
  // the last space, else at the limit (never inside a surrogate pair).
  const QString text = block.text();
  const int space = static_cast<int>(text.lastIndexOf(QLatin1Char(' '), maxBlockChars_ - 1));
  if (space > 0) return space + 1;
  return text.at(maxBlockChars_ - 1).isHighSurrogate() ? maxBlockChars_ - 1 : maxBlockChars_;
}

QTextBlock TokenView::boundBlock(QTextBlock block) {
  // The width changes without a resize of this widget when the vertical scroll
  // bar appears: the breaks placed so far need moving then.
  if (!breaks_.empty() && static_cast<int>(document()->textWidth()) != reflowWidth_ && !reflowTimer_->isActive())
    reflowTimer_->start();
  while (block.isValid() && block.length() - 1 > maxBlockChars_) {
    const int offset = splitOffset(block);
    if (offset <= 0) break;
    const int at = block.position() + offset;
    const int pos = toTranscript(at);
    breaks_.insert(std::upper_bound(breaks_.begin(), breaks_.end(), pos), pos);
    QTextCursor c(document());
    c.setPosition(at);
    c.insertBlock();
    block = block.next();
    reflowWidth_ = static_cast<int>(document()->textWidth());
  }
  return block;
}

void TokenView::boundFrom(int first) {
  // Every block an append touched, closed paragraphs included: a paragraph
  // gets the same soft breaks whether it streamed in or was redrawn whole.
  for (QTextBlock b = document()->findBlockByNumber(std::min(first, document()->blockCount() - 1)); b.isValid();
       b = boundBlock(b).next()) {
  }
}

void TokenView::beginAppend() {
  if (appendDepth_++ > 0) return;
  appendFrom_ = document()->blockCount() - 1;
  appendBatch_ = QTextCursor(document());
  appendBatch_.beginEditBlock();
}

void TokenView::endAppend() {
  if (appendDepth_ == 0 || --appendDepth_ > 0) return;
  appendBatch_.endEditBlock();  // one layout of what the batch changed
  boundFrom(appendFrom_);
}

void TokenView::afterAppend() {
  // A long batch (a whole answer redrawn) is bounded as it goes: splitting one
  // huge block would lay it out again for every split.
  if (appendDepth_ == 1 && document()->lastBlock().length() > 4 * maxBlockChars_) {
    appendBatch_.endEditBlock();
    boundFrom(appendFrom_);
    appendFrom_ = document()->blockCount() - 1;
    appendBatch_.beginEditBlock();
  }
}

void TokenView::reflow() {
  reflowTimer_->stop();
  if (breaks_.empty()) return;
  // Each old break is removed (joining its two blocks) and the joined block is
  // split again at the new width's wrap points. Left to right: breaks_ holds
  // the breaks placed so far (all before the old break being removed), then
  // the old ones not yet removed (so a joined block is known to go on).
  const std::vector<int> old = breaks_;
  size_t numPlaced = 0;
  for (const int pos : old) {
    const int at = pos + static_cast<int>(numPlaced);  // the old break's separator
    breaks_.erase(breaks_.begin() + static_cast<std::ptrdiff_t>(numPlaced));
    joinBlocks(document()->findBlock(at + 1));
    const size_t before = breaks_.size();
    boundBlock(document()->findBlock(at));
    numPlaced += breaks_.size() - before;
  }
  reflowWidth_ = static_cast<int>(document()->textWidth());
}

void TokenView::resizeEvent(QResizeEvent* event) {
  QTextEdit::resizeEvent(event);
  if (!breaks_.empty() && static_cast<int>(document()->textWidth()) != reflowWidth_) reflowTimer_->start();
}

bool TokenView::viewportEvent(QEvent* event) {
  // The viewport narrows when the vertical scroll bar appears (the widget keeps its size).
  const bool handled = QTextEdit::viewportEvent(event);
  if (event->type() == QEvent::Resize && !breaks_.empty() &&
      static_cast<int>(document()->textWidth()) != reflowWidth_)
    reflowTimer_->start();
  return handled;
}

QString TokenView::transcriptText() const {
  QString text = document()->toPlainText();  // one character per document position
  for (size_t k = breaks_.size(); k-- > 0;) text.remove(breaks_[k] + static_cast<int>(k), 1);
  return text;
}

QMimeData* TokenView::createMimeDataFromSelection() const {
  const QTextCursor selection = textCursor();
  if (breaks_.empty() || !selection.hasSelection()) return QTextEdit::createMimeDataFromSelection();
  // The selection's fragment without the soft breaks inside it: rich and plain
  // text then join a long paragraph's lines as the transcript has them.
  const int from = selection.selectionStart(), to = selection.selectionEnd();
  QTextDocument copy;
  QTextCursor c(&copy);
  c.insertFragment(QTextDocumentFragment(selection));
  for (size_t k = breaks_.size(); k-- > 0;) {
    const int at = breaks_[k] + static_cast<int>(k);
    if (at >= to) continue;
    if (at < from) break;
    c.setPosition(at - from);
    c.deleteChar();
  }
  auto* mime = new QMimeData;
  mime->setHtml(copy.toHtml());
  mime->setText(copy.toPlainText());
  return mime;
}

void TokenView::appendLabel(const QString& text) {
  beginAppend();
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  if (!document()->isEmpty()) c.insertBlock();
  QTextCharFormat f;
  f.setFontWeight(QFont::Bold);
  f.setForeground(palette().color(QPalette::Highlight));
  c.insertText(text, f);
  c.insertBlock();
  endAppend();
}

void TokenView::appendPlain(const QString& text) {
  beginAppend();
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  c.insertText(text, QTextCharFormat());
  afterAppend();
  endAppend();
}

void TokenView::appendMessage(const QString& text, int turn) {
  beginAppend();
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  const int begin = transcriptEnd();
  c.insertText(text, QTextCharFormat());
  messages_.push_back({begin, transcriptEnd(), turn});
  afterAppend();
  endAppend();
}

std::optional<int> TokenView::messageAt(int documentPos) const {
  const int pos = toTranscript(documentPos);
  for (const MessageSpan& m : messages_)
    if (pos >= m.begin && pos < m.end) return m.turn;
  return std::nullopt;
}

std::optional<std::pair<int, int>> TokenView::messageRange(int turn) const {
  for (const MessageSpan& m : messages_)
    if (m.turn == turn) return documentRange(m.begin, m.end);
  return std::nullopt;
}

void TokenView::appendNote(const QString& text) {
  beginAppend();
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  QTextCharFormat f;
  f.setFontItalic(true);
  f.setForeground(QColor(0x70, 0x70, 0x70));
  c.insertText(text, f);
  afterAppend();
  endAppend();
}

void TokenView::appendToken(const UiToken& token) {
  beginAppend();  // one token alone is a batch of its own
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  const int begin = transcriptEnd();
  QTextCharFormat f;  // the background is drawn from the span (paintTokenBackgrounds)
  if (reasoning_) {
    f.setFontItalic(true);
    f.setForeground(QColor(0x70, 0x70, 0x70));
  }
  if (const auto style = originUnderline(token.origin); style != QTextCharFormat::NoUnderline) {
    // Underline and text in the origin's colour: a thin underline alone is hard to spot.
    f.setUnderlineStyle(style);
    f.setUnderlineColor(originColor(token.origin));
    f.setForeground(originColor(token.origin));
  }
  // A token that completes no character yet (part of a UTF-8 sequence) still gets
  // a visible, selectable cell.
  c.insertText(token.text.isEmpty() ? QStringLiteral("\u00b7") : token.text, f);
  spans_.push_back({begin, transcriptEnd(), token.index, colorFor(token).rgba(), token.request});
  const bool continues = !runs_.empty() && runs_.back().request == token.request &&
                         runs_.back().first + runs_.back().count + 1 == spans_.size() &&
                         static_cast<int64_t>(runs_.back().first_index) + static_cast<int64_t>(runs_.back().count) == token.index;
  if (continues) ++runs_.back().count;
  else runs_.push_back({token.request, token.index, spans_.size() - 1, 1});
  if (!lookup_) own_.insert_or_assign({token.request, token.index}, slimCopy(token));
  afterAppend();
  endAppend();
}

void TokenView::setTokenLookup(TokenLookup lookup) {
  lookup_ = std::move(lookup);
  own_.clear();
}

std::optional<UiToken> TokenView::record(const Span& s) const {
  if (lookup_) return lookup_(s.request, s.index);
  const auto it = own_.find({s.request, s.index});
  if (it == own_.end()) return std::nullopt;
  return it->second;
}

// A view without a lookup keeps what a tooltip and a click need: the token
// without its stage lists and with only the candidates a tooltip names (the
// chosen one and three alternatives, without per-stage probabilities).
UiToken TokenView::slimCopy(const UiToken& token) {
  UiToken t = token;
  t.stages = QStringList();
  t.stageActive = QVector<bool>();
  t.numAfterStage = QVector<int>();
  QVector<UiCandidate> top;
  for (const UiCandidate& c : token.top) {
    if (top.size() == kTooltipAlternatives + 1) break;
    UiCandidate slim = c;
    slim.probAfter = QVector<float>();
    top.push_back(slim);
  }
  t.top = top;
  return t;
}

QTextCharFormat::UnderlineStyle TokenView::originUnderline(int origin) {
  switch (static_cast<UiTokenOrigin>(origin)) {
    case UiTokenOrigin::Accepted: return QTextCharFormat::SingleUnderline;
    case UiTokenOrigin::Resampled: return QTextCharFormat::WaveUnderline;
    case UiTokenOrigin::Bonus: return QTextCharFormat::DotLine;
    case UiTokenOrigin::Forced: return QTextCharFormat::DashUnderline;
    case UiTokenOrigin::Plain: break;
  }
  return QTextCharFormat::NoUnderline;
}

QColor TokenView::originColor(int origin) {
  switch (static_cast<UiTokenOrigin>(origin)) {
    case UiTokenOrigin::Accepted: return QColor(0, 140, 60);
    case UiTokenOrigin::Resampled: return QColor(210, 30, 30);
    case UiTokenOrigin::Bonus: return QColor(130, 40, 200);
    case UiTokenOrigin::Forced: return QColor(90, 90, 90);
    case UiTokenOrigin::Plain: break;
  }
  return {};
}

QTextCharFormat TokenView::spanFormat(int i) const {
  const Span& s = spans_[static_cast<size_t>(i)];
  QTextCursor c(document());
  c.setPosition(toDocument(s.begin) + 1);  // the format of the character before the cursor
  return c.charFormat();
}

void TokenView::forEachSpanRect(const QRectF& area,
                                const std::function<void(const Span&, const QRectF&)>& draw) const {
  QAbstractTextDocumentLayout* layout = document()->documentLayout();
  // From the first block in the area: its first span, then on until a line
  // starts below the area.
  const int hit = std::max(0, layout->hitTest(area.topLeft(), Qt::FuzzyHit));
  const int from = toTranscript(document()->findBlock(hit).position());
  auto it = std::upper_bound(spans_.begin(), spans_.end(), from, [](int p, const Span& s) { return p < s.begin; });
  if (it != spans_.begin()) --it;
  for (; it != spans_.end(); ++it) {
    const auto [begin, end] = documentRange(it->begin, it->end);
    for (int pos = begin; pos < end;) {  // a span may cross a block boundary
      const QTextBlock block = document()->findBlock(pos);
      if (!block.isValid()) return;
      const QRectF box = layout->blockBoundingRect(block);
      if (box.top() > area.bottom()) return;
      const QTextLayout* lines = block.layout();
      const int first = pos - block.position();
      const int last = std::min(end - block.position(), block.length() - 1);
      if (lines && lines->lineCount() > 0 && box.bottom() >= area.top()) {
        const QTextLine start = lines->lineForTextPosition(first);
        for (int l = start.isValid() ? start.lineNumber() : 0; l < lines->lineCount(); ++l) {
          const QTextLine line = lines->lineAt(l);
          const int a = std::max(first, line.textStart()), b = std::min(last, line.textStart() + line.textLength());
          if (a >= last) break;  // the span ends before this line
          if (b <= a) continue;
          const qreal x1 = line.cursorToX(a), x2 = line.cursorToX(b);
          draw(*it, QRectF(box.left() + std::min(x1, x2), box.top() + line.y(), std::abs(x2 - x1), line.height()));
        }
      }
      pos = block.position() + block.length();
    }
  }
}

void TokenView::paintTokenBackgrounds(QPainter& painter, const QRectF& area) const {
  forEachSpanRect(area, [&](const Span& s, const QRectF& r) {
    painter.fillRect(r, evicted(s) ? evictedColor() : QColor::fromRgba(s.color));
  });
}

void TokenView::paintEvictionMarks(QPainter& painter, const QRectF& area) const {
  if (!evictedLookup_) return;
  // The text stays legible through the wash; the line runs through its middle.
  QColor wash = evictedColor();
  wash.setAlpha(150);
  const QPen strike(evictedStrikeColor(), 1.0);
  forEachSpanRect(area, [&](const Span& s, const QRectF& r) {
    if (!evicted(s)) return;
    painter.fillRect(r, wash);
    painter.setPen(strike);
    const qreal y = std::round(r.center().y()) + 0.5;
    painter.drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
  });
}

void TokenView::setEvictionLookup(EvictedLookup isEvicted, EvictionText describe) {
  evictedLookup_ = std::move(isEvicted);
  evictionText_ = std::move(describe);
  viewport()->update();
}

bool TokenView::spanEvicted(int i) const { return evicted(spans_[static_cast<size_t>(i)]); }

void TokenView::paintEvent(QPaintEvent* event) {
  {
    QPainter painter(viewport());
    const QPointF offset(horizontalScrollBar()->value(), verticalScrollBar()->value());
    painter.translate(-offset);
    paintTokenBackgrounds(painter, QRectF(event->rect()).translated(offset));
  }
  QTextEdit::paintEvent(event);
  if (evictedLookup_) {
    QPainter painter(viewport());
    const QPointF offset(horizontalScrollBar()->value(), verticalScrollBar()->value());
    painter.translate(-offset);
    paintEvictionMarks(painter, QRectF(event->rect()).translated(offset));
  }
}

QString TokenView::tokenText() const {
  QString out;
  for (const Span& s : spans_)
    if (const std::optional<UiToken> t = record(s)) out += t->text;
  return out;
}

QColor TokenView::colorFor(const UiToken& t) const {
  if (isForced(t)) return forcedColor();  // p = 1 by construction: no colour scale applies
  // Light tints so text stays readable: green = confident, red = unlikely.
  double score = 0.0;  // 0 bad .. 1 good
  if (t.remote) {
    // A remote engine reports the raw model's p (its logprob) and the rank among
    // its alternatives; the entropy is not available: neutral grey.
    if (mode_ == ColorMode::Entropy || std::isnan(t.probBefore)) return QColor(235, 235, 235);
    if (mode_ == ColorMode::Probability) score = std::clamp(static_cast<double>(t.probBefore), 0.0, 1.0);
    else score = t.rank <= 0 ? 1.0 : std::max(0.0, 0.7 - 0.15 * t.rank);
    return QColor::fromHsvF(static_cast<float>(std::round(score * 15.0) / 15.0 * 0.33), 0.35f, 1.0f);
  }
  switch (mode_) {
    case ColorMode::Probability: score = std::clamp(static_cast<double>(t.prob), 0.0, 1.0); break;
    case ColorMode::Entropy: score = 1.0 - std::clamp(static_cast<double>(t.entropyBefore) / 4.0, 0.0, 1.0); break;
    case ColorMode::Rank: score = t.rank <= 0 ? 1.0 : std::max(0.0, 0.7 - 0.15 * t.rank); break;
  }
  // 16 levels: identical formats are shared by the document, which keeps long
  // transcripts cheap to lay out.
  const double level = std::round(score * 15.0) / 15.0;
  return QColor::fromHsvF(static_cast<float>(level * 0.33), 0.35f, 1.0f);
}

QString TokenView::tooltipFor(const UiToken& t) const {
  if (t.remote) {
    QString tip = QStringLiteral("<b>%1</b><br>p = %2 (the server's logprob), rank %3<br><i>%4</i>")
                      .arg(t.piece.toHtmlEscaped())
                      .arg(std::isnan(t.probBefore) ? QStringLiteral("n/a") : QString::number(t.probBefore, 'f', 3))
                      .arg(t.rank < t.top.size() ? QString::number(t.rank) : QStringLiteral("≥%1").arg(t.top.size()))
                      .arg(tr("remote engine: id, stages and entropy not available"));
    int shown = 0;
    for (const UiCandidate& c : t.top) {
      if (c.id == t.tokenId) continue;
      tip += QStringLiteral("<br>&nbsp;&nbsp;%1: %2").arg(c.text.toHtmlEscaped()).arg(c.probBefore, 0, 'f', 3);
      if (++shown == kTooltipAlternatives) break;
    }
    return tip;
  }
  QString tip = QStringLiteral("<b>%1</b> id %2<br>p = %3 (raw %4), rank %5, entropy %6 nats")
                    .arg(t.piece.toHtmlEscaped())
                    .arg(t.tokenId)
                    .arg(t.prob, 0, 'f', 3)
                    .arg(t.probBefore, 0, 'f', 3)
                    .arg(t.rank)
                    .arg(t.entropyBefore, 0, 'f', 2);
  int shown = 0;
  for (const UiCandidate& c : t.top) {
    if (c.id == t.tokenId) continue;
    tip += QStringLiteral("<br>&nbsp;&nbsp;%1 (%2): %3").arg(c.text.toHtmlEscaped()).arg(c.id).arg(c.probBefore, 0, 'f', 3);
    if (++shown == kTooltipAlternatives) break;
  }
  if (t.grammar) {
    const double removed = std::clamp(1.0 - static_cast<double>(t.grammar->massAllowed), 0.0, 1.0);
    tip += isForced(t) ? tr("<br><span style='color:#3050a0'>forced by the format: the grammar allowed only this token "
                            "(the model gave the tokens it forbade %1% of the raw mass)</span>")
                             .arg(removed * 100.0, 0, 'f', 1)
                       : tr("<br>format: %1 tokens allowed, %2% of the raw mass removed")
                             .arg(t.grammar->numAllowed)
                             .arg(removed * 100.0, 0, 'f', 1);
  }
  if (t.detailTrimmed)
    tip += tr("<br><i>alternatives dropped from memory (an older token); the trace file holds them</i>");
  const UiDraftInfo noDraft;  // a speculative token whose verification was not seen (a trace cut short)
  const UiDraftInfo& d = t.draft ? *t.draft : noDraft;
  switch (static_cast<UiTokenOrigin>(t.origin)) {
    case UiTokenOrigin::Accepted:
      tip += QStringLiteral("<br><span style='color:#008c3c'>drafted by %1 at position %2 of %3 (q=%4, p=%5), accepted</span>")
                 .arg(d.drafter)
                 .arg(d.position + 1)
                 .arg(d.numDrafted)
                 .arg(d.q, 0, 'f', 3)
                 .arg(d.p, 0, 'f', 3);
      break;
    case UiTokenOrigin::Resampled:
      tip += QStringLiteral("<br><span style='color:#d21e1e'>drafted <b>%1</b> (id %2, q=%3, p=%4) rejected at position %5 "
                            "of %6; resampled <b>%7</b></span>")
                 .arg(d.rejectedText.toHtmlEscaped())
                 .arg(d.rejectedId)
                 .arg(d.q, 0, 'f', 3)
                 .arg(d.p, 0, 'f', 3)
                 .arg(d.position + 1)
                 .arg(d.numDrafted)
                 .arg(t.piece.toHtmlEscaped());
      break;
    case UiTokenOrigin::Bonus:
      tip += QStringLiteral("<br><span style='color:#8228c8'>all %1 drafted tokens (%2) accepted; bonus token from the "
                            "target</span>")
                 .arg(d.numDrafted)
                 .arg(d.drafter);
      break;
    case UiTokenOrigin::Forced: tip += QStringLiteral("<br>forced (not sampled)"); break;
    case UiTokenOrigin::Plain: break;
  }
  if (evictionText_)
    if (const QString line = evictionText_(t.request, t.index); !line.isEmpty())
      tip += QStringLiteral("<br><span style='color:#606060'><s>KV</s> %1</span>").arg(line.toHtmlEscaped());
  return tip;
}

std::optional<UiToken> TokenView::tokenAt(int documentPos) const {
  const int pos = toTranscript(documentPos);
  auto it = std::upper_bound(spans_.begin(), spans_.end(), pos, [](int p, const Span& s) { return p < s.begin; });
  if (it == spans_.begin()) return std::nullopt;
  --it;
  return pos < it->end ? record(*it) : std::nullopt;
}

void TokenView::setSelected(RequestKey request, int index) {
  QList<QTextEdit::ExtraSelection> sel;
  for (const Run& run : runs_) {
    if (run.request != request || index < run.first_index ||
        static_cast<int64_t>(index) - run.first_index >= static_cast<int64_t>(run.count))
      continue;
    const Span& s = spans_[run.first + static_cast<size_t>(index - run.first_index)];
    QTextEdit::ExtraSelection e;
    e.cursor = QTextCursor(document());
    const auto [begin, end] = documentRange(s.begin, s.end);
    e.cursor.setPosition(begin);
    e.cursor.setPosition(end, QTextCursor::KeepAnchor);
    e.format.setUnderlineStyle(QTextCharFormat::SingleUnderline);
    e.format.setFontUnderline(true);
    e.format.setUnderlineColor(Qt::blue);
    e.format.setFontWeight(QFont::Bold);
    sel.push_back(e);
  }
  setExtraSelections(sel);
}

int TokenView::characterAt(const QPoint& viewportPoint) const {
  // cursorForPosition gives the nearest boundary between characters: the
  // character is the one on either side of it whose box holds the point.
  const int boundary = cursorForPosition(viewportPoint).position();
  const QPointF point = QPointF(viewportPoint) + QPointF(horizontalScrollBar()->value(), verticalScrollBar()->value());
  for (int pos : {boundary - 1, boundary}) {
    if (pos < 0 || pos >= document()->characterCount()) continue;
    if (document()->characterAt(pos).isLowSurrogate()) --pos;  // a pair is one character
    const QTextBlock block = document()->findBlock(pos);
    const int offset = pos - block.position();
    const QTextLayout* layout = block.layout();
    if (!layout || offset >= block.length() - 1) continue;  // the block's separator
    const int next = offset + (document()->characterAt(pos).isHighSurrogate() ? 2 : 1);
    const QTextLine line = layout->lineForTextPosition(offset);
    if (!line.isValid()) continue;
    const QPointF origin = document()->documentLayout()->blockBoundingRect(block).topLeft();
    const qreal x0 = origin.x() + line.cursorToX(offset), x1 = origin.x() + line.cursorToX(next);
    const qreal top = origin.y() + line.y();
    if (point.y() >= top && point.y() < top + line.height() && point.x() >= std::min(x0, x1) &&
        point.x() < std::max(x0, x1))
      return pos;
  }
  return -1;
}

void TokenView::mouseMoveEvent(QMouseEvent* event) {
  const int at = characterAt(event->position().toPoint());
  if (const std::optional<UiToken> t = at < 0 ? std::nullopt : tokenAt(at))
    QToolTip::showText(event->globalPosition().toPoint(), tooltipFor(*t), this);
  else if (at >= 0 && messageAt(at))
    QToolTip::showText(event->globalPosition().toPoint(),
                       tr("Double-click to edit: sending the edit starts a new branch from here"), this);
  else
    QToolTip::hideText();
  QTextEdit::mouseMoveEvent(event);
}

void TokenView::mousePressEvent(QMouseEvent* event) {
  const int at = characterAt(event->position().toPoint());
  if (const std::optional<UiToken> t = at < 0 ? std::nullopt : tokenAt(at)) emit tokenClicked(t->request, t->index);
  QTextEdit::mousePressEvent(event);
}

void TokenView::mouseDoubleClickEvent(QMouseEvent* event) {
  const int at = characterAt(event->position().toPoint());
  if (const std::optional<int> turn = at < 0 ? std::nullopt : messageAt(at)) emit messageActivated(*turn);
  QTextEdit::mouseDoubleClickEvent(event);
}

}  // namespace gbui
