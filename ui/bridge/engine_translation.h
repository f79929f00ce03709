// The bridge's translations between engine values and the workbench's
// (ui/session/ui_events.h): trace events, rendered chat prompts, the model
// summary, the vocabulary's display texts, and a recorded trace read for
// replay. Bridge-internal (names engine types).
// Threads: any (pure functions of their arguments).
#pragma once

#include <QString>
#include <QVector>
#include <string>

#include "session/ui_chat_prompt.h"
#include "session/ui_events.h"

#include "runtime/chat_request.h"
#include "trace/trace_event.h"

namespace gb {
class Engine;
struct Model;
class Tokenizer;
}  // namespace gb

namespace gbui {

inline QString qstr(const std::string& s) { return QString::fromStdString(s); }

// Engine event -> UI event (token texts from `vocab`).
UiEvent toUiEvent(const gb::TraceEvent& event, const QVector<QString>& vocab);
// Display text per token id: byte-level tokens that hold part of a character
// read as <0xE2>, not U+FFFD.
QVector<QString> vocabularyTexts(const gb::Tokenizer& tokenizer);
// What the Model panel and the KV panel show of a loaded engine (vocab left empty).
UiModelInfo modelInfo(const gb::Model& model, const gb::Tokenizer& tokenizer, gb::Engine& engine, int numScratchBlocks);
// The chat panel's messages rendered for the engine: the model's own template
// ("model") or a built-in format, assistant answers without their reasoning.
gb::ChatRequest renderChatRequest(const gb::Model& model, const gb::Tokenizer& tokenizer,
                                  const QVector<UiChatMessage>& messages, const QString& format,
                                  const gb::SamplerSettings& settings);
UiChatPrompt toUiPrompt(quint64 tag, const gb::ChatRequest& chat, const gb::Tokenizer& tokenizer, int contextLength);
// Reads a recorded trace (JSONL) as a replay: its model summary and events;
// false with `error` when it cannot be read.
bool readTraceForReplay(const QString& path, UiModelInfo& info, UiEventBatch& batch, QString& error);

}  // namespace gbui
