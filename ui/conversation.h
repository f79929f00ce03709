// Conversation: the chat as the user sees it — turns, and for each assistant
// turn the engine requests that answered it (branches: regenerations and forks
// from an alternative token), one of them current. JSON for the session autosave.
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

struct Conversation {
  QString systemPrompt;
  QVector<Turn> turns;
  bool completionMode = false;  // notebook: one prompt, the model continues it
  // "model" (the model's own chat template, rendered by the engine) or a
  // built-in format: "chatml", "llama2", "llama3", "plain".
  QString format = QStringLiteral("model");

  // Messages up to (not including) turn `end`, with assistant texts as given.
  QVector<UiChatMessage> messagesBefore(int end) const;
  QJsonObject toJson() const;
  static Conversation fromJson(const QJsonObject& json);
};

}  // namespace gbui
