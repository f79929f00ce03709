// SessionModel: the UI-owned picture of one engine session, built only from
// UiEvents (so a live run and a replayed trace give the same state). Requests
// with their prompt and tokens, the KV block map, what KV eviction dropped from
// each request's cache (KvEvictionLog), step statistics, errors, and which
// token is selected. Panels read it and listen to its signals.
//
// Invariants: events are applied in `seq` order exactly once; a KV block's state
// follows the last KV event that named it (owned: refCount > 0; cached:
// refCount == 0 with a prefix hash; otherwise free), so the counts match the
// engine's pool statistics after every step.
// Threads: UI thread only.
#pragma once

#include <QObject>
#include <QSet>
#include <deque>
#include <map>
#include <vector>

#include "kv_eviction_log.h"
#include "token_list.h"
#include "ui_events.h"

namespace gbui {

// Requests restored from a session file or a trace's branch tree (not known to
// the running engine) have this bit in their key, so they never collide with
// the ids of the engine that runs now (ui/branch_tree.h).
inline constexpr RequestKey kRestoredKeyBit = RequestKey{1} << 62;
inline bool isRestoredKey(RequestKey key) { return (key & kRestoredKeyBit) != 0; }

struct RequestInfo {
  RequestKey key = 0;
  std::optional<RequestKey> parent;
  int forkPosition = 0;
  QVector<int> promptIds;
  QString samplerJson;
  bool internal = false;        // the engine's own request (an inspection's prefill): not a branch
  qint64 seed = -1;             // from samplerJson (-1: none given)
  QString error;                // the engine's last error message for this request
  TokenList tokens;             // generated tokens in order
  QVector<int> blockTable;      // KV blocks in position order, from KV events; -1: released by the sliding window
  bool finished = false;
  UiFinished finish;
  double submittedMs = 0.0;
  double admittedMs = -1.0;
  int numPreemptions = 0;
  double savedForkProb = -1.0;  // restored: the probability at the fork as saved (-1 unknown)
  // Speculative decoding: the latest verification (the tokens after it are
  // annotated from it, UiToken::draft) and how many there were. Only the
  // latest is kept, so a long speculative answer holds no per-verification
  // list; the Speculative panel keeps running totals, the trace file each one.
  std::optional<UiSpeculative> lastVerification;
  int numVerifications = 0;
  int numFromLastVerification = 0;  // tokens applied since lastVerification
  // Prompt + generated ids (a fork's prompt already holds the parent's tokens).
  QVector<int> allTokenIds() const;
};

struct KvCell {
  int refCount = 0;
  bool hasHash = false;
  // Unheld since its last holder let it go because it left that request's
  // sliding window (free, or cached if hasHash); cleared when taken again.
  bool windowReleased = false;
  QVector<RequestKey> owners;  // requests whose tables hold the block
  bool owned() const { return refCount > 0; }
  bool cached() const { return refCount == 0 && hasHash; }
};

// The most recent items of a series that grows every step (or every /metrics
// poll), oldest first, at most `capacity` of them: a session that runs for hours
// keeps a bounded window (the trace file keeps every step). `dropped` counts the
// items let go from the front, so item i of the whole series is items[i - dropped].
template <class T>
struct RecentHistory {
  std::deque<T> items;
  qint64 dropped = 0;
  qint64 total() const { return dropped + static_cast<qint64>(items.size()); }
  void push(const T& item, size_t capacity) {
    items.push_back(item);
    for (; items.size() > capacity; ++dropped) items.pop_front();
  }
  void clear() {
    items.clear();
    dropped = 0;
  }
};

struct KvCounts {
  int owned = 0, cached = 0, free = 0, total = 0;
  int windowReleased = 0;  // of the free and cached ones, released by a sliding window
};

class SessionModel : public QObject {
  Q_OBJECT
 public:
  explicit SessionModel(QObject* parent = nullptr);

  void clear();
  void setModelInfo(const UiModelInfo& info);
  const UiModelInfo& modelInfo() const { return info_; }
  bool hasModel() const { return !info_.path.isEmpty(); }
  void setReplay(bool replay) { replay_ = replay; }
  bool isReplay() const { return replay_; }

  void apply(const UiEventBatch& batch);
  // Requests of a saved branch tree (keys with kRestoredKeyBit): shown in the
  // chat and the Branches panel like finished ones; clear() keeps them (they
  // outlive a model load), forgetRestored() drops them. Emits restoredChanged().
  void restoreRequests(const std::vector<RequestInfo>& requests);
  void forgetRestored();
  // Raw probability of a branch's first token at its fork (from the parent's
  // record, or as saved); -1 unknown.
  double forkProbability(RequestKey request) const;

  const std::map<RequestKey, RequestInfo>& requests() const { return requests_; }
  const RequestInfo* request(RequestKey key) const;
  // The token (see TokenList: whole in the detail window, compact before it); nullopt none.
  std::optional<UiToken> token(RequestKey key, int index) const;
  // The last kStepHistory step events (UiStep: 88 bytes each), oldest first;
  // stepHistory().dropped counts the older ones let go.
  static constexpr size_t kStepHistory = 8192;
  const std::deque<UiStep>& steps() const { return steps_.items; }
  const RecentHistory<UiStep>& stepHistory() const { return steps_; }
  // Sum of UiStep::preemptions over steps(), kept as they arrive (panels read it every frame).
  qint64 totalPreemptions() const { return totalPreemptions_; }
  // A remote engine's polled /metrics, in order (empty for a local engine).
  // (the last kStepHistory polls; remoteMetricsHistory().dropped counts the older ones)
  const std::deque<UiRemoteMetrics>& remoteMetrics() const { return remoteMetrics_.items; }
  const RecentHistory<UiRemoteMetrics>& remoteMetricsHistory() const { return remoteMetrics_; }
  bool isRemote() const { return !info_.remoteUrl.isEmpty(); }
  // How many of the most recent tokens are kept whole, with their candidates
  // (UiToken::top, the bulk of a token's memory: 20 candidates x 9 stages are
  // about 4 KB); older ones keep a 64-byte compact record (TokenList; with
  // UiToken::detailTrimmed set where candidates were dropped), so a long
  // session's memory stays flat. Setting "session/detailedTokens", default
  // kDefaultDetailWindow.
  static constexpr int kDefaultDetailWindow = 8192;
  int detailWindow() const { return detailWindow_; }
  void setDetailWindow(int tokens);
  const QVector<KvCell>& kvCells() const { return cells_; }
  KvCounts kvCounts() const;
  // Blocks requests have given back because they left their sliding window
  // (every WindowReleased event of a real block so far).
  int kvWindowReleasedTotal() const { return windowReleasedTotal_; }
  int blockSize() const { return info_.blockSize > 0 ? info_.blockSize : 16; }
  // Slots of `block` holding valid tokens, from its owner's table and token count.
  int filledSlots(int block) const;
  // Token ids stored in `block` (empty when unknown, e.g. cached without owner).
  QVector<int> blockTokens(int block) const;
  QString tokenText(int id) const;

  // KV eviction (UiEviction, UiShadowKl): the log of a request that evicted
  // (or whose shadow reported), nullptr for one that kept everything.
  const KvEvictionLog* evictionLog(RequestKey request) const;
  const std::map<RequestKey, KvEvictionLog>& evictionLogs() const { return evictions_; }
  // Generated token `index` of `request`: its eviction (by its UiToken::position)
  // and the line a hover shows for it ("" when its KV is kept).
  KvEvictedToken tokenEviction(RequestKey request, int index) const;
  QString tokenEvictionText(RequestKey request, int index) const;
  // Grows with every eviction or shadow event applied (views repaint on a change).
  quint64 evictionRevision() const { return evictionRevision_; }

  void selectToken(RequestKey request, int index);
  std::optional<std::pair<RequestKey, int>> selectedToken() const { return selected_; }

 signals:
  void modelChanged();
  void cleared();
  void restoredChanged();
  void batchApplied(const gbui::UiEventBatch& batch);
  void tokenSelected(quint64 request, int index);
  void errorReported(const QString& message);

 private:
  void applyOne(const UiEvent& e);
  void applyKv(const UiKv& kv);
  void annotateDraft(RequestInfo& r, UiToken& t) const;
  void trimDetails();
  KvCell& cell(int block);

  UiModelInfo info_;
  bool replay_ = false;
  std::map<RequestKey, RequestInfo> requests_;
  RecentHistory<UiStep> steps_;
  qint64 totalPreemptions_ = 0;
  RecentHistory<UiRemoteMetrics> remoteMetrics_;
  // Tokens still kept whole, oldest first (request, index).
  std::deque<std::pair<RequestKey, int>> detailed_;
  int detailWindow_ = kDefaultDetailWindow;
  QStringList lastStages_;  // the stage names of the last token, shared by the next ones
  QVector<bool> lastStageActive_;  // likewise its active stages
  QVector<KvCell> cells_;        // (numBlocks) index = block id
  int windowReleasedTotal_ = 0;
  std::map<int, RequestKey> lastWriter_;  // block -> request that filled it
  std::map<RequestKey, KvEvictionLog> evictions_;
  quint64 evictionRevision_ = 0;
  std::optional<std::pair<RequestKey, int>> selected_;
};

}  // namespace gbui
