// TokenList and TokenSeq (ui/session/token_list.h), randomized: tokens with every kind
// of text (empty, surrogate pairs, a piece that differs from the text), several
// sampler chains, remote and XTC flags and speculative origins are pushed, the
// whole records are trimmed at random points, and every token read back is
// compared with the one pushed: all fields while it is whole, and after
// trimming everything the compact record promises (ui/session/token_list.h) with the
// candidates, counts and draft gone. TokenSeq is checked against a plain vector
// built the same way.
#include <QTest>
#include <cmath>
#include <random>
#include <vector>

#include "gb_qtest_main.h"
#include "session/session_model.h"
#include "session/token_list.h"

namespace {

QString randomText(std::mt19937& rng) {
  static const QString pieces[] = {QString(), QStringLiteral("ab"), QStringLiteral(" word"), QStringLiteral("\U0001F600"),
                                   QStringLiteral("\u00e9t\u00e9"), QStringLiteral("\n"), QStringLiteral("<think>")};
  return pieces[rng() % std::size(pieces)];
}

gbui::UiToken randomToken(std::mt19937& rng, gbui::RequestKey request, int index) {
  static const QStringList chains[] = {{"top_k", "top_p", "temperature"},
                                       {"penalties", "dry", "top_k", "min_p", "xtc", "temperature"},
                                       {}};
  gbui::UiToken t;
  t.request = request;
  t.index = index;
  t.step = 1000 + 3 * index + static_cast<qint64>(rng() % 3);
  t.position = 17 + index;
  t.tokenId = static_cast<int>(rng() % 150000);
  t.text = randomText(rng);
  t.piece = rng() % 4 == 0 ? QStringLiteral("\u2581piece%1").arg(index) : t.text;
  t.stages = chains[rng() % 3];
  t.stageActive = QVector<bool>(t.stages.size(), true);
  if (!t.stageActive.isEmpty() && rng() % 2) t.stageActive[0] = false;
  t.numAfterStage = QVector<int>(t.stages.size(), 12);
  const int numTop = static_cast<int>(rng() % 4);
  for (int c = 0; c < numTop; ++c) {
    gbui::UiCandidate cand;
    cand.id = c;
    cand.text = QStringLiteral("c%1").arg(c);
    cand.probBefore = 0.25f;
    cand.probAfter = QVector<float>(t.stages.size(), 0.25f);
    t.top.push_back(cand);
  }
  if (rng() % 5 == 0) {
    auto d = std::make_shared<gbui::UiDraftInfo>();
    d->drafter = QStringLiteral("ngram");
    d->position = 1;
    t.draft = d;
    t.origin = static_cast<int>(gbui::UiTokenOrigin::Accepted);
  }
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  t.prob = u(rng);
  t.probBefore = u(rng);
  t.entropyBefore = 4.0f * u(rng);
  t.entropyAfter = 2.0f * u(rng);
  t.draw = static_cast<double>(u(rng));  // a float's worth of digits: the compact record keeps a float
  t.rank = static_cast<int>(rng() % 40) - 1;
  t.numCandidatesBefore = static_cast<int>(rng() % 32000);
  t.xtcFired = rng() % 7 == 0;
  t.remote = rng() % 11 == 0;
  t.tMs = t.forwardMs = t.sampleMs = 1.5;
  return t;
}

}  // namespace

class TokenListTest : public QObject {
  Q_OBJECT

  static void compareKept(const gbui::UiToken& got, const gbui::UiToken& want) {
    QCOMPARE(got.request, want.request);
    QCOMPARE(got.index, want.index);
    QCOMPARE(got.step, want.step);
    QCOMPARE(got.position, want.position);
    QCOMPARE(got.tokenId, want.tokenId);
    QCOMPARE(got.text, want.text);
    QCOMPARE(got.piece, want.piece);
    QCOMPARE(got.stages, want.stages);
    QCOMPARE(got.stageActive, want.stageActive);
    QCOMPARE(got.prob, want.prob);
    QCOMPARE(got.probBefore, want.probBefore);
    QCOMPARE(got.entropyBefore, want.entropyBefore);
    QCOMPARE(got.entropyAfter, want.entropyAfter);
    QCOMPARE(got.draw, want.draw);
    QCOMPARE(got.rank, want.rank);
    QCOMPARE(got.numCandidatesBefore, want.numCandidatesBefore);
    QCOMPARE(got.origin, want.origin);
    QCOMPARE(got.xtcFired, want.xtcFired);
    QCOMPARE(got.remote, want.remote);
  }

 private slots:
  void wholeThenCompactRecordsReadBackAsPushed() {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      std::mt19937 rng(seed);
      gbui::TokenList list;
      std::vector<gbui::UiToken> pushed;
      size_t trimmedTo = 0;
      const int n = 200 + static_cast<int>(rng() % 800);
      for (int i = 0; i < n; ++i) {
        pushed.push_back(randomToken(rng, 42, i));
        list.push_back(pushed.back());
        if (rng() % 50 == 0) {  // trim to a random point at or after the last one
          trimmedTo = std::max(trimmedTo, static_cast<size_t>(rng() % (list.size() + 1)));
          list.trimTo(trimmedTo);
        }
      }
      QCOMPARE(list.size(), pushed.size());
      QCOMPARE(list.firstWhole(), trimmedTo);
      for (size_t i = 0; i < pushed.size(); ++i) {
        const gbui::UiToken got = list[i];
        const gbui::UiToken& want = pushed[i];
        compareKept(got, want);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(list.tokenId(i), want.tokenId);
        QCOMPARE(list.text(i).toString(), want.text);
        QCOMPARE(list.probBefore(i), want.probBefore);
        if (i >= trimmedTo) {  // whole: everything, the candidates and the draft too
          QVERIFY(list.whole(i));
          QCOMPARE(got.top.size(), want.top.size());
          QCOMPARE(got.numAfterStage, want.numAfterStage);
          QCOMPARE(got.draft, want.draft);
          QCOMPARE(got.tMs, want.tMs);
          QVERIFY(!got.detailTrimmed);
        } else {
          QVERIFY(!list.whole(i));
          QVERIFY(got.top.isEmpty() && got.numAfterStage.isEmpty() && !got.draft);
          QVERIFY(std::isnan(got.tMs) && std::isnan(got.forwardMs) && std::isnan(got.sampleMs));
          // Trimmed says candidates or counts were dropped (every random token has counts when it has stages).
          QCOMPARE(got.detailTrimmed, !want.top.isEmpty() || !want.numAfterStage.isEmpty());
        }
      }
      // Iteration gives the same tokens as indexing.
      size_t k = 0;
      for (const gbui::UiToken& t : list) QCOMPARE(t.tokenId, pushed[k++].tokenId);
      QCOMPARE(k, pushed.size());
    }
  }

  // A token costs its 64-byte record and its characters once it is compact.
  void compactRecordsAreSmall() {
    std::mt19937 rng(7);
    gbui::TokenList list;
    qsizetype chars = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      const gbui::UiToken t = randomToken(rng, 1, i);
      chars += t.text.size() + (t.piece == t.text ? 0 : t.piece.size());
      list.push_back(t);
    }
    list.trimTo(list.size());
    QCOMPARE(list.firstWhole(), list.size());
    const size_t bound = static_cast<size_t>(n) * 64 + static_cast<size_t>(chars) * 2 * 2 + 4096;
    QVERIFY2(list.compactBytes() <= bound, qPrintable(QStringLiteral("%1 > %2").arg(list.compactBytes()).arg(bound)));
  }

  // Restored tokens are compact from the start; a whole one after them stays whole.
  void pushCompactKeepsWholeRecordsASuffix() {
    std::mt19937 rng(3);
    gbui::TokenList list;
    const gbui::UiToken a = randomToken(rng, 5, 0), b = randomToken(rng, 5, 1), c = randomToken(rng, 5, 2);
    list.pushCompact(a);
    QVERIFY(!list.whole(0));
    list.push_back(b);
    QVERIFY(list.whole(1));
    list.pushCompact(c);  // after a whole one: kept whole
    QVERIFY(list.whole(2));
    QCOMPARE(list.firstWhole(), size_t{1});
    compareKept(list[0], a);
    compareKept(list[2], c);
  }

  void seqMatchesAVectorBuiltTheSameWay() {
    std::mt19937 rng(11);
    std::vector<gbui::TokenList> lists(4);
    for (size_t l = 0; l < lists.size(); ++l)
      for (int i = 0; i < 50; ++i) lists[l].push_back(randomToken(rng, l + 1, i));
    lists[1].trimTo(30);
    for (int round = 0; round < 200; ++round) {
      gbui::TokenSeq seq;
      std::vector<gbui::UiToken> want;
      const int ops = 1 + static_cast<int>(rng() % 6);
      for (int o = 0; o < ops; ++o) {
        if (rng() % 3 == 0) {
          const size_t keep = want.empty() ? 0 : rng() % (want.size() + 1);
          seq.truncate(keep);
          want.resize(std::min(keep, want.size()));
        } else {
          const gbui::TokenList& list = lists[rng() % lists.size()];
          const size_t begin = rng() % 60, end = rng() % 60;
          seq.append(list, begin, end);
          for (size_t i = begin; i < std::min(end, list.size()); ++i) want.push_back(list[i]);
        }
      }
      QCOMPARE(seq.size(), want.size());
      QCOMPARE(seq.empty(), want.empty());
      for (size_t i = 0; i < want.size(); ++i) {
        QCOMPARE(seq[i].request, want[i].request);
        QCOMPARE(seq[i].index, want[i].index);
        QCOMPARE(seq.text(i).toString(), want[i].text);
      }
    }
  }

  // SessionModel keeps the last detailWindow() tokens whole, across requests.
  void sessionModelKeepsTheDetailWindowWhole() {
    gbui::SessionModel model;
    model.setDetailWindow(100);
    std::mt19937 rng(5);
    quint64 seq = 1;
    std::vector<gbui::UiToken> pushed;  // request 2's
    for (gbui::RequestKey key : {gbui::RequestKey{1}, gbui::RequestKey{2}}) {
      auto batch = std::make_shared<std::vector<gbui::UiEvent>>();
      gbui::UiSubmitted sub;
      sub.request = key;
      sub.promptIds = {1, 2};
      batch->push_back({seq++, 0, sub});
      for (int i = 0; i < 250; ++i) {
        batch->push_back({seq++, 0, randomToken(rng, key, i)});
        if (key == 2) pushed.push_back(std::get<gbui::UiToken>(batch->back().body));
      }
      model.apply(batch);
    }
    const gbui::TokenList& first = model.request(1)->tokens;
    const gbui::TokenList& second = model.request(2)->tokens;
    QCOMPARE(first.firstWhole(), first.size());  // all 250 left the window
    QCOMPARE(second.firstWhole(), size_t{150});  // the last 100 of all 500 are whole
    for (int i : {149, 150, 249}) {
      const std::optional<gbui::UiToken> t = model.token(2, i);
      QVERIFY(t);
      compareKept(*t, pushed[static_cast<size_t>(i)]);
      QCOMPARE(t->top.size(), i < 150 ? 0 : pushed[static_cast<size_t>(i)].top.size());
    }
    QVERIFY(!model.token(2, 250));
    QCOMPARE(model.request(1)->allTokenIds().size(), 252);
    model.setDetailWindow(0);
    QCOMPARE(second.firstWhole(), second.size());
  }
};

GB_QTEST_MAIN(TokenListTest);
#include "ui_token_list_test.moc"
