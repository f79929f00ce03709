// ChatPanel: multi-turn chat and plain completion (notebook) mode. Owns the
// Conversation; renders it into a TokenView with every generated token as a
// coloured span, streams new tokens as event batches arrive, and offers send
// (Ctrl+Enter), stop (Esc), regenerate, edit-and-resend, a system prompt and
// branch navigation (< 1/2 seed S >, the seed copyable) for the last answer.
// Every interactive widget has an object name (tests, accessibility tools).
// Requests go out as signals (generate / stop); MainWindow forwards them to the
// EngineController and reports the request id back via onRequestSubmitted.
// Threads: UI thread.
#pragma once

#include <QWidget>

#include "conversation.h"
#include "token_view.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace gbui {

class SessionModel;

class ChatPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ChatPanel(SessionModel* model, QWidget* parent = nullptr);

  const Conversation& conversation() const { return conversation_; }
  void setConversation(const Conversation& conversation);
  void setFormat(ChatFormat format);
  ChatFormat format() const;
  void setInputText(const QString& text);
  void setMaxTokens(int maxTokens);
  int maxTokens() const;
  TokenView* view() const { return view_; }
  RequestKey activeRequest() const { return active_; }
  // The turn whose branches include `request` (or one of its forks), -1 if none.
  int turnOf(RequestKey request) const;
  // Tokens shown for `request`: its fork ancestors' tokens before each fork point, then its own.
  std::vector<UiToken> displayedTokens(RequestKey request) const;

 public slots:
  void send();
  void stop();
  void regenerate();
  void editLast();
  void clearConversation();
  void onRequestSubmitted(quint64 tag, quint64 request);
  void onRequestFailed(quint64 tag, const QString& message);
  void showBranch(int delta);
  void rerender();

 signals:
  // tag: the assistant turn index the request answers.
  void generate(quint64 tag, const QString& prompt, int maxTokens);
  void stopRequested(quint64 request);
  void conversationChanged();
  void tokenClicked(quint64 request, int index);

 private:
  void onBatch();
  void updateButtons();
  void submitTurn(int assistantTurn);
  QString turnText(RequestKey request) const;
  qint64 shownSeed() const;  // seed of the last answer's current branch, -1 none

  SessionModel* model_;
  Conversation conversation_;
  TokenView* view_;
  QPlainTextEdit* input_;
  QLineEdit* system_;
  QComboBox* mode_;
  QComboBox* format_;
  QComboBox* color_;
  QSpinBox* maxTokens_;
  QPushButton* send_;
  QPushButton* stop_;
  QPushButton* regenerate_;
  QPushButton* edit_;
  QPushButton* prevBranch_;
  QPushButton* nextBranch_;
  QLabel* branchLabel_;
  QToolButton* copySeed_;
  QLabel* status_;
  RequestKey active_ = 0;        // the streaming request, 0 when idle
  bool pending_ = false;         // a request was asked for; its id has not come back yet
  RequestKey rendered_ = 0;      // request whose tokens end the view
  int renderedTokens_ = 0;       // of those, how many are shown (fork ancestry included)
  int renderedOwn_ = 0;          // of the request's own tokens, how many are shown
  bool renderedKnown_ = false;   // the model knew that request when it was rendered
};

}  // namespace gbui
