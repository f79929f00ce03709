#include "chat_bench.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QTextDocument>
#include <algorithm>
#include <ctime>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "chat/chat_panel.h"
#include <qcustomplot.h>
#include "bridge/engine_controller.h"
#include "window/main_window.h"
#include "session/session_model.h"

namespace gbui {

UiToken syntheticToken(RequestKey request, int index, double tMs, int paragraphEvery) {
  UiToken t;
  t.request = request;
  t.index = index;
  t.position = 8 + index;
  t.tokenId = 100 + index % 300;
  t.text = paragraphEvery > 0 && index % paragraphEvery == paragraphEvery - 1 ? QStringLiteral(".\n")
           : index % 5 == 0                                                  ? QStringLiteral(" word")
                                                                             : QStringLiteral("ab");
  t.piece = t.text;
  t.stages = {"penalties", "dry", "logit_bias", "top_k", "typical_p", "top_p", "min_p", "xtc", "temperature"};
  t.stageActive = QVector<bool>(9, true);
  t.numAfterStage = QVector<int>(9, 20);
  for (int c = 0; c < 20; ++c) {
    UiCandidate cand;
    cand.id = 100 + c;
    cand.text = QStringLiteral("t%1").arg(c);
    cand.probBefore = 0.5f / static_cast<float>(c + 1);
    cand.probAfter = QVector<float>(9, cand.probBefore);
    t.top.push_back(cand);
  }
  t.prob = 0.3f + 0.6f * static_cast<float>(index % 7) / 7.0f;
  t.entropyBefore = 1.5f;
  t.rank = index % 3;
  t.tMs = tMs;
  return t;
}

namespace {

// Resident set size of this process in MiB (Linux /proc), -1 elsewhere.
double residentMiB() {
  QFile status(QStringLiteral("/proc/self/status"));
  if (!status.open(QIODevice::ReadOnly)) return -1.0;
  for (const QByteArray& line : status.readAll().split('\n'))
    if (line.startsWith("VmRSS:")) return line.mid(6).trimmed().split(' ').value(0).toDouble() / 1024.0;
  return -1.0;
}

// Bytes the C heap has handed out and not taken back, in MiB (glibc), -1
// elsewhere: unlike the resident set it does not count freed memory the
// allocator keeps, or pages of the program and its libraries.
double heapInUseMiB() {
#if defined(__GLIBC__)
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1024.0 * 1024.0);
#else
  return -1.0;
#endif
}

// This thread's CPU time in ms: on a shared, overloaded machine the wall time
// of a frame mostly measures the other processes; both are reported.
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void startStream(MainWindow& window) {
  SessionModel* model = window.sessionModel();
  UiModelInfo info;
  info.path = QStringLiteral("synthetic");
  info.name = QStringLiteral("synthetic");
  info.numBlocks = 256;
  info.blockSize = 16;
  model->setModelInfo(info);
  Conversation c;
  c.completionMode = true;
  c.turns.push_back({QStringLiteral("assistant"), {}, {1}, 0});
  window.chat()->setConversation(c);
  auto first = std::make_shared<std::vector<UiEvent>>();
  UiSubmitted sub;
  sub.request = 1;
  sub.promptIds = {1, 2, 3};
  first->push_back({0, 0, sub});
  emit window.controller()->eventsReady(first);
}

}  // namespace

QJsonObject runChatBench(MainWindow& window, const ChatBenchOptions& options) {
  startStream(window);
  QApplication::processEvents();
  // Checkpoints at 10%, 50% and 100%: the frames of the last 3,000 tokens before each.
  const std::vector<int> checkpoints = {options.tokens / 10, options.tokens / 2, options.tokens};
  const int window3k = std::max(1, 3000 / options.tokensPerFrame);
  std::vector<double> frameMs, frameCpuMs;
  QJsonArray points;
  quint64 seq = 1;
  int index = 0;
  size_t next = 0;
  QElapsedTimer total;
  total.start();
  for (int f = 0; index < options.tokens; ++f) {
    QElapsedTimer frame;
    frame.start();
    const double cpu0 = threadCpuMs();
    auto batch = std::make_shared<std::vector<UiEvent>>();
    const double tMs = f * 1000.0 / 60.0;
    for (int k = 0; k < options.tokensPerFrame && index < options.tokens; ++k, ++index)
      batch->push_back({seq++, static_cast<qint64>(tMs * 1000), syntheticToken(1, index, tMs, options.paragraphEvery)});
    UiStep step;
    step.step = f;
    step.total = 256;
    step.owned = f % 256;
    step.free = 256 - step.owned;
    batch->push_back({seq++, static_cast<qint64>(tMs * 1000), step});
    emit window.controller()->eventsReady(batch);
    QApplication::processEvents();  // the frame's queued replots and repaints
    frameMs.push_back(static_cast<double>(frame.nsecsElapsed()) / 1e6);
    frameCpuMs.push_back(threadCpuMs() - cpu0);
    while (next < checkpoints.size() && index >= checkpoints[next]) {
      const size_t n = std::min(frameMs.size(), static_cast<size_t>(window3k));
      const std::vector<double> recent(frameMs.end() - static_cast<std::ptrdiff_t>(n), frameMs.end());
      const std::vector<double> recentCpu(frameCpuMs.end() - static_cast<std::ptrdiff_t>(n), frameCpuMs.end());
      QJsonObject point;
      point[QStringLiteral("tokens")] = index;
      point[QStringLiteral("frame_ms_p50")] = percentile(recent, 0.50);
      point[QStringLiteral("frame_ms_p99")] = percentile(recent, 0.99);
      point[QStringLiteral("frame_cpu_ms_p50")] = percentile(recentCpu, 0.50);
      point[QStringLiteral("frame_cpu_ms_p99")] = percentile(recentCpu, 0.99);
      point[QStringLiteral("frames")] = static_cast<int>(n);
      point[QStringLiteral("rss_mib")] = residentMiB();
      point[QStringLiteral("heap_mib")] = heapInUseMiB();
      points.append(point);
      ++next;
    }
  }
  QJsonObject out;
  out[QStringLiteral("benchmark")] = QStringLiteral("chat");
  out[QStringLiteral("tokens")] = index;
  out[QStringLiteral("tokens_per_frame")] = options.tokensPerFrame;
  out[QStringLiteral("paragraph_every")] = options.paragraphEvery;
  out[QStringLiteral("chat_tokens_shown")] = window.chat()->view()->numTokenSpans();
  out[QStringLiteral("soft_breaks")] = window.chat()->view()->numSoftBreaks();
  out[QStringLiteral("frame_ms_p50")] = percentile(frameMs, 0.50);
  out[QStringLiteral("frame_ms_p99")] = percentile(frameMs, 0.99);
  out[QStringLiteral("frame_cpu_ms_p50")] = percentile(frameCpuMs, 0.50);
  out[QStringLiteral("frame_cpu_ms_p99")] = percentile(frameCpuMs, 0.99);
  out[QStringLiteral("seconds")] = static_cast<double>(total.elapsed()) / 1000.0;
  out[QStringLiteral("checkpoints")] = points;
  // Where a frame's time goes at the end: each chart's full redraw and its points.
  QJsonArray charts;
  for (QCustomPlot* plot : window.findChildren<QCustomPlot*>()) {
    if (!plot->isVisible()) continue;
    QElapsedTimer t;
    t.start();
    plot->replot(QCustomPlot::rpImmediateRefresh);
    QJsonObject c;
    c[QStringLiteral("chart")] = plot->objectName().isEmpty() ? plot->parentWidget()->objectName() : plot->objectName();
    c[QStringLiteral("replot_ms")] = static_cast<double>(t.nsecsElapsed()) / 1e6;
    int pointsTotal = 0;
    for (int g = 0; g < plot->graphCount(); ++g) pointsTotal += plot->graph(g)->dataCount();
    c[QStringLiteral("points")] = pointsTotal;
    c[QStringLiteral("x_range")] = QStringLiteral("%1..%2").arg(plot->xAxis->range().lower).arg(plot->xAxis->range().upper);
    charts.append(c);
  }
  out[QStringLiteral("charts")] = charts;
  return out;
}

namespace {

// One exchange's answer: the request id back, then the tokens a frame at a time.
struct TurnsBench {
  SessionModel model;
  ChatPanel chat{&model};
  quint64 seq = 1, tag = 0;
  RequestKey nextKey = 1;

  void apply(std::vector<UiEvent> events) {
    for (UiEvent& e : events) e.seq = seq++;
    model.apply(std::make_shared<const std::vector<UiEvent>>(std::move(events)));
  }
  void submitted() {
    const RequestKey key = nextKey++;
    chat.onRequestSubmitted(tag, key);
    UiSubmitted sub;
    sub.request = key;
    sub.promptIds = {1, 2, 3};
    apply({{0, 0, sub}});
  }
  void stream(int from, int to, int perFrame) {
    const RequestKey key = nextKey - 1;
    for (int i = from; i < to; i += perFrame) {
      std::vector<UiEvent> batch;
      for (int k = i; k < std::min(to, i + perFrame); ++k) batch.push_back({0, 0, syntheticToken(key, k, 0.0, 30)});
      apply(std::move(batch));
    }
  }
  void finish(int numTokens) {
    UiFinished done;
    done.request = nextKey - 1;
    done.reason = QStringLiteral("stop");
    done.numGenerated = numTokens;
    apply({{0, 0, done}});
  }
};

double elapsedMs(const QElapsedTimer& t) { return static_cast<double>(t.nsecsElapsed()) / 1e6; }

}  // namespace

QJsonObject runChatTurnsBench(int turns, int answerTokens) {
  constexpr int kPerFrame = 34;
  TurnsBench b;
  QObject::connect(&b.chat, &ChatPanel::generate, &b.chat, [&b](const TurnCommand& turn) { b.tag = turn.tag; });
  b.chat.resize(700, 850);
  b.chat.show();
  QApplication::processEvents();
  const std::vector<int> checkpoints = {std::max(10, turns / 10), std::max(10, turns / 2), turns};
  std::vector<double> submitMs, turnMs;
  QJsonArray points;
  for (int t = 1; t <= turns; ++t) {
    QElapsedTimer turn, submit;
    turn.start();
    submit.start();
    b.chat.setInputText(QStringLiteral("Question %1: and what about the waves?").arg(t));
    b.chat.send();
    b.submitted();
    b.stream(0, std::min(kPerFrame, answerTokens), kPerFrame);  // the first batch redraws the answer once
    submitMs.push_back(elapsedMs(submit));
    b.stream(kPerFrame, answerTokens, kPerFrame);
    b.finish(answerTokens);
    QApplication::processEvents();
    turnMs.push_back(elapsedMs(turn));
    if (std::find(checkpoints.begin(), checkpoints.end(), t) == checkpoints.end()) continue;
    const auto last10 = [](const std::vector<double>& v) {
      return std::vector<double>(v.end() - std::min<std::ptrdiff_t>(10, static_cast<std::ptrdiff_t>(v.size())), v.end());
    };
    QJsonObject point;
    point[QStringLiteral("turns")] = 2 * t;
    point[QStringLiteral("tokens_shown")] = b.chat.view()->numTokenSpans();
    point[QStringLiteral("submit_ms_p50")] = percentile(last10(submitMs), 0.5);
    point[QStringLiteral("exchange_ms_p50")] = percentile(last10(turnMs), 0.5);
    point[QStringLiteral("rss_mib")] = residentMiB();
    point[QStringLiteral("heap_mib")] = heapInUseMiB();
    points.append(point);
  }
  QJsonObject out;
  out[QStringLiteral("benchmark")] = QStringLiteral("chat_turns");
  out[QStringLiteral("exchanges")] = turns;
  out[QStringLiteral("answer_tokens")] = answerTokens;
  out[QStringLiteral("checkpoints")] = points;
  // A second answer to the last message, then back to the first one.
  b.chat.regenerate();
  b.submitted();
  b.stream(0, answerTokens, kPerFrame);
  b.finish(answerTokens);
  QElapsedTimer sw;
  sw.start();
  b.chat.showBranch(-1);
  out[QStringLiteral("branch_switch_ms")] = elapsedMs(sw);
  QElapsedTimer full;
  full.start();
  b.chat.rerender();
  out[QStringLiteral("full_redraw_ms")] = elapsedMs(full);
  out[QStringLiteral("soft_breaks")] = b.chat.view()->numSoftBreaks();
  out[QStringLiteral("blocks")] = b.chat.view()->document()->blockCount();
  return out;
}

}  // namespace gbui
