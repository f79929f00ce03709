// EngineSource: "the engine behind the window", as the controller sees it. Two
// implementations: LocalEngineSource (a model file run by gb::Engine on this
// machine) and RemoteEngineSource (an OpenAI-compatible server). The
// controller (engine_controller.h) keeps the thread, the mailboxes, the step
// timer and the batched flush, and talks to whichever source is loaded only
// through this interface; what a source cannot do is answered in one place,
// its capability table (refusal()).
// Threads: the controller's thread only (create, use and destroy there).
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>
#include <memory>
#include <optional>
#include <vector>

#include "session/ui_commands.h"
#include "session/ui_events.h"

namespace gbui {

// What the window may ask of an engine beyond plain generation.
enum class Capability {
  Branching,    // fork at a token, regenerate from kept KV
  Speculative,  // speculative decoding
  KvEviction,   // a KV eviction policy other than full, and its full-cache shadow
  Compare,      // sampler comparisons
  Score,        // teacher-forced scoring
  ScoreBase,    // scoring against a base model (KL)
  Inspect,      // inside the model: attention, logit lens, signals (docs/inside.md)
  Serve,        // serving it over the OpenAI API from the workbench
  TraceExport,  // the session's engine trace
};

// What a submit or a fork gave: the request id, or the message why not; a chat
// turn also gives the prompt the engine rendered (shown by the chat's
// "Show prompt").
struct SubmitResult {
  quint64 request = 0;
  QString error;
  std::optional<UiChatPrompt> prompt;
  bool ok() const { return error.isEmpty(); }
};

// A sampler comparison run by a source (engine/runtime/comparison.h locally,
// one streamed request per sample remotely). The controller polls it after
// every batch of events; it ends with a result or a failure, and keeps its KV
// blocks (local) until it is closed or destroyed.
class ComparisonRun {
 public:
  struct Update {
    std::optional<QVector<quint64>> started;  // the samples' request ids, lane-major
    std::optional<QString> failed;
    bool finished = false;
    QString json, csv;  // with `finished` (docs/compare.md); csv "" where there is none
  };
  virtual ~ComparisonRun() = default;
  virtual quint64 tag() const = 0;
  // What happened since the last poll (called after the source drained).
  virtual Update poll() = 0;
};

class EngineSource {
 public:
  virtual ~EngineSource() = default;

  // "" when the source can do `what`, else the message shown for it.
  virtual QString refusal(Capability what) const = 0;
  virtual UiModelInfo info() const = 0;

  virtual SubmitResult submit(const SubmitCommand& command) = 0;
  virtual SubmitResult fork(const ForkCommand& command) = 0;
  virtual void cancel(quint64 request) = 0;
  // Frees the KV a finished request kept (a released branch).
  virtual void release(quint64 request) = 0;
  // Releases every kept request not in `keep`; the number released.
  virtual int releaseBranches(const QVector<quint64>& keep) = 0;
  // "" or the engine's message (a request already finished is not an error).
  virtual QString setSamplerSettings(quint64 request, const SamplerChoice& sampler) = 0;

  // Local engines advance by steps on the controller's thread; a remote one
  // works on its own threads and is only drained.
  virtual bool steps() const = 0;
  // One engine step: true when it ran something; the error message on failure.
  virtual bool step(QString& error) = 0;
  virtual bool hasWork() const = 0;
  // Moves the events since the last drain into `out` (as UiEvents), and any
  // problem worth a warning (a trace spool that stopped) into `warnings`.
  virtual void drain(std::vector<UiEvent>& out, QStringList& warnings) = 0;
  // Pushes buffered trace lines to disk (at idle); a problem as a warning.
  virtual void flushTrace(QStringList& warnings) = 0;

  // A comparison (Capability::Compare), or the message why not.
  virtual std::unique_ptr<ComparisonRun> startComparison(const CompareCommand& command, QString& error) = 0;
  // Teacher-forced scoring (Capability::Score): the result JSON, or the error.
  virtual QString score(const ScoreCommand& command, QString& error) = 0;
  // Inside the model at one position (Capability::Inspect): the report JSON
  // (schema glassbox-inside-v1), or the error.
  virtual QString inspect(const InspectCommand& command, QString& error) = 0;
  // Writes the session's trace (Capability::TraceExport): "" or the error.
  virtual QString exportTrace(const QString& path, const QString& format, const QString& branchesJson) = 0;
};

}  // namespace gbui
