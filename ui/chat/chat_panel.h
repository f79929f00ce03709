// ChatPanel: multi-turn chat and plain completion (notebook) mode. Owns the
// Conversation; renders it into a TokenView with every generated token as a
// coloured span, streams new tokens as event batches arrive, and offers send
// (Ctrl+Enter), stop (Esc), regenerate, edit-and-resend, a system prompt and
// branch navigation (< 1/2 seed S >, the seed copyable) for the last answer.
// Every interactive widget has an object name (tests, accessibility tools).
// Requests go out as signals (generate with a TurnCommand, stop); MainWindow
// forwards them to the EngineController and reports the request id back via
// onRequestSubmitted. Chat turns go out as messages: the engine renders them with
// the model's own chat template (the default "model" format) or a built-in one,
// and answers with the prompt it rendered (onChatPrompt): a fallback warning is
// shown above the transcript, "Show prompt" opens the exact text and tokens.
// Editing: "Edit" takes the last user message, a double-click on any earlier
// user message (or on the system prompt) takes that one; Send then starts a new
// path of the conversation (Conversation::editMessage) whose request branches
// from the old path's requests: the engine forks the one sharing the longest
// token prefix with the new rendering, so the KV before the edit is reused. The
// old path stays in the Branches panel. Regenerate branches from the shown answer.
// Reasoning (<think>...</think>) is folded into one grey line with its token count
// unless "Show reasoning" is ticked (then shown grey italic); the engine drops it
// from the history it sends back.
// Threads: UI thread.
#pragma once

#include <QWidget>

#include <QHash>

#include "session/conversation.h"
#include "session/token_list.h"
#include "token_view.h"
#include "session/ui_chat_prompt.h"
#include "session/ui_commands.h"

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QToolButton;
class QVBoxLayout;

namespace gbui {

class PromptView;
class SessionModel;
struct RequestInfo;

// Where reasoning sits in an answer's tokens: [begin, end) token indices, the
// markers included; `closed` once </think> was generated. begin == end: none.
struct ReasoningRange {
  int begin = 0, end = 0;
  bool closed = false;
  int size() const { return end - begin; }
};
ReasoningRange findReasoning(const TokenSeq& tokens);

class ChatPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ChatPanel(SessionModel* model, QWidget* parent = nullptr);

  const Conversation& conversation() const { return conversation_; }
  void setConversation(const Conversation& conversation);
  // "model" or a built-in format's name ("chatml", "llama2", "llama3", "plain").
  void setFormat(const QString& format);
  QString format() const;
  // The prompt the engine rendered for the current assistant turn (tag), if any.
  const UiChatPrompt* promptFor(quint64 tag) const;
  QString warningText() const;
  void setShowReasoning(bool show);
  PromptView* promptView() const { return promptView_; }
  void setInputText(const QString& text);
  void setMaxTokens(int maxTokens);
  int maxTokens() const;
  TokenView* view() const { return view_; }
  RequestKey activeRequest() const { return active_; }
  // Completion mode (the text continues as written) or chat mode.
  void setCompletionMode(bool completion);
  bool completionMode() const;
  // Whether the conversation holds answers besides the path shown (regenerated
  // or branched turns, or paths left by an edit): what starting anew would lose.
  bool hasBranches() const;
  // The turn whose branches include `request` (or one of its forks), -1 if none.
  int turnOf(RequestKey request) const;
  // Tokens shown for `request`: its fork ancestors' tokens before each fork point, then its own.
  TokenSeq displayedTokens(RequestKey request) const;

 public slots:
  void send();
  void stop();
  void regenerate();
  void editLast();
  // Starts editing user turn `turn` (-1: the system prompt); Send submits it.
  void editMessage(int turn);
  void cancelEdit();
  void clearConversation();
  void onRequestSubmitted(quint64 tag, quint64 request);
  void onRequestFailed(quint64 tag, const QString& message);
  void onChatPrompt(const gbui::UiChatPrompt& prompt);
  void showPrompt();
  void showBranch(int delta);
  void rerender();
  // Redraws the turns from `turn` on and keeps the ones before it as drawn
  // (code review U4: a submit, a branch switch, an edit or a redraw of a
  // reasoning answer costs the turns that changed, not the whole
  // conversation); the result is what rerender() draws. Falls back to
  // rerender() when the turns before would be drawn differently now (another
  // mode or system prompt) or no start is recorded for `turn`.
  void rerenderFrom(int turn);

 signals:
  // One answer to get: the turn it answers, its prompt or messages, what it
  // may branch from, and whether it is a regeneration (ui/session/ui_commands.h).
  void generate(const gbui::TurnCommand& turn);
  void stopRequested(quint64 request);
  void conversationChanged();
  void tokenClicked(quint64 request, int index);
  // A prompt token clicked in "Show prompt": its request and prompt position.
  void promptTokenClicked(quint64 request, int position);

 private:
  QHBoxLayout* buildToolBar();
  QHBoxLayout* buildNavigator();
  void buildMessageArea(QVBoxLayout* layout);
  void setObjectNames();
  void connectControls();
  void onBatch();
  void markEvictions();
  void updateButtons();
  void submitTurn(int assistantTurn, const QVector<quint64>& branchFrom = {}, bool regenerate = false);
  QString turnText(RequestKey request) const;
  void appendAnswer(const TokenSeq& tokens);
  void appendToken(const UiToken& token);  // to the view; shows the forced legend on a forced token
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
  QPushButton* cancelEdit_;
  int editing_ = kNotEditing;  // the user turn being edited, -1 the system prompt
  static constexpr int kNotEditing = -2;
  QPushButton* prevBranch_;
  QPushButton* nextBranch_;
  QLabel* branchLabel_;
  QToolButton* copySeed_;
  QLabel* status_;
  QLabel* warning_;
  QLabel* forcedLegend_;  // "forced" on the forced tokens' colour, once the chat shows one
  QPushButton* showPrompt_;
  QCheckBox* showReasoning_;
  PromptView* promptView_ = nullptr;
  QHash<quint64, UiChatPrompt> prompts_;  // by assistant turn
  RequestKey active_ = 0;        // the streaming request, 0 when idle
  bool pending_ = false;         // a request was asked for; its id has not come back yet
  RequestKey rendered_ = 0;      // request whose tokens end the view
  int renderedTokens_ = 0;       // of those, how many are shown (fork ancestry included)
  int renderedOwn_ = 0;          // of the request's own tokens, how many are shown
  bool renderedKnown_ = false;   // the model knew that request when it was rendered
  bool renderedReasoning_ = false;  // the rendered answer has a <think> block
  quint64 paintedEvictions_ = 0;    // SessionModel::evictionRevision() the view was last repainted for
  bool evictionLookupSet_ = false;  // the view asks the model which tokens were evicted
  int renderedTurn_ = -1;           // the turn that set the rendered* fields above
  std::vector<int> turnStarts_;     // (drawn turns) transcript position where each begins
  bool drawnCompletionMode_ = false;  // the mode and system prompt the drawn turns are under
  QString drawnSystemPrompt_;
  QString shownSystemPrompt() const;  // the system prompt a redraw shows ("" in completion mode)
  void drawTurn(int turn);            // appends one turn; an answer sets the rendered* fields
  bool mayHaveReasoning(const RequestInfo& r) const;  // rendered or in the new tokens
};

}  // namespace gbui
