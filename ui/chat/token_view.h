// TokenView: the chat transcript. Plain text (prompts, role labels) and
// generated tokens, each token a span whose background encodes its probability,
// entropy or rank. Hover shows id, probability and the top 3 alternatives;
// a click selects the token (tokenClicked). Speculative decoding marks tokens by
// origin: accepted drafted tokens get a solid green underline, resampled tokens
// (the target rejected the draft there) a red wavy one, bonus tokens a dotted
// purple one; the hover names the rejected drafted token with its q and p. Messages the
// user wrote (appendMessage) remember their turn: a double-click on one asks to
// edit it (messageActivated).
//
// Tokens whose KV a request's eviction policy dropped (setEvictionLookup: the
// chat's SessionModel) are drawn greyed and struck through, on a grey
// background: painted over the text from the spans (paintEvictionMarks), so
// marking a token evicted long after it was appended changes no document
// format; the hover says when and why ("evicted at step 40 by sink B=32 S=4
// R=28: outside the recent window").
//
// Tokens the request's format forced (its grammar allowed that token only) get
// a blue background of their own in every colour mode (forcedColor): their
// probability says nothing about the model, and the hover says so.
//
// Long paragraphs: the text layout lays out a whole QTextBlock again whenever
// text is added to it, so a 100,000-token answer in one paragraph would cost
// O(answer) per token. A block that grows past maxBlockChars() is therefore
// split into a new block at the start of one of its wrapped lines ("soft
// breaks"): the lines look exactly as before, and each insert lays out at most
// one bounded block. Soft breaks are not part of the transcript: token, message
// and selection ranges are kept in transcript positions (document positions
// without the soft breaks), copying leaves them out (createMimeDataFromSelection),
// and when the width changes they are moved to the new wrap points (reflow).
// Where a block is split depends only on its text and the width, never on how
// the text arrived (a token at a time, a frame's batch, a whole redraw): a
// closed paragraph is split at the last wrap point within maxBlockChars() of
// each piece's start, and the paragraph still being appended to only once a
// later line begins past that limit (before that, appended text may still move
// the wrap points). So a redraw of the last turns after truncateTo() gives the
// same blocks as a redraw of everything.
// Per-token data (spans_) lives beside the document, not in its formats: the
// probability colours are drawn under the text from the spans (a character
// format per token cost the document 40 bytes per token), so the tokens of a
// paragraph share the document's formats, and a span is only a key and a colour: the record itself (text, probabilities, candidates) is looked
// up where it is kept (setTokenLookup: the chat's SessionModel), so a long
// transcript costs the view 24 bytes per token (docs/performance.md, "Long
// chats"). A view without a lookup keeps slim copies of its tokens itself.
// Threads: UI thread.
#pragma once

#include <QTextBlock>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QTextEdit>
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "session/ui_events.h"

class QMimeData;
class QPainter;
class QTimer;

namespace gbui {

enum class ColorMode { Probability, Entropy, Rank };

class TokenView : public QTextEdit {
  Q_OBJECT
 public:
  explicit TokenView(QWidget* parent = nullptr);

  // Where the record of a span's token is (tooltips, clicks, tokenText):
  // nullptr when it is gone (e.g. the model was cleared). Unset (the default),
  // the view keeps a slim copy of every token appended (slimCopy).
  using TokenLookup = std::function<std::optional<UiToken>(RequestKey request, int index)>;
  void setTokenLookup(TokenLookup lookup);
  // Whether a token's KV was evicted (asked for every span painted), and the
  // line its hover shows. Unset: no token is marked.
  using EvictedLookup = std::function<bool(RequestKey request, int index)>;
  using EvictionText = std::function<QString(RequestKey request, int index)>;
  void setEvictionLookup(EvictedLookup isEvicted, EvictionText describe);
  bool spanEvicted(int i) const;
  // The background of an evicted token, and the wash and strike line over its text.
  static QColor evictedColor() { return QColor(222, 222, 222); }
  static QColor evictedStrikeColor() { return QColor(110, 110, 110); }
  void setColorMode(ColorMode mode) { mode_ = mode; }
  ColorMode colorMode() const { return mode_; }
  void clearAll();
  // Removes everything from transcript position `pos` on: text, token spans,
  // messages and the soft breaks there, leaving the document as appending the
  // text before `pos` builds it (the same blocks, block formats and soft
  // breaks), so a chat turn that changed is redrawn from its start without
  // touching the turns before it (code review U4). Only the paragraph holding
  // `pos` is touched before it: when it goes on past `pos` (completion mode)
  // its soft breaks are placed again, else at most its last one is undone.
  // Not between beginAppend() and endAppend().
  void truncateTo(int pos);
  // Characters of the transcript (the document without soft breaks).
  int transcriptLength() const { return transcriptEnd(); }
  void appendLabel(const QString& text);  // bold role label on its own line
  void appendPlain(const QString& text);
  // A user's message (turn index) or the system prompt (-1), editable by double-click.
  void appendMessage(const QString& text, int turn);
  // The message under a document position: its turn, -1 the system prompt, nullopt none.
  std::optional<int> messageAt(int documentPosition) const;
  // Document range [begin, end) of the message of `turn`, or nullopt (tests click it).
  std::optional<std::pair<int, int>> messageRange(int turn) const;
  void appendToken(const UiToken& token);
  // Reasoning (<think>...</think>) is styled apart: tokens appended while this is
  // on are grey italic; appendNote writes a grey italic line (a folded block).
  void setReasoningStyle(bool on) { reasoning_ = on; }
  void appendNote(const QString& text);
  int numTokenSpans() const { return static_cast<int>(spans_.size()); }
  // Concatenated text of every token span, in order (tests compare it with the engine).
  QString tokenText() const;
  QColor colorFor(const UiToken& token) const;
  // The background of a token the format forced (only one text was allowed).
  static QColor forcedColor() { return QColor(200, 215, 250); }
  static bool isForced(const UiToken& token) { return token.grammar && token.grammar->forced; }
  QString tooltipFor(const UiToken& token) const;
  // The underline that marks a token's origin (NoUnderline for plain tokens).
  static QTextCharFormat::UnderlineStyle originUnderline(int origin);
  static QColor originColor(int origin);
  // The character format the document holds for token span `i` (tests read the markers back).
  QTextCharFormat spanFormat(int i) const;
  // The background drawn under token span `i` (colorFor when it was appended).
  QColor spanColor(int i) const { return QColor::fromRgba(spans_[static_cast<size_t>(i)].color); }
  // Fills each token's background within `area` (document coordinates) with
  // its span's colour; paintEvent calls it before the text is drawn.
  void paintTokenBackgrounds(QPainter& painter, const QRectF& area) const;
  // Greys and strikes through the evicted tokens within `area` (document
  // coordinates); paintEvent calls it after the text is drawn.
  void paintEvictionMarks(QPainter& painter, const QRectF& area) const;
  // The record of token span `i` (nullopt when the lookup no longer has it).
  std::optional<UiToken> spanToken(int i) const { return record(spans_[static_cast<size_t>(i)]); }
  // The document position of the character drawn under a viewport point, -1 none.
  int characterAt(const QPoint& viewportPoint) const;
  // The token under a document position, or nullopt.
  std::optional<UiToken> tokenAt(int documentPosition) const;
  void setSelected(RequestKey request, int index);
  // The transcript as plain text, without soft breaks (what a full copy gives).
  QString transcriptText() const;
  // Blocks longer than this (characters) are split at a wrap point; tests lower
  // it. The paragraph still being appended to may exceed it by the line that
  // crosses it until a later line begins (see above).
  int maxBlockChars() const { return maxBlockChars_; }
  void setMaxBlockChars(int chars) { maxBlockChars_ = std::max(chars, 16); }
  int numSoftBreaks() const { return static_cast<int>(breaks_.size()); }
  // Appends between beginAppend() and endAppend() (nestable) are laid out
  // once, at endAppend(), instead of once per token: a frame's batch of tokens
  // costs one layout of the last block.
  void beginAppend();
  void endAppend();
  // Moves the soft breaks to the wrap points of the current width (runs by
  // itself shortly after a resize; tests call it directly).
  void reflow();

 signals:
  void tokenClicked(quint64 request, int index);
  void messageActivated(int turn);

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  bool viewportEvent(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;
  QMimeData* createMimeDataFromSelection() const override;

 private:
  // Transcript position <-> document position (they differ by the soft breaks before).
  int toDocument(int transcriptPos) const;
  int toTranscript(int documentPos) const;
  // Document range [begin, end) of transcript range [begin, end).
  std::pair<int, int> documentRange(int begin, int end) const;
  int transcriptEnd() const;
  // Splits `block` (and the blocks split off it) while a final split point
  // exists; returns the last piece.
  QTextBlock boundBlock(QTextBlock block);
  // Bounds every block from block number `first` to the end.
  void boundFrom(int first);
  // Where to split `block` (an offset in it), 0 when it is not to be split (yet).
  int splitOffset(const QTextBlock& block) const;
  bool softBreakAt(int documentPos) const;  // a soft break is the separator at documentPos
  // Deletes the separator before `second` (a soft break the caller has taken
  // out of breaks_); the joined block keeps the first piece's formats.
  void joinBlocks(const QTextBlock& second);
  void afterAppend();  // bounds a batch's long last block before the batch ends

  static constexpr int kTooltipAlternatives = 3;  // candidates a tooltip lists besides the token
  static UiToken slimCopy(const UiToken& token);

  struct Span {
    int begin = 0, end = 0;  // transcript positions
    int index = 0;           // UiToken::index
    QRgb color = 0;          // background (colorFor at append)
    RequestKey request = 0;  // UiToken::request
  };
  std::optional<UiToken> record(const Span& s) const;
  bool evicted(const Span& s) const { return evictedLookup_ && evictedLookup_(s.request, s.index); }
  // Calls draw(span, rectangle) for every line piece of every span within
  // `area` (document coordinates), in document order.
  void forEachSpanRect(const QRectF& area, const std::function<void(const Span&, const QRectF&)>& draw) const;
  ColorMode mode_ = ColorMode::Probability;
  TokenLookup lookup_;
  EvictedLookup evictedLookup_;
  EvictionText evictionText_;
  std::map<std::pair<RequestKey, int>, UiToken> own_;  // without a lookup: slim copies
  bool reasoning_ = false;
  // Ascending, non-overlapping transcript ranges. A deque: growing it never
  // copies (or holds twice) a long chat's spans, as a vector's doubling would.
  std::deque<Span> spans_;
  // Runs of spans_ that hold consecutive token indices of one request
  // (spans_[first + k] is token first_index + k): setSelected finds a token's
  // spans through the few runs instead of walking every span of a long chat.
  struct Run {
    RequestKey request = 0;
    int first_index = 0;
    size_t first = 0, count = 0;
  };
  std::vector<Run> runs_;
  struct MessageSpan {
    int begin = 0, end = 0, turn = 0;
  };
  std::vector<MessageSpan> messages_;  // ascending transcript ranges of user messages
  // Soft breaks, ascending: break k is a block separator in the document just
  // before transcript character breaks_[k], at document position breaks_[k] + k.
  std::vector<int> breaks_;
  int maxBlockChars_ = 512;
  int appendDepth_ = 0;
  int appendFrom_ = 0;       // the first block the current batch may have changed
  QTextCursor appendBatch_;  // holds the document's edit block while appending
  int reflowWidth_ = -1;  // the text width the soft breaks were placed for
  QTimer* reflowTimer_ = nullptr;
};

}  // namespace gbui
