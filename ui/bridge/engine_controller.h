// EngineController: the one bridge between Qt and the engine (STYLE.md, Seams).
// It lives on its own QThread and keeps the thread, the mailboxes, the step
// timer and the batched flush; the engine itself is an EngineSource
// (engine_source.h): a local model (LocalEngineSource) or a remote
// OpenAI-compatible server (RemoteEngineSource), with the same commands and
// the same events. It owns the running comparison (a ComparisonRun the source
// made) and the server (Serving, local sources only). The UI talks to it only
// through queued commands (post(), typed values from ui/session/ui_commands.h)
// and receives UiEvent batches through queued signals, at most one per flush
// interval (16 ms, about 60 Hz), so a fast engine never floods the UI thread.
//
// Invariants: every engine object is created, used and destroyed on the
// controller's thread; no signal carries an engine type (only ui_events.h
// values); the UI never waits on this object. Engine errors arrive as signals.
// Threads: construct on the thread that receives the signals (the UI's), then
// moveToThread(). Commands go in through post(); signals come out on the
// constructing thread: both ways through a Mailbox (thread_mailbox.h), whose
// std::mutex makes each hand-over visible to ThreadSanitizer, in order. Destroy
// it on its own thread while the constructing thread waits for that thread
// (MainWindow: the thread's finished() -> deleteLater(), then stopThread() and
// wait()). cancelLoad() and setPaused() are atomic flags and may be called
// directly from any thread.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>
#include <atomic>
#include <memory>

#include "session/ui_chat_prompt.h"
#include "session/ui_commands.h"
#include "session/ui_events.h"
#include "thread_mailbox.h"

namespace gbui {

class ComparisonRun;
class EngineSource;
class Serving;
enum class Capability;

class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;

  // A load is identified by a generation number taken on the UI thread when it
  // is asked for; cancelLoad() moves the generation on, so a queued or running
  // load with an older number stops (or is dropped) without replacing the model.
  int beginLoad() { return loadGeneration_.fetch_add(1) + 1; }
  void cancelLoad() { loadGeneration_.fetch_add(1); }
  void setPaused(bool paused);
  bool isPaused() const { return paused_.load(); }
  int flushIntervalMs() const { return 16; }

  // Cancels a load, pauses, and ends the event loop of the thread the
  // controller was moved to once the commands posted before have run (through
  // post(), so everything this thread did before happens before the thread
  // ends, for TSan too). The caller then waits for the thread. Any thread.
  void stopThread();

  // Runs command(this) on the controller's thread, after the commands posted
  // before it (at once when called there with nothing queued). Any thread.
  template <class F>
  void post(F command) {
    commands_->post([this, command = std::move(command)] { command(this); });
  }

  // The engine behind the window (nullptr before a load); its thread only.
  // Tests read the engine's own view through EngineProbe (engine_probe.h).
  const EngineSource* source() const { return source_.get(); }

 public slots:
  // Opens a model file as a LocalEngineSource. Emits loadProgress while the file
  // is read, then modelLoaded or modelLoadFailed.
  void loadModel(const gbui::LoadCommand& command);
  // Uses an OpenAI-compatible server (another Glassbox, llama-server, vLLM) as
  // the engine (RemoteEngineSource). Emits modelLoaded (info.remoteUrl set) or
  // modelLoadFailed. generation: from beginLoad(); -1 takes the current one.
  void connectRemote(const QString& url, const QString& apiKey, int generation = -1);
  // One generation request (a completion or a chat turn, with its sampler
  // choice and speculative spec). A chat turn emits chatPromptReady first; then
  // requestSubmitted(tag, id) or requestFailed(tag, message).
  void submit(const gbui::SubmitCommand& command);
  // Branches a request at a token. Emits requestSubmitted or requestFailed.
  void fork(const gbui::ForkCommand& command);
  void cancel(quint64 request);
  // Frees the KV blocks a finished request kept (a released branch).
  void release(quint64 request);
  // A sampler comparison: the samples' requests arrive with comparisonStarted,
  // the result JSON/CSV (docs/compare.md) with comparisonFinished. Replaces
  // (and releases) an earlier comparison.
  void startComparison(const gbui::CompareCommand& command);
  // Releases every KV block the current comparison holds.
  void closeComparison();
  // Teacher-forced scoring (runtime/text_scorer.h), with a base model also
  // KL(base || model) per token. Emits scoreFinished(tag, JSON) or scoreFailed.
  void scoreText(const gbui::ScoreCommand& command);
  // Inside the model at one position (runtime/inside.h, docs/inside.md): emits
  // inspectFinished(tag, report JSON) or inspectFailed(tag, message). The
  // inspected prefix runs as an internal request (other requests advance too).
  void inspect(const gbui::InspectCommand& command);
  // Releases the KV every finished request keeps, except those in `keep` (the
  // branches on screen). Full blocks stay in the prefix cache. Emits
  // branchesReleased(number released).
  void releaseBranches(const QVector<quint64>& keep);
  void setSamplerSettings(quint64 request, const gbui::SamplerChoice& sampler);
  // format: "jsonl" | "chrome". Emits exportFinished(path, error or "").
  // branchesJson: the workbench's branch tree and conversation (ui/session/branch_tree.h),
  // written into the JSONL header's "branches" ("" = none).
  void exportTrace(const QString& path, const QString& format, const QString& branchesJson = {});
  // Reads a recorded trace; emits traceOpened(info, events) or traceOpenFailed.
  void openTrace(const QString& path);
  // Serves the loaded model over the OpenAI API (serving.h) from this engine:
  // HTTP requests are engine requests like the chat's, so every panel shows
  // them. Emits servingStarted(address) or servingFailed(message). Loading
  // another model stops serving (servingStopped).
  void startServing(const QString& host, int port, const QString& apiKey);
  void stopServing();
  // Moves the pending events out now (tests; also called by the flush timer).
  void flush();
  // Runs one engine step now and queues its events (tests drive the engine with
  // this while paused). False when there was nothing to do or the step failed.
  bool stepOnce();
  bool hasWork() const;
  // Milliseconds spent in engine steps and in translating / queueing events
  // (the tracing + UI share of the engine thread's time).
  double stepMs() const { return stepMs_; }
  double translateMs() const { return translateMs_; }

 signals:
  void modelLoaded(const gbui::UiModelInfo& info);
  void modelLoadFailed(const QString& path, const QString& message);
  // Percent of the model file read so far (emitted while loadModel runs).
  void loadProgress(int percent);
  void requestSubmitted(quint64 tag, quint64 request);
  void requestFailed(quint64 tag, const QString& message);
  void chatPromptReady(const gbui::UiChatPrompt& prompt);
  void eventsReady(const gbui::UiEventBatch& events);
  void engineError(const QString& message);
  void idle();  // no work left after a step
  void branchesReleased(int count);
  void exportFinished(const QString& path, const QString& error);
  void traceOpened(const gbui::UiModelInfo& info, const gbui::UiEventBatch& events);
  void traceOpenFailed(const QString& path, const QString& message);
  void comparisonStarted(quint64 tag, const QVector<quint64>& requests);
  void comparisonFinished(quint64 tag, const QString& json, const QString& csv);
  void comparisonFailed(quint64 tag, const QString& message);
  void scoreFinished(quint64 tag, const QString& json);
  void scoreFailed(quint64 tag, const QString& message);
  void inspectFinished(quint64 tag, const QString& json);
  void inspectFailed(quint64 tag, const QString& message);
  void servingStarted(const QString& address);
  void servingFailed(const QString& message);
  void servingStopped();

 private:
  // Installs a newly loaded source: stops serving, drops the old source's
  // comparison and pending events, then announces the model.
  void adopt(std::unique_ptr<EngineSource> source);
  // "" when a source is loaded and can do `what`, else the message to show.
  QString refusal(Capability what) const;
  void runSteps();
  void scheduleSteps();
  // Moves the source's events into pending_, lets a running comparison advance,
  // and reports the source's warnings.
  void collectEvents();
  void pollComparison();
  void stopServingNow(bool announce);
  void serviceHub();

  // Emits `signal` with `args` on the constructing thread, after every signal
  // notified before it: the arguments are copied here and handed over under
  // outbox_'s mutex.
  template <class... Params, class... Args>
  void notify(void (EngineController::*signal)(Params...), Args&&... args) {
    outbox_->post([this, signal, ... values = std::decay_t<Params>(std::forward<Args>(args))] {
      (this->*signal)(values...);
    });
  }

  Mailbox* commands_ = nullptr;  // a child: moves to the engine thread with the controller
  Mailbox* outbox_ = nullptr;    // no parent: stays on the constructing thread
  // Destroyed in reverse: serving and the comparison watch the source.
  std::unique_ptr<EngineSource> source_;
  std::unique_ptr<ComparisonRun> comparison_;
  std::unique_ptr<Serving> serving_;
  QTimer* stepTimer_ = nullptr;   // zero-interval: one engine step per tick
  QTimer* flushTimer_ = nullptr;  // display rate: moves pending events to the UI
  std::vector<UiEvent> pending_;
  std::atomic<int> loadGeneration_{0};
  std::atomic<bool> paused_{false};
  int numIdleSteps_ = 0;  // steps in a row that ran nothing while work was left
  bool busy_ = false;     // work was left at the last look (idle() when it ends)
  double stepMs_ = 0.0;
  double translateMs_ = 0.0;
};

}  // namespace gbui
