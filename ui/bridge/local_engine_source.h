// LocalEngineSource: a model file run by gb::Engine on this machine (the CPU
// or CUDA backend, the engine's own policy). It owns the model, the tokenizer,
// the engine and the session's trace spool (every event written as it
// happens, so Export trace reads it back and a crash loses at most the last
// second). Serving (serving.h) and comparisons watch the engine's own events
// through observe().
// Threads: the controller's thread only.
#pragma once

#include <QString>
#include <QVector>
#include <functional>
#include <memory>
#include <vector>

#include "engine_source.h"

class QLockFile;

namespace gb {
class BackgroundTraceWriter;
class Engine;
struct Model;
class Tokenizer;
struct TraceEvent;
}  // namespace gb

namespace gbui {

class LocalEngineSource final : public EngineSource {
 public:
  // Self-drafting requests that can draft at once (scratch KV blocks reserved at load).
  static constexpr int kSelfDraftSeqs = 4;
  // Finished answers that keep their KV for copy-on-write branching (the
  // longest unused is released into the prefix cache past this, or as soon as
  // a request needs the blocks; a branch from it is then a short re-prefill).
  static constexpr int kMaxKeptBranches = 8;

  // Loads the model, its tokenizer and a backend and starts the engine. The
  // context and the pool come from the host's (or device's) memory budget
  // (gb::plan_kv): several contexts for branches, fewer and a shorter context
  // when they do not fit. progress(percent) is called while the file is read
  // and returns false to cancel. nullptr with `error` set when it fails (""
  // when cancelled).
  static std::unique_ptr<LocalEngineSource> open(const LoadCommand& command, const std::function<bool(int)>& progress,
                                                 QString& error);
  ~LocalEngineSource() override;

  QString refusal(Capability what) const override;
  UiModelInfo info() const override;
  SubmitResult submit(const SubmitCommand& command) override;
  SubmitResult fork(const ForkCommand& command) override;
  void cancel(quint64 request) override;
  void release(quint64 request) override;
  int releaseBranches(const QVector<quint64>& keep) override;
  QString setSamplerSettings(quint64 request, const SamplerChoice& sampler) override;
  bool steps() const override { return true; }
  bool step(QString& error) override;
  bool hasWork() const override;
  void drain(std::vector<UiEvent>& out, QStringList& warnings) override;
  void flushTrace(QStringList& warnings) override;
  std::unique_ptr<ComparisonRun> startComparison(const CompareCommand& command, QString& error) override;
  QString score(const ScoreCommand& command, QString& error) override;
  QString inspect(const InspectCommand& command, QString& error) override;
  QString exportTrace(const QString& path, const QString& format, const QString& branchesJson) override;

  // The engine's raw events, after they were translated (serving hands server
  // requests' tokens to their HTTP clients; a comparison advances). The
  // returned id removes it.
  using Observer = std::function<void(const std::vector<gb::TraceEvent>&)>;
  int observe(Observer observer);
  void unobserve(int id);

  gb::Engine& engine() const { return *engine_; }
  const std::shared_ptr<const gb::Model>& model() const { return model_; }
  const std::shared_ptr<const gb::Tokenizer>& tokenizer() const { return tokenizer_; }

 private:
  LocalEngineSource() = default;
  void startTraceSpool(QStringList& warnings);

  std::shared_ptr<const gb::Model> model_;
  std::shared_ptr<const gb::Tokenizer> tokenizer_;
  std::unique_ptr<gb::Engine> engine_;
  QVector<QString> vocab_;  // (vocab_size) decoded text per id
  int numScratchBlocks_ = 0;  // the pool's lookahead reserve (self-draft scratch)
  std::unique_ptr<gb::BackgroundTraceWriter> spool_;
  std::unique_ptr<QLockFile> spoolLock_;  // held while the spool is written (trace_spool.h)
  bool spoolFailed_ = false;              // its error was reported once
  QStringList openWarnings_;              // from open(), handed over by the first drain
  std::vector<std::pair<int, Observer>> observers_;
  int nextObserver_ = 0;
};

}  // namespace gbui
