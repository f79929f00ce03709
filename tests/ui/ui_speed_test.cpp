// Responsiveness and speed, measured and printed as a benchmark: the UI event
// loop's gaps while the engine generates (target: p99 under 50 ms), frame times
// for a synthetic 2,000 tokens/s event stream at 60 frames/s (target: under
// 16.7 ms), and the tracing + translation share of the engine thread's time
// (target: under 5%). No timing is asserted (a busy machine would fail it; see
// docs/performance.md for reported figures). What is asserted is behaviour and
// the work done per frame, which does not depend on the machine: the generation
// completes, every token reaches the chat view, and the characters the text
// layout must redo per frame (every block an insert touches is laid out again in
// full) do not grow with the length of the session, with paragraphs or in one
// long paragraph (code review U3; the full-size figures come from
// `glassbox --bench-chat`, docs/performance.md).
#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QTextBlock>
#include <QTextDocument>
#include <QTimer>
#include <algorithm>
#include <cstdio>

#include "gb_qtest_main.h"
#include "chat_bench.h"
#include "bridge/engine_controller.h"
#include "ui_test_support.h"

using namespace gbuitest;

class UiSpeedTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
  }

  void eventLoopStaysResponsiveDuringGeneration() {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(R"({"temperature":1,"seed":9})"), QString());
    window->chat()->setConversation({});
    window->chat()->setMaxTokens(400);
    window->chat()->setInputText("Once upon a time");
    QElapsedTimer clock;
    qint64 last = 0, worst = 0;
    std::vector<qint64> gaps;
    QTimer probe;
    probe.setInterval(5);
    connect(&probe, &QTimer::timeout, this, [&] {
      const qint64 now = clock.elapsed();
      worst = std::max(worst, now - last);
      gaps.push_back(now - last);
      last = now;
    });
    window->chat()->send();
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->activeRequest() != 0; }, 10000));
    clock.start();
    probe.start();
    QVERIFY(QTest::qWaitFor([&] { return window->chat()->activeRequest() == 0; }, 120000));
    probe.stop();
    const gbui::RequestInfo* r = window->sessionModel()->request(window->chat()->conversation().turns.back().currentRequest());
    QVERIFY(r);
    double stepMs = 0, translateMs = 0;
    QMetaObject::invokeMethod(window->controller(), [&] {
      stepMs = window->controller()->stepMs();
      translateMs = window->controller()->translateMs();
    }, Qt::BlockingQueuedConnection);
    std::sort(gaps.begin(), gaps.end());
    const qint64 p99 = gaps.empty() ? 0 : gaps[gaps.size() * 99 / 100];
    std::printf("UI event loop (5 ms probe): p99 gap %lld ms, worst %lld ms over %lld ms while generating %zu tokens\n",
                static_cast<long long>(p99), static_cast<long long>(worst), static_cast<long long>(clock.elapsed()),
                r->tokens.size());
    std::printf("engine thread: steps %.1f ms, event translation %.2f ms (%.2f%% of step time)\n", stepMs, translateMs,
                stepMs > 0 ? 100.0 * translateMs / stepMs : 0.0);
    QVERIFY(r->tokens.size() >= 50);
    QCOMPARE(window->chat()->view()->numTokenSpans(), static_cast<int>(r->tokens.size()));
    // The gaps (target p99 < 50 ms) and the tracing share (target < 5% of step
    // time) are the figures printed above: reported, never asserted.
    QVERIFY(stepMs > 0.0);  // the controller measured its steps at all
  }

  void keepsUpWithSyntheticStream() {
    // Paragraph breaks every 60 tokens, as the stories models write.
    const StreamRun run = runSyntheticStream(true, 180);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(run.lateRelayout <= 2 * run.earlyRelayout + 200, qPrintable(run.describe()));
  }

  void longParagraphWorkPerFrameIsBounded() {
    // One paragraph of 6,000 tokens (about 14,000 characters): an insert lays
    // out the block it lands in again, so without bounded blocks (code review
    // U3) the work per frame grows with the answer; TokenView splits the
    // paragraph into blocks of at most maxBlockChars() at wrap points.
    const StreamRun run = runSyntheticStream(false, 180);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(run.softBreaks > 5, qPrintable(run.describe()));
    QVERIFY2(run.lateRelayout <= 2 * run.earlyRelayout + 200, qPrintable(run.describe()));
  }

 private:
  struct StreamRun {
    qint64 earlyRelayout = 0;  // characters laid out again per frame, mean of frames 5..14
    qint64 lateRelayout = 0;   // the same for the last 10 frames
    int softBreaks = 0;        // blocks TokenView split off long paragraphs
    QString describe() const {
      return QStringLiteral("relayout per frame: early %1 chars, late %2 chars; %3 soft breaks")
          .arg(earlyRelayout)
          .arg(lateRelayout)
          .arg(softBreaks);
    }
  };

  // 2,000 tokens/s delivered as one batch per 16.7 ms frame (180 frames: 3 s) into a full
  // window (chat, inspector, KV grid, charts). Frame times are printed; the
  // characters of every text block the frame's inserts touched are counted.
  StreamRun runSyntheticStream(bool paragraphs, int numFrames) {
    QTemporaryDir dir;
    auto window = makeWindow(dir);
    gbui::SessionModel* model = window->sessionModel();
    gbui::UiModelInfo info;
    info.path = "synthetic";
    info.name = "synthetic";
    info.numBlocks = 256;
    info.blockSize = 16;
    model->setModelInfo(info);
    gbui::Conversation c;
    c.completionMode = true;
    c.turns.push_back({"assistant", {}, {1}, 0});
    window->chat()->setConversation(c);
    auto first = std::make_shared<std::vector<gbui::UiEvent>>();
    gbui::UiSubmitted sub;
    sub.request = 1;
    sub.promptIds = {1, 2, 3};
    first->push_back({0, 0, sub});
    model->apply(first);

    QTextDocument* doc = window->chat()->view()->document();
    qint64 frameRelayout = 0;
    const QMetaObject::Connection watch =
        connect(doc, &QTextDocument::contentsChange, this, [&](int from, int, int added) {
          const QTextBlock last = doc->findBlock(from + added);
          for (QTextBlock b = doc->findBlock(from); b.isValid(); b = b.next()) {
            frameRelayout += b.length();
            if (b == last) break;
          }
        });

    const int kFrames = numFrames, kTokensPerFrame = 2000 / 60 + 1;
    quint64 seq = 1;
    int index = 0;
    std::vector<double> frameMs;
    std::vector<qint64> relayout;
    for (int f = 0; f < kFrames; ++f) {
      QElapsedTimer frame;
      frame.start();
      frameRelayout = 0;
      auto batch = std::make_shared<std::vector<gbui::UiEvent>>();
      const double tMs = f * 1000.0 / 60.0;
      for (int k = 0; k < kTokensPerFrame; ++k, ++index)
        batch->push_back({seq++, static_cast<qint64>(tMs * 1000), gbui::syntheticToken(1, index, tMs, paragraphs ? 60 : 0)});
      gbui::UiStep step;
      step.step = f;
      step.total = 256;
      step.owned = f % 256;
      step.free = 256 - step.owned;
      batch->push_back({seq++, static_cast<qint64>(tMs * 1000), step});
      model->apply(batch);
      QApplication::processEvents();  // queued replots and repaints of this frame
      frameMs.push_back(static_cast<double>(frame.nsecsElapsed()) / 1e6);
      relayout.push_back(frameRelayout);
    }
    disconnect(watch);
    StreamRun run;
    run.softBreaks = window->chat()->view()->numSoftBreaks();
    for (int f = 5; f < 15; ++f) run.earlyRelayout += relayout[static_cast<size_t>(f)] / 10;
    for (int f = kFrames - 10; f < kFrames; ++f) run.lateRelayout += relayout[static_cast<size_t>(f)] / 10;
    std::sort(frameMs.begin(), frameMs.end());
    const double median = frameMs[frameMs.size() / 2], p95 = frameMs[frameMs.size() * 95 / 100];
    double sum = 0;
    for (double v : frameMs) sum += v;
    std::printf("synthetic stream (%s): %d tokens in %d frames (%.0f tokens/s at 60 fps): frame time median %.2f ms, "
                "mean %.2f ms, p95 %.2f ms, max %.2f ms; %s\n",
                paragraphs ? "paragraph every 60 tokens" : "one paragraph", index, kFrames, kTokensPerFrame * 60.0,
                median, sum / kFrames, p95, frameMs.back(), qPrintable(run.describe()));
    [&] { QCOMPARE(window->chat()->view()->numTokenSpans(), index); }();
    // Frame time against the 16.7 ms budget is reported (closing notes,
    // docs/performance.md), not asserted: timings on shared machines are noise.
    return run;
  }
};

GB_QTEST_MAIN(UiSpeedTest);
#include "ui_speed_test.moc"
