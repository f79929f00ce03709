// PromptView: "Show prompt" for a chat turn: the exact text the engine rendered
// from the chat template, its tokens (control tokens highlighted), the token count
// against the context length, the format used and the fallback warning if any.
// Threads: UI thread.
#pragma once

#include <QDialog>

#include "session/ui_chat_prompt.h"

class QLabel;
class QPlainTextEdit;
class QTextBrowser;

namespace gbui {

class PromptView : public QDialog {
  Q_OBJECT
 public:
  explicit PromptView(QWidget* parent = nullptr);
  void setPrompt(const UiChatPrompt& prompt);
  // What the view shows (tests read these back).
  QString summaryText() const;
  QString promptText() const;
  QString tokensHtml() const;

  // "12 tokens of 4096 (0.3%), 3 control" (pure, for the panel's status too).
  static QString countText(const UiChatPrompt& prompt);
  // One token as it is shown: control tokens as written, others with
  // whitespace made visible (space ·, newline ↵, tab →).
  static QString displayPiece(const QString& piece, bool control);
  // A click on the prompt token at `position` (tests call it directly).
  void pickToken(int position) { emit tokenPicked(position); }

 signals:
  // A prompt token was clicked (the Inside panel inspects it).
  void tokenPicked(int position);

 private:
  QLabel* summary_;
  QLabel* warning_;
  QPlainTextEdit* text_;
  QTextBrowser* tokens_;
};

}  // namespace gbui
