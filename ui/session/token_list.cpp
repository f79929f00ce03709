#include "token_list.h"

#include <algorithm>
#include <limits>

namespace gbui {

TokenList::Compact TokenList::compact(const UiToken& t) {
  request_ = t.request;
  Compact c;
  c.step = t.step;
  c.textOffset = static_cast<quint32>(text_.size());
  c.textLength = static_cast<quint32>(t.text.size());
  text_ += t.text;
  if (t.piece != t.text) {
    c.pieceLength = static_cast<quint32>(t.piece.size());
    text_ += t.piece;
  }
  c.tokenId = t.tokenId;
  c.position = t.position;
  c.rank = t.rank;
  c.numCandidatesBefore = t.numCandidatesBefore;
  c.prob = t.prob;
  c.probBefore = t.probBefore;
  c.entropyBefore = t.entropyBefore;
  c.entropyAfter = t.entropyAfter;
  c.draw = static_cast<float>(t.draw);
  if (!t.stages.isEmpty() || !t.stageActive.isEmpty()) {
    // Nearly always the last chain again; a list that changed chains more than
    // 65,534 times keeps the names of the first ones only.
    size_t k = chains_.size();
    while (k > 0 && !(chains_[k - 1].first == t.stages && chains_[k - 1].second == t.stageActive)) --k;
    if (k == 0 && chains_.size() < kNoChain) {
      chains_.emplace_back(t.stages, t.stageActive);
      k = chains_.size();
    }
    if (k > 0) c.chain = static_cast<quint16>(k - 1);
  }
  c.origin = static_cast<quint8>(t.origin);
  c.flags = static_cast<quint8>((t.remote ? kRemote : 0) | (t.xtcFired ? kXtcFired : 0) |
                                (t.detailTrimmed ? kDetailTrimmed : 0));
  return c;
}

void TokenList::push_back(const UiToken& token) {
  if (whole_.empty()) wholeBegin_ = compact_.size();
  compact_.push_back(compact(token));
  whole_.push_back(token);
}

void TokenList::pushCompact(const UiToken& token) {
  if (!whole_.empty()) {  // the whole records stay a suffix
    push_back(token);
    return;
  }
  compact_.push_back(compact(token));
  wholeBegin_ = compact_.size();
}

void TokenList::trimTo(size_t index) {
  index = std::min(index, size());
  while (wholeBegin_ < index && !whole_.empty()) {
    if (!whole_.front().top.isEmpty() || !whole_.front().numAfterStage.isEmpty())
      compact_[wholeBegin_].flags |= kDetailTrimmed;
    whole_.pop_front();
    ++wholeBegin_;
  }
  if (whole_.empty()) wholeBegin_ = size();
}

QStringView TokenList::text(size_t i) const {
  const Compact& c = compact_[i];
  return QStringView(text_).mid(c.textOffset, c.textLength);
}

const UiToken* TokenList::whole(size_t i) const {
  return i >= wholeBegin_ && i < size() ? &whole_[i - wholeBegin_] : nullptr;
}

UiToken TokenList::operator[](size_t i) const {
  if (const UiToken* w = whole(i)) return *w;
  const Compact& c = compact_[i];
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  UiToken t;
  t.request = request_;
  t.step = c.step;
  t.draw = static_cast<double>(c.draw);
  t.forwardMs = t.sampleMs = t.tMs = kNaN;
  t.text = text_.mid(c.textOffset, c.textLength);
  t.piece = c.pieceLength == kPieceIsText ? t.text : text_.mid(c.textOffset + c.textLength, c.pieceLength);
  if (c.chain != kNoChain) {
    t.stages = chains_[c.chain].first;
    t.stageActive = chains_[c.chain].second;
  }
  t.position = c.position;
  t.index = static_cast<int>(i);
  t.tokenId = c.tokenId;
  t.origin = c.origin;
  t.numCandidatesBefore = c.numCandidatesBefore;
  t.rank = c.rank;
  t.entropyBefore = c.entropyBefore;
  t.entropyAfter = c.entropyAfter;
  t.prob = c.prob;
  t.probBefore = c.probBefore;
  t.xtcFired = (c.flags & kXtcFired) != 0;
  t.remote = (c.flags & kRemote) != 0;
  t.detailTrimmed = (c.flags & kDetailTrimmed) != 0;
  return t;
}

size_t TokenList::compactBytes() const {
  size_t chains = 0;
  for (const auto& [names, active] : chains_) chains += sizeof(names) + sizeof(active);
  return compact_.size() * sizeof(Compact) + static_cast<size_t>(text_.capacity()) * sizeof(QChar) + chains;
}

void TokenSeq::append(const TokenList& list, size_t begin, size_t end) {
  end = std::min(end, list.size());
  if (begin >= end) return;
  parts_.push_back({&list, begin, end});
  size_ += end - begin;
}

void TokenSeq::truncate(size_t n) {
  while (size_ > n && !parts_.empty()) {
    Part& last = parts_.back();
    const size_t drop = std::min(size_ - n, last.end - last.begin);
    last.end -= drop;
    size_ -= drop;
    if (last.end == last.begin) parts_.pop_back();
  }
}

std::pair<const TokenList*, size_t> TokenSeq::locate(size_t i) const {
  for (const Part& p : parts_) {
    if (i < p.end - p.begin) return {p.list, p.begin + i};
    i -= p.end - p.begin;
  }
  return {nullptr, 0};
}

UiToken TokenSeq::operator[](size_t i) const {
  const auto [list, at] = locate(i);
  return list ? (*list)[at] : UiToken();
}

QStringView TokenSeq::text(size_t i) const {
  const auto [list, at] = locate(i);
  return list ? list->text(at) : QStringView();
}

}  // namespace gbui
