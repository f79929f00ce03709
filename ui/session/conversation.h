// Conversation: the chat as the user sees it — turns, and for each assistant
// turn the engine requests that answered it (branches: regenerations and forks
// from an alternative token), one of them current. Editing an earlier message
// (or the system prompt) starts a new path: the conversation up to that message,
// the edited text and a new answer; the old path, with its later turns, is kept
// in `otherPaths` and shown again when one of its requests is picked in the
// Branches panel. JSON for the session autosave.
// Threads: UI thread (plain value).
#pragma once

#include <QJsonObject>
#include <QString>
#include <QVector>

#include "ui_chat_prompt.h"
#include "ui_events.h"

namespace gbui {

struct Turn {
  QString role;                   // "user" | "assistant"
  QString text;                   // user text, or the assistant's current branch text once known
  QVector<RequestKey> branches;   // assistant: requests, in creation order
  int current = 0;                // index into branches
  RequestKey currentRequest() const { return branches.isEmpty() ? 0 : branches[current]; }
};

// A conversation the user left by editing an earlier message.
struct ConversationPath {
  QString systemPrompt;
  QVector<Turn> turns;
};

struct Conversation {
  QString systemPrompt;
  QVector<Turn> turns;
  QVector<ConversationPath> otherPaths;  // paths left by edits, oldest first
  bool completionMode = false;  // notebook: one prompt, the model continues it
  // "model" (the model's own chat template, rendered by the engine) or a
  // built-in format: "chatml", "llama2", "llama3", "plain".
  QString format = QStringLiteral("model");

  // Messages up to (not including) turn `end`, with assistant texts as given.
  QVector<UiChatMessage> messagesBefore(int end) const;
  // Every request that answered a turn of the shown path (current branches first).
  QVector<RequestKey> requestsOfPath() const;
  // Keeps the shown path in otherPaths and starts a new one: the turns before
  // user turn `turn` (the system prompt when `turn` is -1, keeping the first
  // user message), the edited text and an empty assistant turn. Returns the new
  // assistant turn's index, -1 when `turn` is not a user turn.
  int editMessage(int turn, const QString& text);
  // Shows the path (and the branch) holding `request`; false if none holds it.
  bool showRequest(RequestKey request);
  QJsonObject toJson() const;
  static Conversation fromJson(const QJsonObject& json);
};

}  // namespace gbui
