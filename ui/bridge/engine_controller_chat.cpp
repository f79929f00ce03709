// EngineController::submitChat: chat formatting happens in the engine
// (runtime/chat_request.h, code review A11); the UI only sends the conversation.
#include <QCoreApplication>

#include "engine_controller.h"
#include "engine_controller_state.h"
#include "runtime/chat_request.h"
#include "sampling/sampler_settings_json.h"
#include "speculative/speculative_config.h"

namespace gbui {
namespace {

UiChatPrompt toUiPrompt(quint64 tag, const gb::ChatRequest& chat, const gb::Tokenizer& tokenizer, int contextLength) {
  UiChatPrompt p;
  p.tag = tag;
  p.text = QString::fromStdString(chat.prompt.text);
  p.format = QString::fromStdString(chat.prompt.format);
  p.warning = QString::fromStdString(chat.prompt.warning);
  p.templateHash = QString::fromStdString(chat.prompt.template_hash);
  p.contextLength = contextLength;
  for (gb::TokenId id : chat.request.prompt_ids) {
    p.ids.push_back(id);
    p.pieces.push_back(QString::fromStdString(tokenizer.token_piece(id)));
    p.control.push_back(tokenizer.is_control(id));
  }
  return p;
}

}  // namespace

gb::ChatRequest renderChatRequest(const gb::Model& model, const gb::Tokenizer& tokenizer,
                                  const QVector<UiChatMessage>& messages, const QString& format,
                                  const gb::SamplerSettings& settings) {
  std::optional<gb::BuiltinChatFormat> forced;
  if (format != QLatin1String("model")) forced = gb::builtin_chat_format_from_name(format.toStdString());
  const gb::ChatFormatter formatter = gb::chat_formatter_for(model, tokenizer, forced);
  std::vector<gb::ChatMessage> history;
  for (const UiChatMessage& m : messages) {
    if (m.role == QLatin1String("assistant")) history.push_back(gb::assistant_history_message(m.text.toStdString()));
    else history.push_back({m.role.toStdString(), m.text.toStdString(), {}});
  }
  return gb::make_chat_request(formatter, tokenizer, history, settings);
}

void EngineController::submitChat(quint64 tag, const QVector<UiChatMessage>& messages, const QString& format,
                                  const QString& samplerJson, int maxTokens, const QString& speculativeSpec,
                                  const QVector<quint64>& branchFrom) {
  if (!speculativeSpec.isEmpty() && refuseRemote(tag, tr("Speculative decoding"))) return;
  if (submitChatRemote(tag, messages, samplerJson, maxTokens)) return;
  gb::SamplerSettings settings;
  if (!localSettings(tag, samplerJson, maxTokens, settings)) return;
  gb::ChatRequest chat = renderChatRequest(*state_->model, *state_->tokenizer, messages, format, settings);
  notify(&EngineController::chatPromptReady, toUiPrompt(tag, chat, *state_->tokenizer, state_->engine->max_context()));
  submitLocal(tag, std::move(chat.request), branchFrom, speculativeSpec);
}

}  // namespace gbui
