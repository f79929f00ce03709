// UI-side copies of the engine's trace events: plain values with Qt strings,
// produced by EngineController (the one class that sees engine headers) and
// consumed by SessionModel and the panels, which never include engine headers.
// One UiEvent per TraceEvent, same order, same `seq`, so a replayed trace and a
// live run feed the panels identically.
// Threads: plain values; created on the engine thread, read on the UI thread.
#pragma once

#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVector>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

namespace gbui {

using RequestKey = quint64;  // gb::RequestId::value

struct UiCandidate {
  int id = 0;
  QString text;               // decoded bytes of the token
  float logit = 0.0f;
  float probBefore = 0.0f;    // raw softmax, temperature 1
  QVector<float> probAfter;   // (numStages) after each stage
  int removedByStage = -1;    // index into UiToken::stages, -1 survived
};

// Same numbering as gb::TokenOrigin.
enum class UiTokenOrigin { Plain, Accepted, Resampled, Bonus, Forced };

// Where a speculative token came from (origin Accepted / Resampled / Bonus):
// filled by SessionModel from the verification's UiSpeculative, so replay
// shows the same. Held by pointer, so that the plain tokens -- nearly all of a
// long chat -- carry 8 bytes for it instead of the fields.
struct UiDraftInfo {
  QString drafter;            // "ngram", "draft", "self"
  int position = -1;          // index in the draft (accepted: its slot; resampled: the rejected slot)
  int numDrafted = 0;         // draft length of that verification
  float q = 0.0f, p = 0.0f;   // q and p of the drafted token at `position`
  int rejectedId = -1;        // resampled: the drafted token the target rejected
  QString rejectedText;
};

// What the grammar stage did to one token (a request with a format).
struct UiGrammarInfo {
  float massAllowed = 0.0f;  // raw probability mass of the tokens the format allowed
  int numAllowed = 0;        // tokens the format allowed
  bool forced = false;       // only one text was allowed (the same bytes in every allowed token)
  QString state;             // the grammar's position before the token
};

// A mixture of experts' routing of the step that chose a token: per layer, the
// experts (best first) and their weights, perToken of each.
struct UiRouting {
  int perToken = 0;
  QVector<int> experts;    // (layers x perToken)
  QVector<float> weights;  // the same shape
  int numLayers() const { return perToken > 0 ? static_cast<int>(experts.size()) / perToken : 0; }
};

// One generated token. Fields are ordered by size (8-byte ones first), so the
// record has no padding holes: a 100,000-token chat keeps 100,000 of them.
struct UiToken {
  RequestKey request = 0;
  qint64 step = 0;
  double draw = 0.0;
  double forwardMs = 0.0, sampleMs = 0.0;
  double tMs = 0.0;           // event time since engine start
  QString text;               // text this token made available (may be empty)
  QString piece;              // the token's own bytes, for tooltips (shared with the vocabulary)
  QStringList stages;         // (numStages) names in run order (shared along a sampler chain)
  QVector<bool> stageActive;  // (numStages) (shared along a sampler chain)
  // (numStages) candidates left after each stage; emptied with `top` once the
  // token leaves SessionModel's detail window (detailTrimmed).
  QVector<int> numAfterStage;
  QVector<UiCandidate> top;
  std::shared_ptr<const UiDraftInfo> draft;  // null: not from a verification
  std::shared_ptr<const UiGrammarInfo> grammar;  // null: the request has no format
  std::shared_ptr<const UiRouting> routing;      // null: not a mixture of experts (or trimmed)
  int position = 0;
  int index = 0;              // 0 = first generated token
  int tokenId = 0;
  int origin = 0;             // gb::TokenOrigin (UiTokenOrigin)
  int numCandidatesBefore = 0;
  int rank = -1;
  float entropyBefore = 0.0f, entropyAfter = 0.0f;
  float prob = 0.0f;          // final distribution
  float probBefore = 0.0f;    // raw softmax
  bool xtcFired = false;
  // From a remote engine's API (a server's streamed logprobs): text, piece,
  // probBefore (exp of the server's logprob, NaN when it sent none), rank among
  // the alternatives (top.size() when not among them) and the alternatives
  // (probBefore only) are what it reported. tokenId and candidate ids are
  // local numbers for the token strings, not the model's ids; stages, prob,
  // logits, entropies and the draw are not available (NaN / empty).
  bool remote = false;
  // SessionModel keeps the candidates (`top`) and per-stage counts of its most
  // recent tokens only (SessionModel::detailWindow()); older tokens have them
  // dropped and this set. The trace file still holds them.
  bool detailTrimmed = false;
};

// One verification of a drafted run (gb::SpeculativeEvent). It precedes the
// UiToken events it produced (same request and step).
struct UiSpeculative {
  RequestKey request = 0;
  qint64 step = 0;
  QString drafter;
  QVector<int> drafted;       // (k) proposed tokens
  QVector<float> q, p;        // (<= k) drafter / target probability of each examined drafted token
  int numAccepted = 0;
  int rejected = -1;          // first rejected drafted token, -1 none
  int next = 0;               // resampled or bonus token
  bool bonus = false;
  double draftMs = 0.0, verifyMs = 0.0;
};

// KV eviction dropped tokens from a request's cache (gb::KvEvictionEvent; the
// global layers' cache: a window group keeps its window by position).
struct UiEviction {
  RequestKey request = 0;
  qint64 step = 0;
  QString policy;               // "h2o B=512 S=0 R=256"
  QString reason;               // why these went
  QVector<int> positions;       // evicted in this step
  QVector<float> mass;          // their attention mass (empty for sink)
  int numKept = 0;              // positions held after the step
  QVector<int> keptPositions;   // a snapshot (first event, then every 8th), else empty
  QVector<float> keptMass;
};

// The full-cache shadow's verdict on one token of an evicting request
// (gb::KvShadowEvent): what the eviction cost at that position.
struct UiShadowKl {
  RequestKey request = 0;
  RequestKey shadow = 0;
  qint64 step = 0;
  int position = 0;
  int index = 0;
  double kl = 0.0;
  bool top1Agree = true;
  double logprobPruned = 0.0, logprobFull = 0.0;
};

struct UiSubmitted {
  RequestKey request = 0;
  std::optional<RequestKey> parent;
  int forkPosition = 0;
  QVector<int> promptIds;
  int maxTokens = 0;
  QString samplerJson;
  std::optional<QString> purpose;  // "inspect": the engine's own request for an inspection
};
struct UiAdmitted { RequestKey request = 0; int numCachedTokens = 0; double queueMs = 0.0; };
struct UiPrefill { RequestKey request = 0; qint64 step = 0; int start = 0; int numTokens = 0; };
struct UiPreempted { RequestKey request = 0; qint64 step = 0; };
struct UiFinished {
  RequestKey request = 0;
  QString reason, text;
  int numPromptTokens = 0, numGenerated = 0, numCachedTokens = 0;
  double ttftMs = 0.0, tpotMs = 0.0, e2eMs = 0.0;
};
struct UiStep {
  qint64 step = 0;
  double startMs = 0.0, scheduleMs = 0.0, forwardMs = 0.0, sampleMs = 0.0;
  int numSeqs = 0, numPrefill = 0, numDecode = 0, numRunning = 0, numWaiting = 0;
  int owned = 0, free = 0, cached = 0, total = 0, prefixHitTokens = 0, preemptions = 0;
  int windowOwned = -1, windowCached = -1, windowTotal = -1;  // the window group's pool; -1: none
};
// Same numbering as gb::KvEventKind.
enum class UiKvKind { Allocated, Evicted, Cached, PrefixHit, Shared, Copied, Released, Freed, Uncached, WindowReleased, Lookahead };
struct UiKv {
  qint64 step = 0;
  UiKvKind kind = UiKvKind::Allocated;
  int block = -1;
  std::optional<RequestKey> request;
  int otherBlock = -1;
  int refCount = 0;
};
struct UiError { std::optional<RequestKey> request; QString message; };
// A remote engine's /metrics, polled (server/remote_metrics.h); NaN = the
// server does not export it.
struct UiRemoteMetrics {
  QString flavour;  // "glassbox" | "llama.cpp" | "vllm"
  double numRunning = 0, numWaiting = 0, kvUsage = 0;  // kvUsage 0..1
  double kvBlocksTotal = 0, kvBlocksUsed = 0, kvBlocksCached = 0;
  double prefixQueries = 0, prefixHits = 0, promptTokens = 0, generationTokens = 0, preemptions = 0;
};

using UiEventBody = std::variant<UiSubmitted, UiAdmitted, UiPrefill, UiToken, UiPreempted, UiFinished, UiStep, UiKv,
                                 UiSpeculative, UiError, UiRemoteMetrics, UiEviction, UiShadowKl>;
struct UiEvent {
  quint64 seq = 0;
  qint64 tUs = 0;
  UiEventBody body;
};
using UiEventBatch = std::shared_ptr<const std::vector<UiEvent>>;

// What the model info panel shows; filled once when a model loads (or a trace opens).
struct UiModelInfo {
  QString path, name, format, architecture, chatTemplate, tokenizerKind;
  QVector<QPair<QString, QString>> shapes;    // (label, value)
  QVector<QPair<QString, QString>> metadata;
  QVector<QPair<QString, QString>> tensorTypes;  // (weight type, "N tensors, bytes, bpw"), then ("total", "Q4_K_M, 4.9 bpw")
  quint64 numParameters = 0;
  quint64 activeParameters = 0;  // per token: a mixture's chosen experts only (numParameters when dense)
  int numExperts = 0, numExpertsUsed = 0;
  quint64 weightBytes = 0;
  int contextLength = 0, vocabSize = 0, numLayers = 0, numKvHeads = 0, headDim = 0;
  quint64 kvBytesPerTokenFormula = 0;  // the main pool's layers x (K row + V row) in their KV types (gb::kv_bytes_per_token)
  int kvMainLayers = 0;                // layers in the main pool (all of them without a window group)
  // The window group (kvWindowBlocks 0: none): the sliding layers keep only
  // their window, in a pool of their own (gb::KvPlan).
  int kvWindow = 0, kvWindowLayers = 0, kvWindowBlocks = 0;
  quint64 kvWindowBytesPerToken = 0, kvWindowPoolBytes = 0;
  QString kvTypeK = QStringLiteral("f32"), kvTypeV = QStringLiteral("f32");  // KV types (replay: f32 unless the header says)
  quint64 kvRowBytesK = 0, kvRowBytesV = 0;  // one layer's K / V row of a token
  quint64 kvBudgetBytes = 0;    // what the memory budget left for KV (0: not known)
  quint64 kvResidentBytes = 0;  // of the pool, in memory when the model loaded (grows as blocks are written)
  QString kvPlanNote;           // the budget lowered the context or the pool (gb::KvPlan::note)
  quint64 kvPoolBytes = 0;             // measured: Backend::kv_pool_bytes(), scratch blocks included
  int numBlocks = 0, blockSize = 0;   // the whole pool, the lookahead reserve included
  int numScratchBlocks = 0;            // of numBlocks, the lookahead reserve for self-draft scratch
  QString deviceBackend, deviceName;
  QString remoteUrl;  // set when the engine is a remote server (connectRemote)
  quint64 deviceMemoryUsed = 0, deviceMemoryTotal = 0;
  int numThreads = 0;
  bool bf16Matmuls = false;  // float matrices rounded to BF16 at load (CpuBackendOptions::bf16_matmuls)
  int bosId = -1, eosId = -1;
  QVector<QString> vocab;  // decoded text per token id (hover text, replay)
  QString branchTreeJson;  // replay: the trace header's "branches" (ui/branch_tree.h), "" none

  // Measured bytes per token: the backend's pool bytes over every slot it
  // allocated (requests' blocks and the self-draft scratch reserve); 0
  // when unknown (replay). Equals kvBytesPerTokenFormula for an F32 cache.
  quint64 kvBytesPerTokenMeasured() const {
    const quint64 numSlots = quint64(std::max(0, numBlocks)) * quint64(std::max(0, blockSize));
    return numSlots > 0 && kvPoolBytes >= kvWindowPoolBytes ? (kvPoolBytes - kvWindowPoolBytes) / numSlots : 0;
  }
};

}  // namespace gbui

Q_DECLARE_METATYPE(gbui::UiEventBatch)
Q_DECLARE_METATYPE(gbui::UiModelInfo)
