// Typed controller commands (ui/session/ui_commands.h) built from the short
// forms the workbench tests use; sampler JSON goes through the settings codec
// like the window's.
#pragma once

#include <QString>
#include <QVector>

#include "bridge/engine_settings_codec.h"
#include "session/ui_commands.h"

namespace gbuitest {

inline gbui::SubmitCommand completionCommand(quint64 tag, const QString& prompt, const QString& samplerJson,
                                             int maxTokens) {
  gbui::SubmitCommand c;
  c.turn.tag = tag;
  c.turn.prompt = prompt;
  c.turn.maxTokens = maxTokens;
  c.sampler = gbui::engineSettingsCodec().parseSampler(samplerJson);
  return c;
}

inline gbui::SubmitCommand chatCommand(quint64 tag, const QVector<gbui::UiChatMessage>& messages, const QString& format,
                                       const QString& samplerJson, int maxTokens) {
  gbui::SubmitCommand c = completionCommand(tag, {}, samplerJson, maxTokens);
  c.turn.chat = true;
  c.turn.messages = messages;
  c.turn.format = format;
  return c;
}

inline gbui::LoadCommand loadCommand(const QString& path, const QString& device) {
  gbui::LoadCommand c;
  c.path = path;
  c.device = device;
  return c;
}

}  // namespace gbuitest
