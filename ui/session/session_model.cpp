#include "session_model.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QSettings>
#include <algorithm>

#include "json_number.h"

namespace gbui {

QVector<int> RequestInfo::allTokenIds() const {
  QVector<int> ids = promptIds;
  ids.reserve(promptIds.size() + static_cast<qsizetype>(tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) ids.push_back(tokens.tokenId(i));
  return ids;
}

SessionModel::SessionModel(QObject* parent) : QObject(parent) {
  const QVariant window = QSettings().value(QStringLiteral("session/detailedTokens"));
  if (window.isValid() && window.toInt() >= 0) detailWindow_ = window.toInt();
}

void SessionModel::clear() {
  std::erase_if(requests_, [](const auto& entry) { return !isRestoredKey(entry.first); });
  for (auto& [key, r] : requests_) r.blockTable.clear();
  steps_.clear();
  totalPreemptions_ = 0;
  remoteMetrics_.clear();
  detailed_.clear();
  cells_ = QVector<KvCell>(std::max(0, info_.numBlocks));
  windowReleasedTotal_ = 0;
  lastWriter_.clear();
  evictions_.clear();
  ++evictionRevision_;
  selected_.reset();
  emit cleared();
}

void SessionModel::setModelInfo(const UiModelInfo& info) {
  info_ = info;
  clear();
  emit modelChanged();
}

void SessionModel::restoreRequests(const std::vector<RequestInfo>& requests) {
  for (const RequestInfo& r : requests)
    if (isRestoredKey(r.key)) requests_[r.key] = r;
  emit restoredChanged();
}

void SessionModel::forgetRestored() {
  if (std::erase_if(requests_, [](const auto& entry) { return isRestoredKey(entry.first); }) > 0) emit restoredChanged();
}

double SessionModel::forkProbability(RequestKey request) const {
  const RequestInfo* r = this->request(request);
  if (!r || !r->parent) return -1.0;
  if (r->savedForkProb >= 0.0) return r->savedForkProb;
  const RequestInfo* p = this->request(*r->parent);
  if (!p || r->tokens.empty() || r->promptIds.size() != r->forkPosition) return -1.0;
  // The child's first token sits at position forkPosition; the parent sampled
  // its own token there (index = position - parent's prompt length).
  const int index = r->forkPosition - static_cast<int>(p->promptIds.size());
  if (index < 0 || index >= static_cast<int>(p->tokens.size())) return -1.0;
  const UiToken* parentToken = p->tokens.whole(static_cast<size_t>(index));
  if (!parentToken) return -1.0;  // its candidates left the detail window
  for (const UiCandidate& c : parentToken->top)
    if (c.id == r->tokens.tokenId(0)) return c.probBefore;
  return -1.0;
}

const RequestInfo* SessionModel::request(RequestKey key) const {
  auto it = requests_.find(key);
  return it == requests_.end() ? nullptr : &it->second;
}

std::optional<UiToken> SessionModel::token(RequestKey key, int index) const {
  const RequestInfo* r = request(key);
  if (!r || index < 0 || index >= static_cast<int>(r->tokens.size())) return std::nullopt;
  return r->tokens[static_cast<size_t>(index)];
}

QString SessionModel::tokenText(int id) const {
  if (id >= 0 && id < info_.vocab.size()) return info_.vocab[id];
  return QStringLiteral("#%1").arg(id);
}

const KvEvictionLog* SessionModel::evictionLog(RequestKey request) const {
  const auto it = evictions_.find(request);
  return it == evictions_.end() ? nullptr : &it->second;
}

KvEvictedToken SessionModel::tokenEviction(RequestKey request, int index) const {
  const KvEvictionLog* log = evictionLog(request);
  const RequestInfo* r = log ? this->request(request) : nullptr;
  if (!r || index < 0 || static_cast<size_t>(index) >= r->tokens.size()) return {};
  return log->at(r->tokens.position(static_cast<size_t>(index)));
}

QString SessionModel::tokenEvictionText(RequestKey request, int index) const {
  const KvEvictionLog* log = evictionLog(request);
  const RequestInfo* r = log ? this->request(request) : nullptr;
  if (!r || index < 0 || static_cast<size_t>(index) >= r->tokens.size()) return {};
  return log->describe(r->tokens.position(static_cast<size_t>(index)));
}

void SessionModel::selectToken(RequestKey request, int index) {
  selected_ = std::make_pair(request, index);
  emit tokenSelected(request, index);
}

void SessionModel::apply(const UiEventBatch& batch) {
  if (!batch || batch->empty()) return;
  for (const UiEvent& e : *batch) applyOne(e);
  trimDetails();
  emit batchApplied(batch);
}

void SessionModel::setDetailWindow(int tokens) {
  detailWindow_ = std::max(0, tokens);
  trimDetails();
}

void SessionModel::trimDetails() {
  while (static_cast<int>(detailed_.size()) > detailWindow_) {
    const auto [key, index] = detailed_.front();
    detailed_.pop_front();
    auto it = requests_.find(key);
    if (it == requests_.end()) continue;
    // Frees the whole record and its candidates (unless a panel still shares them).
    it->second.tokens.trimTo(static_cast<size_t>(index) + 1);
  }
}

KvCell& SessionModel::cell(int block) {
  if (block >= cells_.size()) cells_.resize(block + 1);
  return cells_[block];
}

void SessionModel::applyOne(const UiEvent& e) {
  const double tMs = static_cast<double>(e.tUs) / 1000.0;
  std::visit(
      [&](const auto& b) {
        using B = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<B, UiSubmitted>) {
          RequestInfo& r = requests_[b.request];
          r.key = b.request;
          r.parent = b.parent;
          r.forkPosition = b.forkPosition;
          r.promptIds = b.promptIds;
          r.samplerJson = b.samplerJson;
          r.internal = b.purpose.has_value();
          const QJsonValue seed = QJsonDocument::fromJson(b.samplerJson.toUtf8()).object().value("seed");
          r.seed = jsonWholeNumber(seed, 0, kJsonMaxExactInteger).value_or(-1);
          r.submittedMs = tMs;
        } else if constexpr (std::is_same_v<B, UiAdmitted>) {
          requests_[b.request].admittedMs = tMs;
        } else if constexpr (std::is_same_v<B, UiToken>) {
          RequestInfo& r = requests_[b.request];
          UiToken t = b;
          // Every token of a chain names the same stages: share one list.
          if (t.stages == lastStages_) t.stages = lastStages_;
          else lastStages_ = t.stages;
          // And nearly every one the same active stages (a small allocation per token otherwise).
          if (t.stageActive == lastStageActive_) t.stageActive = lastStageActive_;
          else lastStageActive_ = t.stageActive;
          annotateDraft(r, t);
          r.tokens.push_back(t);
          detailed_.emplace_back(b.request, static_cast<int>(r.tokens.size()) - 1);
        } else if constexpr (std::is_same_v<B, UiSpeculative>) {
          RequestInfo& r = requests_[b.request];
          r.lastVerification = b;
          ++r.numVerifications;
          r.numFromLastVerification = 0;
        } else if constexpr (std::is_same_v<B, UiPreempted>) {
          ++requests_[b.request].numPreemptions;
        } else if constexpr (std::is_same_v<B, UiFinished>) {
          RequestInfo& r = requests_[b.request];
          r.finished = true;
          r.finish = b;
        } else if constexpr (std::is_same_v<B, UiStep>) {
          steps_.push(b, kStepHistory);
          totalPreemptions_ += b.preemptions;
          if (b.total > cells_.size()) cells_.resize(b.total);
        } else if constexpr (std::is_same_v<B, UiRemoteMetrics>) {
          remoteMetrics_.push(b, kStepHistory);
        } else if constexpr (std::is_same_v<B, UiKv>) {
          applyKv(b);
        } else if constexpr (std::is_same_v<B, UiEviction> || std::is_same_v<B, UiShadowKl>) {
          evictions_[b.request].apply(b);
          ++evictionRevision_;
        } else if constexpr (std::is_same_v<B, UiError>) {
          if (b.request)
            if (auto it = requests_.find(*b.request); it != requests_.end()) it->second.error = b.message;
          emit errorReported(b.message);
        }
      },
      e.body);
}

// A verification's tokens follow its UiSpeculative (same request, same step):
// accepted drafts d_1..d_m in order, then the resampled or bonus token.
void SessionModel::annotateDraft(RequestInfo& r, UiToken& t) const {
  const auto origin = static_cast<UiTokenOrigin>(t.origin);
  if (origin != UiTokenOrigin::Accepted && origin != UiTokenOrigin::Resampled && origin != UiTokenOrigin::Bonus) return;
  if (!r.lastVerification || r.lastVerification->step != t.step) return;
  const UiSpeculative& v = *r.lastVerification;
  const int slot = r.numFromLastVerification++;
  auto d = std::make_shared<UiDraftInfo>();
  d->drafter = v.drafter;
  d->numDrafted = static_cast<int>(v.drafted.size());
  d->position = origin == UiTokenOrigin::Bonus ? d->numDrafted : slot;
  if (slot < v.q.size()) d->q = v.q[slot];
  if (slot < v.p.size()) d->p = v.p[slot];
  if (origin == UiTokenOrigin::Resampled && v.rejected >= 0) {
    d->rejectedId = v.rejected;
    d->rejectedText = tokenText(v.rejected);
  }
  t.draft = std::move(d);
}

// Block tables are rebuilt from the pool's events: a request gains blocks in
// position order (prefix hits and shared fork blocks first, then allocations),
// swaps a block on copy-on-write, and loses blocks when it releases them.
void SessionModel::applyKv(const UiKv& kv) {
  if (kv.block < 0) {
    // A fork child's table slot that starts out released (its parent's block
    // had already left the window): keeps the child's positions right.
    if (kv.kind == UiKvKind::WindowReleased && kv.request) requests_[*kv.request].blockTable.push_back(-1);
    return;
  }
  KvCell& c = cell(kv.block);
  c.refCount = kv.refCount;
  // Taken again (or evicted): no longer a block the window gave back.
  if (kv.kind == UiKvKind::Allocated || kv.kind == UiKvKind::PrefixHit || kv.kind == UiKvKind::Shared ||
      kv.kind == UiKvKind::Copied || kv.kind == UiKvKind::Evicted || kv.kind == UiKvKind::Released)
    c.windowReleased = false;
  auto addOwner = [&](RequestKey key) {
    if (!c.owners.contains(key)) c.owners.push_back(key);
    requests_[key].blockTable.push_back(kv.block);
  };
  switch (kv.kind) {
    case UiKvKind::Allocated:
      if (kv.request) {
        addOwner(*kv.request);
        lastWriter_[kv.block] = *kv.request;
      }
      c.hasHash = false;
      break;
    case UiKvKind::PrefixHit:
    case UiKvKind::Shared:
      if (kv.request) addOwner(*kv.request);
      break;
    case UiKvKind::Lookahead:
      // Self-draft scratch: held by the request, but no position of its table.
      if (kv.request && !c.owners.contains(*kv.request)) c.owners.push_back(*kv.request);
      c.hasHash = false;
      break;
    case UiKvKind::Copied:
      if (kv.request) {
        RequestInfo& r = requests_[*kv.request];
        // The copy's destination was usually announced as Allocated already:
        // it replaces the source in place, and is never listed twice.
        const qsizetype at = r.blockTable.indexOf(kv.otherBlock);
        const bool listed = r.blockTable.contains(kv.block);
        if (at >= 0 && !listed) r.blockTable[at] = kv.block;
        else if (at >= 0) r.blockTable.removeAt(at);
        else if (!listed) r.blockTable.push_back(kv.block);
        if (!c.owners.contains(*kv.request)) c.owners.push_back(*kv.request);
        lastWriter_[kv.block] = *kv.request;
        if (kv.otherBlock >= 0 && kv.otherBlock < cells_.size()) cells_[kv.otherBlock].owners.removeAll(*kv.request);
      }
      break;
    case UiKvKind::Released:
      if (kv.request) {
        c.owners.removeAll(*kv.request);
        QVector<int>& table = requests_[*kv.request].blockTable;
        table.removeAll(kv.block);
        // Only released slots left: the request holds nothing any more.
        if (std::all_of(table.begin(), table.end(), [](int b) { return b < 0; })) table.clear();
      }
      break;
    case UiKvKind::WindowReleased:
      ++windowReleasedTotal_;
      if (kv.request) {
        c.owners.removeAll(*kv.request);
        // The slot stays in the table (as -1) so later blocks keep their positions.
        QVector<int>& table = requests_[*kv.request].blockTable;
        if (const qsizetype at = table.indexOf(kv.block); at >= 0) table[at] = -1;
      }
      c.windowReleased = kv.refCount == 0;
      break;
    case UiKvKind::Freed:
      c.owners.clear();
      break;
    case UiKvKind::Cached:
      c.hasHash = true;
      break;
    case UiKvKind::Evicted:
    case UiKvKind::Uncached:
      c.hasHash = false;
      break;
  }
}

KvCounts SessionModel::kvCounts() const {
  KvCounts k;
  k.total = static_cast<int>(cells_.size());
  for (const KvCell& c : cells_) {
    if (c.owned()) ++k.owned;
    else if (c.cached()) ++k.cached;
    else ++k.free;
    if (!c.owned() && c.windowReleased) ++k.windowReleased;
  }
  return k;
}

int SessionModel::filledSlots(int block) const {
  if (block < 0 || block >= cells_.size()) return 0;
  const KvCell& c = cells_[block];
  if (!c.owned() && !c.cached()) return 0;
  if (c.cached()) return blockSize();  // only full blocks are committed
  // Counted without copying token lists: this runs for every cell on every paint.
  for (RequestKey key : c.owners) {
    const RequestInfo* r = request(key);
    if (!r) continue;
    const qsizetype at = r->blockTable.indexOf(block);
    if (at < 0) continue;
    const int computed = static_cast<int>(r->promptIds.size() + r->tokens.size()) - (r->tokens.empty() ? 0 : 1);
    return std::clamp(computed - static_cast<int>(at) * blockSize(), 0, blockSize());
  }
  return 0;
}

QVector<int> SessionModel::blockTokens(int block) const {
  auto writer = lastWriter_.find(block);
  std::vector<RequestKey> candidates;
  if (block >= 0 && block < cells_.size())
    candidates.assign(cells_[block].owners.begin(), cells_[block].owners.end());
  if (writer != lastWriter_.end()) candidates.push_back(writer->second);
  for (RequestKey key : candidates) {
    const RequestInfo* r = request(key);
    if (!r) continue;
    const qsizetype at = r->blockTable.indexOf(block);
    if (at < 0) continue;
    // K/V exists for every token except the newest sampled one (not yet run).
    const QVector<int> ids = r->allTokenIds();
    const int computed = static_cast<int>(ids.size()) - (r->tokens.empty() ? 0 : 1);
    const int begin = static_cast<int>(at) * blockSize();
    const int end = std::min(computed, begin + blockSize());
    return end > begin ? ids.mid(begin, end - begin) : QVector<int>{};
  }
  return {};
}

}  // namespace gbui
