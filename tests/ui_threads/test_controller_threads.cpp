// EngineController across its two threads, as the workbench uses it: the
// controller lives on its own QThread, the main thread only posts commands
// (EngineController::post) and receives signals in its event loop. The cases
// check behaviour (the streamed tokens equal llama2.c's greedy output, a fork
// starts with its forced token, a cancel ends the stream, the trace export
// holds the run) and, built with TSan (tools/sanitize.sh tsan), that no data
// crosses the threads without a happens-before edge.
#include <QCoreApplication>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "bridge/engine_controller.h"
#include "gb_test.h"
#include "session/ui_events.h"
#include "controller_commands.h"

namespace {

// The main thread's view of the controller: what its signals delivered. Lives
// on the main thread, so every connection to it is queued there.
struct ControllerObserver : QObject {
  std::optional<gbui::UiModelInfo> model;
  QString loadError;
  std::map<quint64, quint64> submitted;  // tag -> request
  std::map<quint64, QString> failed;     // tag -> message
  std::map<quint64, std::vector<int>> tokens;
  std::map<quint64, gbui::UiFinished> finished;
  int branchesReleased = -1;
  std::optional<QString> exportError;
  QString engineError;
  long long events = 0;

  void watch(gbui::EngineController* c) {
    connect(c, &gbui::EngineController::modelLoaded, this, [this](const gbui::UiModelInfo& info) { model = info; });
    connect(c, &gbui::EngineController::modelLoadFailed, this,
            [this](const QString&, const QString& message) { loadError = message; });
    connect(c, &gbui::EngineController::requestSubmitted, this,
            [this](quint64 tag, quint64 request) { submitted[tag] = request; });
    connect(c, &gbui::EngineController::requestFailed, this,
            [this](quint64 tag, const QString& message) { failed[tag] = message; });
    connect(c, &gbui::EngineController::eventsReady, this, [this](const gbui::UiEventBatch& batch) {
      for (const gbui::UiEvent& e : *batch) {
        ++events;
        if (const auto* t = std::get_if<gbui::UiToken>(&e.body)) tokens[t->request].push_back(t->tokenId);
        if (const auto* f = std::get_if<gbui::UiFinished>(&e.body)) finished[f->request] = *f;
      }
    });
    connect(c, &gbui::EngineController::branchesReleased, this, [this](int n) { branchesReleased = n; });
    connect(c, &gbui::EngineController::exportFinished, this,
            [this](const QString&, const QString& error) { exportError = error; });
    connect(c, &gbui::EngineController::engineError, this, [this](const QString& m) { engineError = m; });
  }
};

// Runs the main thread's event loop until `done` holds; false after a minute
// (a hang, not a speed check: a step of stories260K takes well under a millisecond).
bool waitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents, 20);
  }
  return true;
}

QString sharedPath(const char* relative) { return QString::fromStdString(gbtest::shared_file(relative)); }

// The controller on its own thread, torn down as MainWindow does.
struct ControllerThread {
  std::optional<QCoreApplication> app;  // the Qt-free runner makes none
  QThread thread;
  gbui::EngineController* controller = nullptr;
  ControllerObserver observer;

  ControllerThread() {
    static int argc = 1;
    static char name[] = "ui_controller_threads_test";
    static char* argv[] = {name, nullptr};
    if (QCoreApplication::instance() == nullptr) app.emplace(argc, argv);
    qRegisterMetaType<gbui::UiEventBatch>();
    qRegisterMetaType<gbui::UiModelInfo>();
    controller = new gbui::EngineController;
    controller->moveToThread(&thread);
    QObject::connect(&thread, &QThread::finished, controller, &QObject::deleteLater);
    observer.watch(controller);
    thread.setObjectName(QStringLiteral("glassbox-engine"));
    thread.start();
  }
  ~ControllerThread() {
    controller->stopThread();
    thread.wait();
  }
  template <class F>
  void post(F f) {
    controller->post(std::move(f));
  }
  bool load() {
    const QString path = sharedPath("models/stories260K/stories260K.bin");
    post([path](gbui::EngineController* c) { c->loadModel(gbuitest::loadCommand(path, QStringLiteral("cpu"))); });
    return waitFor([this] { return observer.model.has_value() || !observer.loadError.isEmpty(); }) &&
           observer.model.has_value();
  }
  // Submits `prompt` under `tag` and waits for the request id.
  quint64 submit(quint64 tag, const QString& prompt, const QString& sampler, int maxTokens) {
    post([=](gbui::EngineController* c) { c->submit(gbuitest::completionCommand(tag, prompt, sampler, maxTokens)); });
    if (!waitFor([&] { return observer.submitted.count(tag) || observer.failed.count(tag); })) return 0;
    return observer.submitted.count(tag) ? observer.submitted[tag] : 0;
  }
  bool waitFinished(quint64 request) {
    return waitFor([&] { return observer.finished.count(request) > 0; });
  }
};

const QString kGreedy = QStringLiteral(R"({"temperature":0,"top_k":0,"top_p":1,"min_p":0,"seed":7})");

}  // namespace

GB_TEST(controller_streams_greedy_tokens_across_threads) {
  GB_REQUIRE_SHARED(goldenPath, "testdata/golden/once_upon_a_time_n64.json");
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  QFile goldenFile(QString::fromStdString(goldenPath));
  QVERIFY(goldenFile.open(QIODevice::ReadOnly));
  const QJsonObject golden = QJsonDocument::fromJson(goldenFile.readAll()).object();
  std::vector<int> ids;  // llama2.c run.c's greedy continuation (testdata/golden/README.md)
  for (const QJsonValue& v : golden.value("generated_tokens").toArray()) ids.push_back(v.toInt());
  QVERIFY(ids.size() > 30);

  ControllerThread ct;
  QVERIFY2(ct.load(), qPrintable(ct.observer.loadError));
  QCOMPARE(ct.observer.model->vocabSize, 512);
  const quint64 request = ct.submit(1, golden.value("prompt").toString(), kGreedy, static_cast<int>(ids.size()));
  QVERIFY2(request != 0, qPrintable(ct.observer.failed[1]));
  QVERIFY(ct.waitFinished(request));
  QCOMPARE(ct.observer.tokens[request], ids);
  QCOMPARE(ct.observer.finished[request].numGenerated, static_cast<int>(ids.size()));
  QVERIFY(ct.observer.engineError.isEmpty());
}

GB_TEST(controller_forks_cancels_and_exports_across_threads) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  ControllerThread ct;
  QVERIFY2(ct.load(), qPrintable(ct.observer.loadError));

  // A finished greedy answer, then a branch of it after 6 tokens (prompt and
  // answer) that is forced to take another token there.
  const quint64 parent = ct.submit(1, QStringLiteral("Once upon a time"), kGreedy, 24);
  QVERIFY(parent != 0);
  QVERIFY(ct.waitFinished(parent));
  const int numPrompt = ct.observer.finished[parent].numPromptTokens;
  QVERIFY(numPrompt > 1);
  const int forced = ct.observer.tokens[parent].at(1) == 42 ? 43 : 42;
  ct.post([=](gbui::EngineController* c) { c->fork(gbui::ForkCommand{2, parent, numPrompt + 1, forced, 8}); });
  QVERIFY(waitFor([&] { return ct.observer.submitted.count(2) || ct.observer.failed.count(2); }));
  QVERIFY2(ct.observer.submitted.count(2), qPrintable(ct.observer.failed[2]));
  const quint64 child = ct.observer.submitted[2];
  QVERIFY(ct.waitFinished(child));
  QVERIFY(!ct.observer.tokens[child].empty());
  QCOMPARE(ct.observer.tokens[child].front(), forced);

  // A long sampled request whose settings change while it streams, cancelled
  // from the main thread after its first tokens; pausing and resuming the
  // engine (an atomic flag, set directly from this thread) on the way.
  // The end tokens are banned (BOS 1, which llama2.c models end a story with,
  // and EOS 2), so its natural end is the 512-token context; the
  // cancel is posted while the engine is paused, so no step runs between the
  // settings change and the cancel.
  const quint64 sampled = ct.submit(3, QStringLiteral("Lily"),
                                    QStringLiteral(R"({"temperature":1.0,"seed":11,"logit_bias":[[1,"-inf"],[2,"-inf"]]})"), 4000);
  QVERIFY(sampled != 0);
  QVERIFY(waitFor([&] { return ct.observer.tokens[sampled].size() >= 8 || ct.observer.finished.count(sampled); }));
  ct.controller->setPaused(true);
  ct.post([=](gbui::EngineController* c) {
    c->setSamplerSettings(sampled, gbui::engineSettingsCodec().parseSampler(
        QStringLiteral(R"({"temperature":0.5,"logit_bias":[[1,"-inf"],[2,"-inf"]]})")));
  });
  ct.post([=](gbui::EngineController* c) { c->cancel(sampled); });
  ct.controller->setPaused(false);
  QVERIFY(ct.waitFinished(sampled));
  // It ended because it was cancelled, before its natural end (the 512-token
  // context), with exactly the tokens that streamed (the trace is checked below).
  const gbui::UiFinished& cancelled = ct.observer.finished[sampled];
  QCOMPARE(cancelled.reason, QStringLiteral("cancelled"));
  QVERIFY2(cancelled.numPromptTokens + cancelled.numGenerated < 512,
           qPrintable(QString::number(cancelled.numGenerated)));
  QCOMPARE(static_cast<size_t>(cancelled.numGenerated), ct.observer.tokens[sampled].size());

  // Every kept branch released (none on screen), then the trace of all of it.
  ct.post([](gbui::EngineController* c) { c->releaseBranches({}); });
  QVERIFY(waitFor([&] { return ct.observer.branchesReleased >= 0; }));
  QVERIFY(ct.observer.branchesReleased >= 1);
  const QString tracePath = dir.filePath(QStringLiteral("run.jsonl"));
  ct.post([=](gbui::EngineController* c) { c->exportTrace(tracePath, QStringLiteral("jsonl")); });
  QVERIFY(waitFor([&] { return ct.observer.exportError.has_value(); }));
  QCOMPARE(*ct.observer.exportError, QString());
  QFile trace(tracePath);
  QVERIFY(trace.open(QIODevice::ReadOnly));
  int tokenLines = 0, sampledLines = 0;
  while (!trace.atEnd()) {
    const QByteArray line = trace.readLine();
    if (!line.contains("\"type\":\"token_sampled\"")) continue;
    ++tokenLines;
    if (QJsonDocument::fromJson(line).object().value(QStringLiteral("request")).toInteger() ==
        static_cast<qint64>(sampled))
      ++sampledLines;
  }
  QCOMPARE(static_cast<size_t>(sampledLines), ct.observer.tokens[sampled].size());
  const size_t streamed = ct.observer.tokens[parent].size() + ct.observer.tokens[child].size() +
                          ct.observer.tokens[sampled].size();
  QCOMPARE(static_cast<size_t>(tokenLines), streamed);
  QVERIFY(ct.observer.engineError.isEmpty());
}
