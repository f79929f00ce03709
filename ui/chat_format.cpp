#include "chat_format.h"

namespace gbui {

QString chatFormatName(ChatFormat format) {
  switch (format) {
    case ChatFormat::Plain: return QStringLiteral("plain");
    case ChatFormat::ChatMl: return QStringLiteral("chatml");
    case ChatFormat::Llama2: return QStringLiteral("llama2");
    case ChatFormat::Llama3: return QStringLiteral("llama3");
  }
  return QStringLiteral("plain");
}

ChatFormat chatFormatFromName(const QString& name) {
  for (ChatFormat f : {ChatFormat::ChatMl, ChatFormat::Llama2, ChatFormat::Llama3})
    if (chatFormatName(f) == name) return f;
  return ChatFormat::Plain;
}

ChatFormat detectChatFormat(const QString& chatTemplate) {
  if (chatTemplate.contains(QLatin1String("<|im_start|>"))) return ChatFormat::ChatMl;
  if (chatTemplate.contains(QLatin1String("<|start_header_id|>"))) return ChatFormat::Llama3;
  if (chatTemplate.contains(QLatin1String("[INST]"))) return ChatFormat::Llama2;
  return ChatFormat::Plain;
}

namespace {

QString renderLlama2(const QVector<ChatMessage>& messages) {
  // <s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] user2 [/INST]
  // The first BOS comes from the engine; later turns spell theirs out.
  QString out, system;
  bool first = true;
  for (const ChatMessage& m : messages) {
    if (m.role == QLatin1String("system")) {
      system = m.text;
    } else if (m.role == QLatin1String("user")) {
      if (!first) out += QStringLiteral("<s>");
      out += QStringLiteral("[INST] ");
      if (!system.isEmpty()) out += QStringLiteral("<<SYS>>\n%1\n<</SYS>>\n\n").arg(system);
      system.clear();
      out += m.text + QStringLiteral(" [/INST]");
      first = false;
    } else {
      out += QLatin1Char(' ') + m.text + QStringLiteral(" </s>");
    }
  }
  return out;
}

}  // namespace

QString renderChatPrompt(ChatFormat format, const QVector<ChatMessage>& messages) {
  QString out;
  switch (format) {
    case ChatFormat::Plain:
      // Notebook mode for base models: the text continues as written.
      for (const ChatMessage& m : messages) out += m.text;
      return out;
    case ChatFormat::ChatMl:
      for (const ChatMessage& m : messages) out += QStringLiteral("<|im_start|>%1\n%2<|im_end|>\n").arg(m.role, m.text);
      return out + QStringLiteral("<|im_start|>assistant\n");
    case ChatFormat::Llama2:
      return renderLlama2(messages);
    case ChatFormat::Llama3:
      for (const ChatMessage& m : messages)
        out += QStringLiteral("<|start_header_id|>%1<|end_header_id|>\n\n%2<|eot_id|>").arg(m.role, m.text);
      return out + QStringLiteral("<|start_header_id|>assistant<|end_header_id|>\n\n");
  }
  return out;
}

}  // namespace gbui
