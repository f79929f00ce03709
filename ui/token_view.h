// TokenView: the chat transcript. Plain text (prompts, role labels) and
// generated tokens, each token a span whose background encodes its probability,
// entropy or rank. Hover shows id, probability and the top 3 alternatives;
// a click selects the token (tokenClicked). Speculative decoding marks tokens by
// origin: accepted drafted tokens get a solid green underline, resampled tokens
// (the target rejected the draft there) a red wavy one, bonus tokens a dotted
// purple one; the hover names the rejected drafted token with its q and p. Tokens are appended incrementally
// while streaming, so a long answer costs O(new tokens) per frame. Messages the
// user wrote (appendMessage) remember their turn: a double-click on one asks to
// edit it (messageActivated).
// Threads: UI thread.
#pragma once

#include <QTextCharFormat>
#include <QTextEdit>
#include <optional>
#include <utility>
#include <vector>

#include "ui_events.h"

namespace gbui {

enum class ColorMode { Probability, Entropy, Rank };

class TokenView : public QTextEdit {
  Q_OBJECT
 public:
  explicit TokenView(QWidget* parent = nullptr);

  void setColorMode(ColorMode mode) { mode_ = mode; }
  ColorMode colorMode() const { return mode_; }
  void clearAll();
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
  QString tooltipFor(const UiToken& token) const;
  // The underline that marks a token's origin (NoUnderline for plain tokens).
  static QTextCharFormat::UnderlineStyle originUnderline(int origin);
  static QColor originColor(int origin);
  // The character format the document holds for token span `i` (tests read the markers back).
  QTextCharFormat spanFormat(int i) const;
  const UiToken& spanToken(int i) const { return spans_[static_cast<size_t>(i)].token; }
  // The token under a document position, or nullptr.
  const UiToken* tokenAt(int documentPosition) const;
  void setSelected(RequestKey request, int index);

 signals:
  void tokenClicked(quint64 request, int index);
  void messageActivated(int turn);

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;

 private:
  struct Span {
    int begin = 0, end = 0;
    UiToken token;
  };
  ColorMode mode_ = ColorMode::Probability;
  bool reasoning_ = false;
  std::vector<Span> spans_;  // ascending, non-overlapping document ranges
  struct MessageSpan {
    int begin = 0, end = 0, turn = 0;
  };
  std::vector<MessageSpan> messages_;  // ascending document ranges of user messages
};

}  // namespace gbui
