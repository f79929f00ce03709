// Chat values that cross the Qt/engine seam: the conversation the chat panel
// sends (UiChatMessage), and the prompt the engine rendered for it (UiChatPrompt:
// the exact text, its tokens with control tokens marked, the format used and the
// fallback warning when the model's own template could not be used).
// Threads: plain values, copied across threads by queued signals.
#pragma once

#include <QMetaType>
#include <QString>
#include <QVector>

namespace gbui {

struct UiChatMessage {
  QString role;  // "system" | "user" | "assistant"
  QString text;  // an assistant's text as generated (the engine drops <think> for history)
};

struct UiChatPrompt {
  quint64 tag = 0;          // the assistant turn this prompt asks for
  QString text;             // the rendered prompt, exactly as tokenized
  QString format;           // "model" or a built-in format's name
  QString warning;          // why the model's template was not used ("" if it was)
  QString templateHash;     // SHA-256 of the template used (prefix-cache isolation)
  QVector<int> ids;         // (num_tokens) prompt token ids
  QVector<QString> pieces;  // (num_tokens) vocabulary pieces, for display
  QVector<bool> control;    // (num_tokens) control tokens (<|im_start|>, <s>, ...)
  int contextLength = 0;
};

}  // namespace gbui

Q_DECLARE_METATYPE(gbui::UiChatPrompt)
