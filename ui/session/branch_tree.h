// The saved form of the chat's branch tree: every request that answered a turn
// of the conversation (every path, every branch) and their fork ancestors, with
// parent, fork position, the token the branch starts with and its probability
// at the fork, prompt and generated tokens (ids, texts, raw probabilities),
// text, seed, finish reason and whether it is on screen; plus the conversation
// itself. The same JSON goes into the session file ("branch_tree" nodes beside
// "conversation") and into exported traces (header "branches"); the schema is in
// docs/trace-format.md and engine/trace/trace_schema.cpp.
//
// Ids in the file: a live request keeps its engine id (so a trace's nodes match
// its events); a restored one (kRestoredKeyBit) is renumbered above them. When
// read back, `keyFor` maps a file id to the key it gets now (a restored key, or
// the id of a replayed request).
// Threads: UI thread (plain functions of UI values).
#pragma once

#include <QJsonObject>
#include <functional>
#include <vector>

#include "conversation.h"
#include "session_model.h"

namespace gbui {

// {"nodes": [...], "conversation": {...}}
QJsonObject branchTreeToJson(const Conversation& conversation, const SessionModel& model);

struct RestoredTree {
  Conversation conversation;
  std::vector<RequestInfo> requests;  // keyed by keyFor(file id)
};
// Reads what branchTreeToJson wrote; a missing or malformed node list gives no
// requests (an old session file: the conversation alone).
RestoredTree branchTreeFromJson(const QJsonObject& tree, const std::function<RequestKey(quint64)>& keyFor);

// The key a request saved under `fileId` gets when nothing else claims it.
inline RequestKey restoredKey(quint64 fileId) { return fileId | kRestoredKeyBit; }

}  // namespace gbui
