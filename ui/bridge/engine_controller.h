// EngineController: the one bridge between Qt and the engine (STYLE.md, Seams).
// It lives on its own QThread and owns the gb::Engine, the model, tokenizer and
// backend. The UI talks to it only through queued slot calls (commands) and
// receives UiEvent batches through queued signals, at most one per flush
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

#include "thread_mailbox.h"
#include "session/ui_chat_prompt.h"
#include "session/ui_events.h"

namespace gb {
struct GenerationRequest;
struct SamplerSettings;
}  // namespace gb

namespace gb::server {
struct RemoteEvent;  // the bridge's private helpers only
}

namespace gbui {

class EngineController : public QObject {
  Q_OBJECT
 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;

  // Sampler settings, speculative specs and KV type names are checked by the
  // settings codec (engine_settings_codec.h), not here.
  // Self-drafting requests that can draft at once (scratch KV blocks reserved at load).
  static constexpr int kSelfDraftSeqs = 4;
  // Finished answers that keep their KV for copy-on-write branching (the
  // longest unused is released into the prefix cache past this, or as soon as
  // a request needs the blocks; a branch from it is then a short re-prefill).
  static constexpr int kMaxKeptBranches = 8;

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

 public slots:
  // device: "auto" | "cpu" | "cuda". Emits modelLoaded or modelLoadFailed.
  // generation: from beginLoad(); -1 takes the current one (direct calls, tests).
  // bf16Matmuls: the CPU backend rounds F32/F16 matrices to BF16 at load
  // (gb::CpuBackendOptions::bf16_matmuls: faster, not exact).
  // kvTypes: "K/V" KV type names ("q8_0/f16", kernels/cpu/kv_type.h); empty:
  // the default (f16 where the backend reads it). The pool and the context
  // come from the host's memory budget (gb::plan_kv): several contexts for
  // branches, fewer and a shorter context when they do not fit.
  void loadModel(const QString& path, const QString& device, int contextLength, int generation = -1,
                 bool bf16Matmuls = false, const QString& kvTypes = {});
  // Uses an OpenAI-compatible server (another Glassbox, llama-server, vLLM) as
  // the engine instead of a local model (engine_controller_remote.cpp): submit,
  // submitChat and cancel go to it as streamed requests, its tokens (with up to
  // 20 alternatives) and client-side timings arrive as UiEvents like local ones
  // (UiToken::remote set), and its /metrics, when it has one, as
  // UiRemoteMetrics. The network runs on threads of gb::server::RemoteSession:
  // this thread only drains their events at display rate. Emits modelLoaded
  // (info.remoteUrl set) or modelLoadFailed. What the API cannot do (branching,
  // speculative decoding, Compare, Score, serving, trace export) fails with a
  // message; sampler changes do not reach a request already sent.
  void connectRemote(const QString& url, const QString& apiKey, int generation = -1);
  // Encodes `prompt` (BOS first) and submits it, speculating per `speculativeSpec`
  // ("" = plain decoding). Emits requestSubmitted(tag, id) or requestFailed(tag, message).
  // branchFrom: earlier requests it may branch from (GenerationRequest::branch_from:
  // the one sharing the longest token prefix is forked copy-on-write up to it).
  void submit(quint64 tag, const QString& prompt, const QString& samplerJson, int maxTokens,
              const QString& speculativeSpec = {}, const QVector<quint64>& branchFrom = {});
  // Branches `parent` after numTokens tokens (prompt + output), forcing `forcedToken`
  // next (-1: none). Emits requestSubmitted(tag, child) or requestFailed.
  void fork(quint64 tag, quint64 parent, int numTokens, int forcedToken, int maxTokens);
  // Chat: the engine renders `messages` with the model's own chat template
  // (format "model") or a built-in format, tokenizes it with control tokens
  // recognised outside the message texts and submits it, stopping on every
  // end-of-generation token (engine_controller_chat.cpp). Emits chatPromptReady,
  // then requestSubmitted or requestFailed.
  void submitChat(quint64 tag, const QVector<gbui::UiChatMessage>& messages, const QString& format,
                  const QString& samplerJson, int maxTokens, const QString& speculativeSpec = {},
                  const QVector<quint64>& branchFrom = {});
  void cancel(quint64 request);
  // Frees the KV blocks a finished request kept (a released branch).
  void release(quint64 request);
  // A sampler comparison (engine/runtime/comparison.h): lanes = names and
  // sampler JSON, lane-major requests arrive with comparisonStarted, the result
  // JSON/CSV (docs/compare.md) with comparisonFinished. Replaces (and releases)
  // an earlier comparison. With `chat` the prompt is those messages rendered in
  // `chatFormat` like a chat turn (the lanes are alternative answers; they stop
  // on the turn's end tokens) and `prompt` is ignored.
  // engine_controller_compare.cpp.
  void startComparison(quint64 tag, const QString& prompt, const QStringList& laneNames,
                       const QStringList& laneJson, int samples, quint64 seed, bool crn, int maxTokens,
                       const QVector<gbui::UiChatMessage>& chat = {}, const QString& chatFormat = {});
  // Releases every KV block the current comparison holds.
  void closeComparison();
  // Teacher-forced scoring of `text` (BOS first) under the loaded model, and
  // with `basePath` also KL(base || model) per token (runtime/text_scorer.h).
  // Runs on CPU backends of its own, so the engine's KV pool is untouched.
  // Emits scoreFinished(tag, JSON of docs/compare.md) or scoreFailed.
  void scoreText(quint64 tag, const QString& text, const QString& basePath);
  // Releases the KV every finished request keeps, except those in `keep` (the
  // branches on screen). Full blocks stay in the prefix cache. Emits
  // branchesReleased(number released).
  void releaseBranches(const QVector<quint64>& keep);
  void setSamplerSettings(quint64 request, const QString& samplerJson);
  // format: "jsonl" | "chrome". Emits exportFinished(path, error or "").
  // branchesJson: the workbench's branch tree and conversation (ui/branch_tree.h),
  // written into the JSONL header's "branches" ("" = none).
  void exportTrace(const QString& path, const QString& format, const QString& branchesJson = {});
  // Reads a recorded trace; emits traceOpened(info, events) or traceOpenFailed.
  void openTrace(const QString& path);
  // Serves the loaded model over the OpenAI API (engine/server, docs/server.md)
  // from this engine: HTTP requests are engine requests like the chat's, so every
  // panel shows them. port 0 picks a free port; apiKey "" needs none. Emits
  // servingStarted(address) or servingFailed(message). Loading another model
  // stops serving (servingStopped).
  void startServing(const QString& host, int port, const QString& apiKey);
  void stopServing();
  // Moves the pending events out now (tests; also called by the flush timer).
  void flush();
  // Runs one engine step now and queues its events (tests drive the engine with
  // this while paused). False when there was nothing to do or the step failed.
  bool stepOnce();
  // Tests: the engine's own view, checked against the UI's models.
  // Returns "owned free cached total" of the KV pool from the scheduler snapshot.
  QString kvSnapshotSummary() const;
  // "<blocks marked released by the sliding window now> <WindowReleased events so far>".
  QString kvWindowSummary() const;
  // Token ids of a request's prompt + output as the engine knows them.
  QVector<int> tokensOf(quint64 request) const;
  // Ref counts per block from the engine's snapshot (index = block id).
  QVector<int> kvRefCounts() const;
  // Finished requests that keep KV blocks, longest unused first.
  QVector<quint64> keptRequests() const;
  bool hasWork() const;
  // Milliseconds spent in Engine::step() and in translating / queueing events
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
  void servingStarted(const QString& address);
  void servingFailed(const QString& message);
  void servingStopped();

 private:
  struct State;  // engine objects; defined in the .cpp so this header stays engine-free
  void runSteps();
  void scheduleSteps();
  void collectEvents();
  // Opens this model's trace spool (traceSpoolDir()), keeping the newest few
  // spool files of earlier sessions; a failure is reported, not fatal.
  void startTraceSpool();
  void flushTraceSpool();
  // After events were collected: lets a running comparison fork its lanes or
  // finish (engine_controller_compare.cpp).
  void advanceComparison();
  void serviceHub();          // takes the server's queued commands (engine_controller_serve.cpp)
  void stopServingNow(bool announce);
  void drainRemote();         // remote engine events -> pending UiEvents (engine_controller_remote.cpp)
  bool submitRemote(quint64 tag, const QString& prompt, const QString& samplerJson, int maxTokens);
  bool submitChatRemote(quint64 tag, const QVector<gbui::UiChatMessage>& messages, const QString& samplerJson,
                        int maxTokens);
  bool refuseRemote(quint64 tag, const QString& what);  // requestFailed for what a remote cannot do
  // The local path shared by submit and submitChat: a loaded engine and valid
  // settings (else requestFailed and false), then one request submitted as a
  // branchable (retained-KV) turn that may fork branchFrom and speculate.
  bool localSettings(quint64 tag, const QString& samplerJson, int maxTokens, gb::SamplerSettings& out);
  void submitLocal(quint64 tag, gb::GenerationRequest request, const QVector<quint64>& branchFrom,
                   const QString& speculativeSpec);
  void scoreTextRemote(quint64 tag, const QString& text, const QString& basePath);  // echo + logprobs
  // The Compare view on a remote engine (engine_controller_remote_compare.cpp).
  void startComparisonRemote(quint64 tag, const QString& prompt, const QStringList& laneNames,
                             const QStringList& laneJson, int samples, quint64 seed, int maxTokens,
                             const QVector<gbui::UiChatMessage>& chat);
  bool noteRemoteComparison(const gb::server::RemoteEvent& event);  // true: the comparison ended
  void finishRemoteComparison();
  UiModelInfo modelInfo() const;
  QVector<QString> vocabularyTexts() const;

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
  std::unique_ptr<State> state_;
  QTimer* stepTimer_ = nullptr;   // zero-interval: one engine step per tick
  QTimer* flushTimer_ = nullptr;  // display rate: moves pending events to the UI
  std::vector<UiEvent> pending_;
  std::atomic<int> loadGeneration_{0};
  std::atomic<bool> paused_{false};
  int numIdleSteps_ = 0;  // steps in a row that ran nothing while work was left
  double stepMs_ = 0.0;
  double translateMs_ = 0.0;
};

}  // namespace gbui
