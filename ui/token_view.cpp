#include "token_view.h"

#include <QMouseEvent>
#include <QTextBlock>
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
}

void TokenView::clearAll() {
  reasoning_ = false;
  clear();
  spans_.clear();
  messages_.clear();
}

void TokenView::appendLabel(const QString& text) {
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  if (!document()->isEmpty()) c.insertBlock();
  QTextCharFormat f;
  f.setFontWeight(QFont::Bold);
  f.setForeground(palette().color(QPalette::Highlight));
  c.insertText(text, f);
  c.insertBlock();
}

void TokenView::appendPlain(const QString& text) {
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  c.insertText(text, QTextCharFormat());
}

void TokenView::appendMessage(const QString& text, int turn) {
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  const int begin = c.position();
  c.insertText(text, QTextCharFormat());
  messages_.push_back({begin, c.position(), turn});
}

std::optional<int> TokenView::messageAt(int pos) const {
  for (const MessageSpan& m : messages_)
    if (pos >= m.begin && pos < m.end) return m.turn;
  return std::nullopt;
}

std::optional<std::pair<int, int>> TokenView::messageRange(int turn) const {
  for (const MessageSpan& m : messages_)
    if (m.turn == turn) return std::make_pair(m.begin, m.end);
  return std::nullopt;
}

void TokenView::appendNote(const QString& text) {
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  QTextCharFormat f;
  f.setFontItalic(true);
  f.setForeground(QColor(0x70, 0x70, 0x70));
  c.insertText(text, f);
}

void TokenView::appendToken(const UiToken& token) {
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  const int begin = c.position();
  QTextCharFormat f;
  f.setBackground(colorFor(token));
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
  spans_.push_back({begin, c.position(), token});
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
  c.setPosition(s.begin + 1);  // the format of the character before the cursor
  return c.charFormat();
}

QString TokenView::tokenText() const {
  QString out;
  for (const Span& s : spans_) out += s.token.text;
  return out;
}

QColor TokenView::colorFor(const UiToken& t) const {
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
      if (++shown == 3) break;
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
    if (++shown == 3) break;
  }
  switch (static_cast<UiTokenOrigin>(t.origin)) {
    case UiTokenOrigin::Accepted:
      tip += QStringLiteral("<br><span style='color:#008c3c'>drafted by %1 at position %2 of %3 (q=%4, p=%5), accepted</span>")
                 .arg(t.drafter)
                 .arg(t.draftPosition + 1)
                 .arg(t.numDrafted)
                 .arg(t.draftQ, 0, 'f', 3)
                 .arg(t.draftP, 0, 'f', 3);
      break;
    case UiTokenOrigin::Resampled:
      tip += QStringLiteral("<br><span style='color:#d21e1e'>drafted <b>%1</b> (id %2, q=%3, p=%4) rejected at position %5 "
                            "of %6; resampled <b>%7</b></span>")
                 .arg(t.rejectedText.toHtmlEscaped())
                 .arg(t.rejectedId)
                 .arg(t.draftQ, 0, 'f', 3)
                 .arg(t.draftP, 0, 'f', 3)
                 .arg(t.draftPosition + 1)
                 .arg(t.numDrafted)
                 .arg(t.piece.toHtmlEscaped());
      break;
    case UiTokenOrigin::Bonus:
      tip += QStringLiteral("<br><span style='color:#8228c8'>all %1 drafted tokens (%2) accepted; bonus token from the "
                            "target</span>")
                 .arg(t.numDrafted)
                 .arg(t.drafter);
      break;
    case UiTokenOrigin::Forced: tip += QStringLiteral("<br>forced (not sampled)"); break;
    case UiTokenOrigin::Plain: break;
  }
  return tip;
}

const UiToken* TokenView::tokenAt(int pos) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), pos, [](int p, const Span& s) { return p < s.begin; });
  if (it == spans_.begin()) return nullptr;
  --it;
  return pos < it->end ? &it->token : nullptr;
}

void TokenView::setSelected(RequestKey request, int index) {
  QList<QTextEdit::ExtraSelection> sel;
  for (const Span& s : spans_) {
    if (s.token.request != request || s.token.index != index) continue;
    QTextEdit::ExtraSelection e;
    e.cursor = QTextCursor(document());
    e.cursor.setPosition(s.begin);
    e.cursor.setPosition(s.end, QTextCursor::KeepAnchor);
    e.format.setUnderlineStyle(QTextCharFormat::SingleUnderline);
    e.format.setFontUnderline(true);
    e.format.setUnderlineColor(Qt::blue);
    e.format.setFontWeight(QFont::Bold);
    sel.push_back(e);
  }
  setExtraSelections(sel);
}

void TokenView::mouseMoveEvent(QMouseEvent* event) {
  const QTextCursor c = cursorForPosition(event->position().toPoint());
  if (const UiToken* t = tokenAt(c.position()))
    QToolTip::showText(event->globalPosition().toPoint(), tooltipFor(*t), this);
  else if (messageAt(c.position()))
    QToolTip::showText(event->globalPosition().toPoint(),
                       tr("Double-click to edit: sending the edit starts a new branch from here"), this);
  else
    QToolTip::hideText();
  QTextEdit::mouseMoveEvent(event);
}

void TokenView::mousePressEvent(QMouseEvent* event) {
  const QTextCursor c = cursorForPosition(event->position().toPoint());
  if (const UiToken* t = tokenAt(c.position())) emit tokenClicked(t->request, t->index);
  QTextEdit::mousePressEvent(event);
}

void TokenView::mouseDoubleClickEvent(QMouseEvent* event) {
  const QTextCursor c = cursorForPosition(event->position().toPoint());
  if (const std::optional<int> turn = messageAt(c.position())) emit messageActivated(*turn);
  QTextEdit::mouseDoubleClickEvent(event);
}

}  // namespace gbui
