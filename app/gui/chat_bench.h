// The chat benchmark (`glassbox --bench-chat N`): a synthetic stream of N
// tokens, shaped like real records (20 candidates over 9 sampler stages),
// delivered as one event batch per 60 Hz frame through the signal live events
// take (EngineController::eventsReady), into a full window (chat, inspector,
// KV, charts). It reports the frame time (apply + repaint; wall and this
// thread's CPU time) p50/p99 over the last 3,000 tokens and the process's
// resident memory at 10%, 50% and 100% of the stream as JSON.
// Frame times are measured, never asserted (docs/performance.md).
// Threads: UI thread.
#pragma once

#include <QJsonObject>

#include "session/ui_events.h"

namespace gbui {

class MainWindow;

// A token event like the engine's: `paragraphEvery` > 0 ends every that many
// tokens with a newline; 0 keeps the whole answer one paragraph.
UiToken syntheticToken(RequestKey request, int index, double tMs, int paragraphEvery);

struct ChatBenchOptions {
  int tokens = 100000;
  int tokensPerFrame = 34;  // 2,040 tokens/s at 60 frames/s
  int paragraphEvery = 0;   // one paragraph: the layout's worst case
};

QJsonObject runChatBench(MainWindow& window, const ChatBenchOptions& options);

// The long-conversation benchmark (`glassbox --bench-chat-turns N`, code
// review U4): a chat panel (its own window, no engine) gets N exchanges, each
// a sent message and a synthetic answer of `answerTokens` tokens (a paragraph
// every 30) streamed in frame-sized batches. Reported as JSON: the time of a
// submit (send, the request id arriving, the first batch: what redraws the
// chat) and of a whole exchange, median of the 10 exchanges before 10%, 50%
// and 100% of N; at the end, one branch switch and one full redraw.
QJsonObject runChatTurnsBench(int turns, int answerTokens);

}  // namespace gbui
