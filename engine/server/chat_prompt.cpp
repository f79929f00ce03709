#include "server/chat_prompt.h"

namespace gb::server {

const char* chat_prompt_format_name(ChatPromptFormat format) {
  switch (format) {
    case ChatPromptFormat::Plain: return "plain";
    case ChatPromptFormat::ChatMl: return "chatml";
    case ChatPromptFormat::Llama2: return "llama2";
    case ChatPromptFormat::Llama3: return "llama3";
  }
  return "plain";
}

ChatPromptFormat detect_chat_prompt_format(const std::string& t) {
  if (t.find("<|im_start|>") != std::string::npos) return ChatPromptFormat::ChatMl;
  if (t.find("<|start_header_id|>") != std::string::npos) return ChatPromptFormat::Llama3;
  if (t.find("[INST]") != std::string::npos) return ChatPromptFormat::Llama2;
  return ChatPromptFormat::Plain;
}

namespace {

// <s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] user2 [/INST]
// The first BOS comes from the encoder; later turns spell theirs out.
std::string render_llama2(const std::vector<ChatMessage>& messages) {
  std::string out, system;
  bool first = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system = m.content;
    } else if (m.role == "user") {
      if (!first) out += "<s>";
      out += "[INST] ";
      if (!system.empty()) out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
      system.clear();
      out += m.content + " [/INST]";
      first = false;
    } else {
      out += " " + m.content + " </s>";
    }
  }
  return out;
}

}  // namespace

std::string render_chat_prompt(ChatPromptFormat format, const std::vector<ChatMessage>& messages) {
  std::string out;
  switch (format) {
    case ChatPromptFormat::Plain:  // base models: the text continues as written
      for (const ChatMessage& m : messages) out += m.content;
      return out;
    case ChatPromptFormat::ChatMl:
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      return out + "<|im_start|>assistant\n";
    case ChatPromptFormat::Llama2:
      return render_llama2(messages);
    case ChatPromptFormat::Llama3:
      for (const ChatMessage& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

std::string chat_prompt_for_model(const Model& model, const std::vector<ChatMessage>& messages) {
  return render_chat_prompt(detect_chat_prompt_format(model.chat_template), messages);
}

}  // namespace gb::server
