// TokenList: one request's generated tokens, as SessionModel keeps them.
//
// A token arrives whole (UiToken: 256 bytes, its strings, about 4 KB of
// candidates). Every token also gets a compact record at once (64 bytes: the
// scalar fields, its text and piece as a range of one buffer the list owns, its
// sampler chain as an index into the list's distinct chains). The whole records
// are kept for the newest tokens only -- a suffix of the list, since tokens
// leave SessionModel's detail window in the order they came -- and trimTo()
// drops them, so a token past the window costs its compact record and its
// characters, and a 100,000-token chat stays about flat in memory
// (docs/performance.md, "Long chats").
//
// Reading a token gives a UiToken by value: the whole record while it is kept,
// else one rebuilt from the compact record, which lacks what the whole one
// carried besides the scalars: the candidates and per-stage counts (`top`,
// `numAfterStage`; detailTrimmed is set when there were any), the speculative
// annotation (`draft`; `origin` stays), and the per-token times (`tMs`,
// `forwardMs`, `sampleMs` are NaN). The trace file keeps all of it.
// Hot loops read single fields (tokenId(), text(), probBefore()) without
// rebuilding a record.
// Threads: UI thread (a plain value).
#pragma once

#include <QString>
#include <QStringList>
#include <QStringView>
#include <QVector>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <utility>
#include <vector>

#include "ui_events.h"

namespace gbui {

// Iterates a container whose operator[] gives UiToken by value (TokenList, TokenSeq).
template <class C>
class IndexIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = UiToken;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = UiToken;
  IndexIterator() = default;
  IndexIterator(const C* c, size_t i) : c_(c), i_(i) {}
  UiToken operator*() const { return (*c_)[i_]; }
  IndexIterator& operator++() {
    ++i_;
    return *this;
  }
  IndexIterator operator++(int) {
    IndexIterator old = *this;
    ++i_;
    return old;
  }
  bool operator==(const IndexIterator& o) const { return i_ == o.i_; }
  bool operator!=(const IndexIterator& o) const { return i_ != o.i_; }

 private:
  const C* c_ = nullptr;
  size_t i_ = 0;
};

class TokenList {
 public:
  using size_type = size_t;
  using value_type = UiToken;

  size_t size() const { return compact_.size(); }
  bool empty() const { return compact_.empty(); }
  // The token at `i` (0 = first generated): the whole record while it is kept,
  // else rebuilt from the compact one (see above).
  UiToken operator[](size_t i) const;
  UiToken front() const { return (*this)[0]; }
  UiToken back() const { return (*this)[size() - 1]; }
  // Single fields, any token, no record rebuilt. text() is valid until the next push.
  int tokenId(size_t i) const { return compact_[i].tokenId; }
  int position(size_t i) const { return compact_[i].position; }  // UiToken::position (prompt counted)
  float probBefore(size_t i) const { return compact_[i].probBefore; }
  QStringView text(size_t i) const;
  // The whole record while it is kept (i >= firstWhole()), else nullptr.
  const UiToken* whole(size_t i) const;
  size_t firstWhole() const { return wholeBegin_; }

  // Appends a token, kept whole until trimTo() passes it.
  void push_back(const UiToken& token);
  // Appends a token with its compact record only (a restored session's tokens,
  // which have nothing more to keep); kept whole after a whole one.
  void pushCompact(const UiToken& token);
  // Tokens before `index` keep their compact record only.
  void trimTo(size_t index);

  // Bytes this list holds for its compact records, text and chains (the whole
  // records and what they share not counted): tests and the memory benchmark.
  size_t compactBytes() const;

  using const_iterator = IndexIterator<TokenList>;
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

 private:
  static constexpr quint32 kPieceIsText = 0xffffffffu;
  static constexpr quint16 kNoChain = 0xffff;
  enum Flags : quint8 { kRemote = 1, kXtcFired = 2, kDetailTrimmed = 4 };
  // 64 bytes: what a token keeps once its whole record is gone.
  struct Compact {
    qint64 step = 0;
    quint32 textOffset = 0, textLength = 0;  // in text_
    quint32 pieceLength = kPieceIsText;      // the piece follows the text in text_ (kPieceIsText: it equals the text)
    qint32 tokenId = 0, position = 0, rank = -1, numCandidatesBefore = 0;
    float prob = 0, probBefore = 0, entropyBefore = 0, entropyAfter = 0, draw = 0;
    quint16 chain = kNoChain;  // index into chains_
    quint8 origin = 0, flags = 0;
  };
  static_assert(sizeof(Compact) == 64, "the compact token record is 64 bytes");

  Compact compact(const UiToken& t);

  RequestKey request_ = 0;
  std::deque<Compact> compact_;   // (size()) every token
  std::deque<UiToken> whole_;     // tokens [wholeBegin_, size())
  size_t wholeBegin_ = 0;
  QString text_;                  // each token's text, then its piece where that differs
  // The distinct sampler chains (stage names, which are active) of the list's
  // tokens: nearly always one.
  std::vector<std::pair<QStringList, QVector<bool>>> chains_;
};

// A run of tokens drawn from several lists by range: a branch's ancestry up to
// its fork, then its own (ChatPanel::displayedTokens). Refers to the lists: valid
// while they are unchanged.
class TokenSeq {
 public:
  void append(const TokenList& list, size_t begin, size_t end);
  void truncate(size_t n);  // keeps the first n tokens
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  UiToken operator[](size_t i) const;
  QStringView text(size_t i) const;
  using const_iterator = IndexIterator<TokenSeq>;
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

 private:
  struct Part {
    const TokenList* list;
    size_t begin, end;
  };
  std::pair<const TokenList*, size_t> locate(size_t i) const;
  std::vector<Part> parts_;
  size_t size_ = 0;
};

}  // namespace gbui
