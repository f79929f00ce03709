// ChatFormat: the built-in prompt formats (plain, ChatML, Llama-2 [INST],
// Llama-3 headers), how to pick one from a model's tokenizer.chat_template, and
// how a conversation becomes prompt text. BOS is added by the engine side.
// Threads: pure functions.
#pragma once

#include <QString>
#include <QVector>

namespace gbui {

enum class ChatFormat { Plain, ChatMl, Llama2, Llama3 };

struct ChatMessage {
  QString role;  // "system" | "user" | "assistant"
  QString text;
};

QString chatFormatName(ChatFormat format);
ChatFormat chatFormatFromName(const QString& name);
// Recognises the format a Jinja chat template spells out; Plain when it names none.
ChatFormat detectChatFormat(const QString& chatTemplate);
// The prompt for `messages`, ending where the assistant's next reply starts.
QString renderChatPrompt(ChatFormat format, const QVector<ChatMessage>& messages);

}  // namespace gbui
