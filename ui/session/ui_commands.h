// The workbench's commands to the engine, as small typed values: what a panel
// asks for (TurnCommand from the chat) and what the window posts to the bridge
// (EngineController's command slots take these, not positional argument lists
// or JSON text). Sampler settings travel as the SamplerChoice the settings
// codec parsed once (ui/session/settings_codec.h).
// Threads: plain values, copied into the engine thread's mailbox.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>

#include "settings_codec.h"
#include "ui_chat_prompt.h"

namespace gbui {

// One answer for the chat to get (ChatPanel::generate). Completion mode:
// `prompt` is the text to continue; chat mode: `messages`, rendered in `format`.
struct TurnCommand {
  quint64 tag = 0;  // the assistant turn index the request answers
  bool chat = false;
  QString prompt;
  QVector<UiChatMessage> messages;
  QString format;  // "model" or a built-in chat format
  int maxTokens = 0;
  QVector<quint64> branchFrom;  // earlier requests it may branch from (regenerate, edit)
  // Another answer to a turn that has one: a new seed unless the seed is pinned.
  bool regenerate = false;
};

// A generation request for the bridge: the turn and the settings it runs with.
struct SubmitCommand {
  TurnCommand turn;
  SamplerChoice sampler;
  QString speculative;  // the CLI's text form ("" = plain decoding), checked by the codec
  KvPolicyChoice kvPolicy;  // KV eviction, checked by the codec (SettingsCodec::checkKvPolicy)
};

// Branch `parent` after `numTokens` tokens (prompt + output), forcing
// `forcedToken` next (-1: none).
struct ForkCommand {
  quint64 tag = 0;
  quint64 parent = 0;
  int numTokens = 0;
  int forcedToken = -1;
  int maxTokens = 0;
};

// A sampler comparison (engine/runtime/comparison.h, docs/compare.md).
struct CompareCommand {
  struct Lane {
    QString name;
    SamplerChoice sampler;
    QString kvPolicyJson;  // "" = full; else the codec's resolved policy (LaneChoice)
  };
  quint64 tag = 0;
  QString prompt;  // ignored when `chat` has messages
  QVector<Lane> lanes;
  int samples = 1;
  quint64 seed = 0;
  bool crn = true;  // common random numbers across lanes
  int maxTokens = 0;
  // The chat's last turn as the prompt (the Compare view's "Current chat"):
  // the window fills `chat` and `chatFormat` from the chat panel.
  bool fromChat = false;
  QVector<UiChatMessage> chat;  // a chat turn's messages: the lanes are alternative answers
  QString chatFormat;
};

// Teacher-forced scoring of `text`; with `basePath` also KL(base || model).
struct ScoreCommand {
  quint64 tag = 0;
  QString text;
  QString basePath;
};

// Inside the model at one position (docs/inside.md): the token ids of the
// whole sequence the UI knows (a request's prompt + generated tokens, so the
// lens ranks the token that really came next) and the position inspected.
struct InspectCommand {
  quint64 tag = 0;
  QVector<int> tokens;
  int position = 0;
  QString layers;  // "a-b", "a" or "" (every layer)
  int topK = 5;    // lens and final top-k (1 .. 100)
};

// Open a model file. device: "auto" | "cpu" | "cuda"; contextLength 0: from the
// memory budget; kvTypes "K/V" names ("" = the default); bf16Matmuls: the CPU
// backend rounds F32/F16 matrices to BF16 (faster, not exact).
struct LoadCommand {
  QString path;
  QString device = QStringLiteral("auto");
  int contextLength = 0;
  int generation = -1;  // from EngineController::beginLoad(); -1: the current one
  bool bf16Matmuls = false;
  QString kvTypes;
};

}  // namespace gbui
