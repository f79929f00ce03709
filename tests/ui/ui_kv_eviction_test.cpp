// KV eviction in the workbench, from synthetic event batches (no model): the
// session model's per-request eviction log (UiEviction, UiShadowKl) marks the
// right answer tokens by their UiToken::position (the prompt counted), the
// chat's token view strikes exactly those through and its hover says when and
// why, the KV panel's strips keep what the events say (and a window group's
// last W positions), the shadow plot gets one point per UiShadowKl and one
// cross per top-1 disagreement; the settings codec and the policy controls
// accept what the engine's resolve_kv_policy accepts and refuse the rest with
// its message. The expected values are written out here from the events, not
// read back from the code under test.
#include <QAbstractTextDocumentLayout>
#include <QApplication>
#include <QComboBox>
#include <QImage>
#include <QPainter>
#include <QSpinBox>
#include <QTabWidget>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>
#include <cmath>
#include <qcustomplot.h>

#include "bridge/engine_settings_codec.h"
#include "chat/token_view.h"
#include "gb_qtest_main.h"
#include "panels/kv_cache_panel.h"
#include "panels/kv_eviction_view.h"
#include "panels/kv_policy_settings.h"
#include "session/session_model.h"
#include "widgets/kv_strip_widget.h"

namespace {

constexpr gbui::RequestKey kReq = 5;
constexpr int kPrompt = 10;  // prompt tokens: positions 0..9
constexpr int kAnswer = 30;  // answer tokens: positions 10..39

gbui::UiEvent uiEvent(quint64 seq, gbui::UiEventBody body) { return gbui::UiEvent{seq, static_cast<qint64>(seq) * 1000, std::move(body)}; }

gbui::UiToken answerToken(gbui::RequestKey request, int index, int numPrompt) {
  gbui::UiToken t;
  t.request = request;
  t.index = index;
  t.position = numPrompt + index;
  t.step = 10 + index;
  t.tokenId = 100 + index;
  t.text = QStringLiteral(" w%1").arg(index);
  t.piece = t.text;
  t.prob = 0.5f;
  return t;
}

// A request with its prompt and `numTokens` answer tokens.
std::vector<gbui::UiEvent> requestEvents(gbui::RequestKey request, int numPrompt, int numTokens, quint64& seq) {
  std::vector<gbui::UiEvent> out;
  gbui::UiSubmitted s;
  s.request = request;
  for (int i = 0; i < numPrompt; ++i) s.promptIds.push_back(i + 1);
  s.maxTokens = numTokens;
  out.push_back(uiEvent(seq++, s));
  for (int i = 0; i < numTokens; ++i) out.push_back(uiEvent(seq++, answerToken(request, i, numPrompt)));
  return out;
}

gbui::UiEventBatch batch(std::vector<gbui::UiEvent> events) {
  return std::make_shared<const std::vector<gbui::UiEvent>>(std::move(events));
}

gbui::UiModelInfo modelInfo(bool windowGroup) {
  gbui::UiModelInfo info;
  info.path = QStringLiteral("/synthetic.gguf");
  info.name = QStringLiteral("synthetic");
  info.numBlocks = 64;
  info.blockSize = 16;
  info.numLayers = 18;
  info.kvMainLayers = windowGroup ? 3 : 18;
  if (windowGroup) {
    info.kvWindow = 8;
    info.kvWindowLayers = 15;
    info.kvWindowBlocks = 32;
  }
  return info;
}

// h2o B=16 S=2 R=8 on a 10-token prompt and 30 answer tokens: step 20 evicts
// positions 3, 4, 12 (answer tokens 2) with their masses, step 30 evicts 13 and
// 25 (answer tokens 3 and 15); the first event carries a kept snapshot
// (position p's mass (p + 1) / 16).
std::vector<gbui::UiEvent> h2oEvictions(quint64& seq) {
  gbui::UiEviction first;
  first.request = kReq;
  first.step = 20;
  first.policy = QStringLiteral("h2o B=16 S=2 R=8");
  first.reason = QStringLiteral("lowest attention mass");
  first.positions = {3, 4, 12};
  first.mass = {0.0123f, 0.5f, 0.25f};
  first.numKept = 16;
  // In slot order, as the engine lists them (a freed slot takes the next position).
  first.keptPositions = {14, 15, 16, 17, 18, 19, 0, 1, 2, 5, 6, 7, 8, 9, 10, 11};
  for (int p : first.keptPositions) first.keptMass.push_back(0.0625f * static_cast<float>(p + 1));
  gbui::UiEviction second = first;
  second.step = 30;
  second.positions = {13, 25};
  second.mass = {0.75f, 1.5f};
  second.keptPositions.clear();
  second.keptMass.clear();
  return {uiEvent(seq++, first), uiEvent(seq++, second)};
}

}  // namespace

class UiKvEvictionTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
  }

  void sessionModelMarksEvictedTokensByPosition() {
    gbui::SessionModel model;
    model.setModelInfo(modelInfo(false));
    quint64 seq = 1;
    std::vector<gbui::UiEvent> events = requestEvents(kReq, kPrompt, kAnswer, seq);
    for (gbui::UiEvent& e : h2oEvictions(seq)) events.push_back(std::move(e));
    const quint64 before = model.evictionRevision();
    model.apply(batch(std::move(events)));
    QVERIFY(model.evictionRevision() > before);
    const gbui::KvEvictionLog* log = model.evictionLog(kReq);
    QVERIFY(log != nullptr);
    QCOMPARE(model.evictionLog(kReq + 1), nullptr);
    QCOMPARE(log->numEvicted(), 5);
    QCOMPARE(log->numKept(), 16);
    QCOMPARE(log->lastStep(), qint64(30));
    // Answer token i sits at position 10 + i: tokens 2, 3 and 15 went.
    for (int i = 0; i < kAnswer; ++i)
      QCOMPARE(model.tokenEviction(kReq, i).evicted(), i == 2 || i == 3 || i == 15);
    QCOMPARE(model.tokenEviction(kReq, 2).step, qint64(20));
    QCOMPARE(model.tokenEviction(kReq, 15).step, qint64(30));
    QCOMPARE(model.tokenEvictionText(kReq, 2),
             QStringLiteral("evicted at step 20 by h2o B=16 S=2 R=8: lowest attention mass (0.2500)"));
    QCOMPARE(log->describe(3), QStringLiteral("evicted at step 20 by h2o B=16 S=2 R=8: lowest attention mass (0.0123)"));
    QCOMPARE(model.tokenEvictionText(kReq, 4), QString());
    // The snapshot's masses, by position.
    QCOMPARE(log->keptMass(5), 0.375f);
    QCOMPARE(log->keptMass(19), 1.25f);
    QCOMPARE(log->maxKeptMass(), 1.25f);
    QCOMPARE(log->snapshotPositions().front(), 0);
    QCOMPARE(log->snapshotPositions().back(), 19);
    QVERIFY(std::isnan(log->keptMass(3)));
    QVERIFY(std::isnan(log->keptMass(30)));  // computed after the snapshot
    // A sink eviction names no mass.
    gbui::UiEviction sink;
    sink.request = kReq + 1;
    sink.step = 7;
    sink.policy = QStringLiteral("sink B=32 S=4 R=28");
    sink.reason = QStringLiteral("outside the recent window");
    sink.positions = {4};
    sink.numKept = 32;
    seq = 100;
    std::vector<gbui::UiEvent> more = requestEvents(kReq + 1, 3, 4, seq);
    more.push_back(uiEvent(seq++, sink));
    model.apply(batch(std::move(more)));
    QCOMPARE(model.tokenEvictionText(kReq + 1, 1), QStringLiteral("evicted at step 7 by sink B=32 S=4 R=28: outside the recent window"));
    // A new model forgets them.
    model.setModelInfo(modelInfo(false));
    QCOMPARE(model.evictionLog(kReq), nullptr);
  }

  void tokenViewStrikesEvictedTokensThrough() {
    gbui::SessionModel model;
    model.setModelInfo(modelInfo(false));
    quint64 seq = 1;
    model.apply(batch(requestEvents(kReq, kPrompt, kAnswer, seq)));
    gbui::TokenView view;
    view.resize(600, 400);
    view.show();
    view.setTokenLookup([&model](gbui::RequestKey r, int i) { return model.token(r, i); });
    view.setEvictionLookup([&model](gbui::RequestKey r, int i) { return model.tokenEviction(r, i).evicted(); },
                           [&model](gbui::RequestKey r, int i) { return model.tokenEvictionText(r, i); });
    for (int i = 0; i < kAnswer; ++i) view.appendToken(*model.token(kReq, i));
    for (int i = 0; i < kAnswer; ++i) QVERIFY(!view.spanEvicted(i));
    const QImage clean = render(view);
    // The evictions arrive after the tokens were drawn.
    model.apply(batch(h2oEvictions(seq)));
    for (int i = 0; i < kAnswer; ++i) QCOMPARE(view.spanEvicted(i), i == 2 || i == 3 || i == 15);
    const QString tip = view.tooltipFor(*view.spanToken(15));
    QVERIFY2(tip.contains("evicted at step 30 by h2o B=16 S=2 R=8: lowest attention mass (1.5000)"), qPrintable(tip));
    QVERIFY(!view.tooltipFor(*view.spanToken(14)).contains("evicted"));
    // Drawn: an evicted token's cells are grey (background, wash) with a grey
    // strike line; a kept token's look is unchanged.
    const QImage marked = render(view);
    const QRect evicted = spanBox(view, 15), kept = spanBox(view, 14);
    QVERIFY(!evicted.isEmpty() && !kept.isEmpty());
    QVERIFY(differingPixels(clean, marked, kept) == 0);
    QVERIFY(differingPixels(clean, marked, evicted) > evicted.width());
    const QRgb corner = marked.pixel(evicted.left() + 1, evicted.top() + 1);
    QCOMPARE(qRed(corner), qGreen(corner));
    QCOMPARE(qGreen(corner), qBlue(corner));
    int strike = 0;
    for (int x = evicted.left(); x <= evicted.right(); ++x)
      for (int y = evicted.center().y() - 1; y <= evicted.center().y() + 1; ++y)
        strike += marked.pixel(x, y) == gbui::TokenView::evictedStrikeColor().rgb();
    QVERIFY(strike >= evicted.width() - 2);
  }

  void kvPanelStripsFollowTheEvents() {
    gbui::SessionModel model;
    model.setModelInfo(modelInfo(true));
    gbui::KvCachePanel panel(&model);
    panel.resize(1200, 400);
    panel.show();
    QCOMPARE(panel.eviction()->shownRequest(), gbui::RequestKey(0));
    QVERIFY(!panel.evictionTabShown());
    quint64 seq = 1;
    std::vector<gbui::UiEvent> events = requestEvents(kReq, kPrompt, kAnswer, seq);
    for (gbui::UiEvent& e : h2oEvictions(seq)) events.push_back(std::move(e));
    model.apply(batch(std::move(events)));
    gbui::KvEvictionView* view = panel.eviction();
    QCOMPARE(view->shownRequest(), kReq);
    QVERIFY(panel.evictionTabShown());  // brought to the front
    const QVector<gbui::KvStripWidget::Strip>& strips = view->strips()->strips();
    QCOMPARE(strips.size(), 2);
    // 10 prompt + 30 answer tokens, the newest not computed yet: 39 positions.
    constexpr int kComputed = kPrompt + kAnswer - 1;
    QCOMPARE(strips[0].cells.size(), kComputed);
    QCOMPARE(view->strips()->numPrompt(), kPrompt);
    for (int p = 0; p < kComputed; ++p) {
      const bool gone = p == 3 || p == 4 || p == 12 || p == 13 || p == 25;
      QCOMPARE(strips[0].cells[p] == gbui::KvStripWidget::Cell::Evicted, gone);
      // The window group keeps the last W = 8 positions, whatever the policy.
      QCOMPARE(strips[1].cells[p] == gbui::KvStripWidget::Cell::Kept, p >= kComputed - 8);
    }
    QCOMPARE(strips[0].numKept(), kComputed - 5);
    QCOMPARE(strips[1].numKept(), 8);
    QCOMPARE(strips[0].mass.size(), kComputed);
    QCOMPARE(strips[0].mass[19], 1.25f);  // the snapshot's last kept position
    QCOMPARE(strips[0].mass[0], 0.0625f);
    QVERIFY(std::isnan(strips[0].mass[3]));
    QVERIFY(strips[1].mass.isEmpty());
    QVERIFY2(view->policyText().contains("h2o B=16 S=2 R=8") && view->policyText().contains("keeps 16 of 39") &&
                 view->policyText().contains("5 evicted (2 of the 10 prompt tokens)"),
             qPrintable(view->policyText()));
    QVERIFY2(view->positionText(0, 12).contains("answer token 2 ' w2': evicted at step 20"),
             qPrintable(view->positionText(0, 12)));
    QVERIFY2(view->positionText(1, 2).contains("outside the sliding layers' window of 8"), qPrintable(view->positionText(1, 2)));

    // The shadow: one point per UiShadowKl, a cross per top-1 disagreement.
    QCOMPARE(view->klPlot()->graph(0)->dataCount(), 0);
    std::vector<gbui::UiEvent> shadow;
    for (int i = 0; i < 6; ++i) {
      gbui::UiShadowKl s;
      s.request = kReq;
      s.shadow = kReq + 1;
      s.index = i;
      s.position = kPrompt + i;
      s.kl = 0.01 * i;
      s.top1Agree = i != 2 && i != 5;
      shadow.push_back(uiEvent(seq++, s));
    }
    model.apply(batch(std::move(shadow)));
    QCOMPARE(view->klPlot()->graph(0)->dataCount(), 6);
    QCOMPARE(view->klPlot()->graph(1)->dataCount(), 2);
    QCOMPARE(view->klPlot()->graph(1)->data()->at(1)->key, 5.0);
    QVERIFY2(view->shadowText().contains("6 tokens") && view->shadowText().contains("differs at 2 token(s)"),
             qPrintable(view->shadowText()));

    // Another evicting request becomes the shown one; selecting a token of the
    // first shows it again (and its points alone).
    std::vector<gbui::UiEvent> other = requestEvents(kReq + 2, 4, 6, seq);
    gbui::UiEviction e;
    e.request = kReq + 2;
    e.step = 40;
    e.policy = QStringLiteral("sink B=4 S=1 R=3");
    e.reason = QStringLiteral("outside the recent window");
    e.positions = {1, 2};
    e.numKept = 4;
    e.keptPositions = {0, 3, 4, 5};
    other.push_back(uiEvent(seq++, e));
    model.apply(batch(std::move(other)));
    QCOMPARE(view->shownRequest(), kReq + 2);
    QCOMPARE(view->klPlot()->graph(0)->dataCount(), 0);
    QVERIFY(view->strips()->strips()[0].mass.isEmpty());  // sink has no mass
    model.selectToken(kReq, 0);
    QCOMPARE(view->shownRequest(), kReq);
    QCOMPARE(view->klPlot()->graph(0)->dataCount(), 6);
  }

  void codecResolvesPoliciesAsTheEngineDoes() {
    const gbui::SettingsCodec& codec = gbui::engineSettingsCodec();
    QStringList names;
    for (const gbui::KvPolicyOption& o : codec.kvPolicies()) names << o.name;
    QCOMPARE(names, QStringList({"full", "sink", "h2o", "snapkv"}));
    gbui::KvPolicyChoice c;
    c.policy = QStringLiteral("sink");
    c.budget = 32;
    gbui::KvPolicyChoice checked = codec.checkKvPolicy(c);
    QVERIFY2(checked.ok(), qPrintable(checked.error));
    QCOMPARE(checked.resolved, QStringLiteral("sink B=32 S=4 R=28"));
    c.policy = QStringLiteral("h2o");
    c.budget = 512;
    c.shadow = true;
    checked = codec.checkKvPolicy(c);
    QCOMPARE(checked.resolved, QStringLiteral("h2o B=512 S=0 R=256"));
    QVERIFY(checked.shadow);
    // Refused with a message: no budget, sinks that leave no recent window, an unknown name.
    c.budget = 0;
    checked = codec.checkKvPolicy(c);
    QVERIFY(!checked.ok());
    QVERIFY2(checked.error.contains("budget of at least 1"), qPrintable(checked.error));
    c.policy = QStringLiteral("sink");
    c.budget = 8;
    c.sinks = 8;
    checked = codec.checkKvPolicy(c);
    QVERIFY(!checked.ok());
    QVERIFY2(checked.error.contains("cannot hold 8 sink tokens"), qPrintable(checked.error));
    c.policy = QStringLiteral("lru");
    checked = codec.checkKvPolicy(c);
    QVERIFY2(checked.error.contains("unknown KV policy 'lru'"), qPrintable(checked.error));
    // Full keeps everything: its numbers and the shadow are cleared.
    c.policy = QStringLiteral("full");
    c.budget = 64;
    c.shadow = true;
    checked = codec.checkKvPolicy(c);
    QVERIFY(checked.ok() && !checked.active() && !checked.shadow && checked.budget == 0);
    QCOMPARE(checked.resolved, QStringLiteral("full"));
  }

  void policyControlsShowTheCodecsVerdict() {
    gbui::KvPolicySettings settings(gbui::engineSettingsCodec());
    QCOMPARE(settings.choice().policy, QStringLiteral("full"));
    QVERIFY(!settings.budgetBox()->isEnabled());
    settings.policyBox()->setCurrentIndex(settings.policyBox()->findData(QStringLiteral("h2o")));
    settings.budgetBox()->setValue(64);
    QVERIFY(settings.budgetBox()->isEnabled());
    QCOMPARE(settings.choice().resolved, QStringLiteral("h2o B=64 S=0 R=32"));
    QVERIFY2(settings.statusText().contains("h2o B=64 S=0 R=32"), qPrintable(settings.statusText()));
    settings.budgetBox()->setValue(0);
    QVERIFY(!settings.choice().ok());
    QVERIFY2(settings.statusText().contains("budget of at least 1"), qPrintable(settings.statusText()));
    // setChoice: an accepted policy lands in the controls, a refused one is reported and changes nothing.
    gbui::KvPolicyChoice c;
    c.policy = QStringLiteral("sink");
    c.budget = 32;
    c.shadow = true;
    QCOMPARE(settings.setChoice(c), QString());
    QCOMPARE(settings.choice().resolved, QStringLiteral("sink B=32 S=4 R=28"));
    QVERIFY(settings.choice().shadow);
    c.sinks = 40;
    QVERIFY(settings.setChoice(c).contains("cannot hold 40 sink tokens"));
    QCOMPARE(settings.sinksBox()->value(), -1);
  }

 private:
  static QImage render(gbui::TokenView& view) {
    QTextDocument* doc = view.document();
    QImage image(doc->size().toSize(), QImage::Format_ARGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    const QRectF all(QPointF(0, 0), doc->size());
    view.paintTokenBackgrounds(painter, all);
    doc->drawContents(&painter);
    view.paintEvictionMarks(painter, all);
    return image;
  }

  // The box of token span `i` (one line: the tokens are short), in document pixels.
  static QRect spanBox(gbui::TokenView& view, int i) {
    QTextDocument* doc = view.document();
    int begin = -1, end = -1;
    for (int pos = 0; pos < doc->characterCount(); ++pos) {
      const std::optional<gbui::UiToken> t = view.tokenAt(pos);
      if (!t || t->index != i) continue;
      if (begin < 0) begin = pos;
      end = pos + 1;
    }
    if (begin < 0) return {};
    const QTextBlock block = doc->findBlock(begin);
    const QTextLine line = block.layout()->lineForTextPosition(begin - block.position());
    const QRectF box = doc->documentLayout()->blockBoundingRect(block);
    const qreal x1 = line.cursorToX(begin - block.position()), x2 = line.cursorToX(end - block.position());
    return QRectF(box.left() + x1, box.top() + line.y(), x2 - x1, line.height()).toAlignedRect().adjusted(1, 1, -1, -1);
  }

  static int differingPixels(const QImage& a, const QImage& b, const QRect& area) {
    int n = 0;
    for (int y = area.top(); y <= area.bottom(); ++y)
      for (int x = area.left(); x <= area.right(); ++x) n += a.pixel(x, y) != b.pixel(x, y);
    return n;
  }
};

GB_QTEST_MAIN(UiKvEvictionTest);
#include "ui_kv_eviction_test.moc"
