// EngineController: commands in, UiEvent batches out. See engine_controller.h.
#include "engine_controller.h"

#include <QElapsedTimer>
#include <QThread>

#include "engine_source.h"
#include "engine_translation.h"
#include "local_engine_source.h"
#include "remote_engine_source.h"
#include "serving.h"

namespace gbui {

EngineController::EngineController(QObject* parent)
    : QObject(parent), commands_(new Mailbox(this)), outbox_(new Mailbox) {
  stepTimer_ = new QTimer(this);
  stepTimer_->setInterval(0);
  connect(stepTimer_, &QTimer::timeout, this, &EngineController::runSteps);
  flushTimer_ = new QTimer(this);
  flushTimer_->setInterval(flushIntervalMs());
  connect(flushTimer_, &QTimer::timeout, this, &EngineController::flush);
}

EngineController::~EngineController() {
  stopServingNow(false);
  comparison_.reset();  // before the source it watches
  source_.reset();
  // Signals not yet delivered name this object: they go with it. The outbox
  // lives on the constructing thread, so it is deleted there.
  outbox_->close();
  outbox_->deleteLater();
}

void EngineController::setPaused(bool paused) {
  paused_.store(paused);
  if (!paused) commands_->post([this] { scheduleSteps(); }, Mailbox::Delivery::Queued);
}

void EngineController::stopThread() {
  cancelLoad();
  setPaused(true);
  commands_->post([this] { thread()->quit(); }, Mailbox::Delivery::Queued);
}

void EngineController::loadModel(const LoadCommand& command) {
  const int generation = command.generation < 0 ? loadGeneration_.load() : command.generation;
  if (generation != loadGeneration_.load()) return;  // cancelled before it started
  QString error;
  auto source = LocalEngineSource::open(
      command,
      [this, generation](int percent) {
        if (loadGeneration_.load() != generation) return false;  // a Cancel stops the read
        notify(&EngineController::loadProgress, percent);
        return true;
      },
      error);
  if (generation != loadGeneration_.load()) return;  // cancelled while loading: drop it
  if (!source) return notify(&EngineController::modelLoadFailed, command.path, error);
  adopt(std::move(source));
}

void EngineController::connectRemote(const QString& url, const QString& apiKey, int generation) {
  if (generation < 0) generation = loadGeneration_.load();
  if (generation != loadGeneration_.load()) return;
  QString error;
  auto source = RemoteEngineSource::connect(url, apiKey, error);
  if (generation != loadGeneration_.load()) return;  // cancelled while connecting
  if (!source) return notify(&EngineController::modelLoadFailed, url, error);
  adopt(std::move(source));
}

void EngineController::adopt(std::unique_ptr<EngineSource> source) {
  stopServingNow(true);  // the server served the old engine
  stepTimer_->stop();
  pending_.clear();
  comparison_.reset();
  source_ = std::move(source);  // the old one's spool is flushed and closed; the file stays
  busy_ = false;
  notify(&EngineController::modelLoaded, source_->info());
  if (!source_->steps()) flushTimer_->start();  // a remote source is drained from now on
}

QString EngineController::refusal(Capability what) const {
  if (!source_) return tr("No model is loaded.");
  return source_->refusal(what);
}

void EngineController::submit(const SubmitCommand& command) {
  const quint64 tag = command.turn.tag;
  QString refused;
  if (!source_) refused = tr("No model is loaded.");
  else if (!command.speculative.isEmpty()) refused = refusal(Capability::Speculative);
  if (refused.isEmpty() && command.kvPolicy.active()) refused = refusal(Capability::KvEviction);
  if (!refused.isEmpty()) return notify(&EngineController::requestFailed, tag, refused);
  const SubmitResult r = source_->submit(command);
  if (r.prompt) notify(&EngineController::chatPromptReady, *r.prompt);
  collectEvents();
  if (!r.ok()) {
    flush();
    return notify(&EngineController::requestFailed, tag, r.error);
  }
  notify(&EngineController::requestSubmitted, tag, r.request);
  scheduleSteps();
}

void EngineController::fork(const ForkCommand& command) {
  if (const QString refused = refusal(Capability::Branching); !refused.isEmpty())
    return notify(&EngineController::requestFailed, command.tag, refused);
  const SubmitResult r = source_->fork(command);
  collectEvents();
  if (!r.ok()) {
    flush();
    return notify(&EngineController::requestFailed, command.tag, r.error);
  }
  notify(&EngineController::requestSubmitted, command.tag, r.request);
  scheduleSteps();
}

void EngineController::cancel(quint64 request) {
  if (!source_) return;
  source_->cancel(request);
  collectEvents();
  scheduleSteps();
}

void EngineController::release(quint64 request) {
  if (!source_) return;
  source_->release(request);
  collectEvents();
  scheduleSteps();  // starts the flush timer, so the release reaches the UI
}

void EngineController::releaseBranches(const QVector<quint64>& keep) {
  if (!source_) return;
  const int released = source_->releaseBranches(keep);
  collectEvents();
  scheduleSteps();
  notify(&EngineController::branchesReleased, released);
}

void EngineController::setSamplerSettings(quint64 request, const SamplerChoice& sampler) {
  if (!source_) return;
  if (const QString error = source_->setSamplerSettings(request, sampler); !error.isEmpty())
    notify(&EngineController::engineError, error);
}

void EngineController::startComparison(const CompareCommand& command) {
  closeComparison();
  if (const QString refused = refusal(Capability::Compare); !refused.isEmpty())
    return notify(&EngineController::comparisonFailed, command.tag, refused);
  for (const CompareCommand::Lane& lane : command.lanes)
    if (!lane.kvPolicyJson.isEmpty())
      if (const QString refused = refusal(Capability::KvEviction); !refused.isEmpty())
        return notify(&EngineController::comparisonFailed, command.tag, tr("Lane %1: %2").arg(lane.name, refused));
  QString error;
  comparison_ = source_->startComparison(command, error);
  collectEvents();
  if (!comparison_) return notify(&EngineController::comparisonFailed, command.tag, error);
  scheduleSteps();
}

void EngineController::closeComparison() {
  if (!comparison_) return;
  comparison_.reset();  // releases its KV (local) or cancels its samples (remote)
  collectEvents();
  scheduleSteps();
}

void EngineController::pollComparison() {
  if (!comparison_) return;
  const ComparisonRun::Update u = comparison_->poll();
  const quint64 tag = comparison_->tag();
  if (u.started) notify(&EngineController::comparisonStarted, tag, *u.started);
  if (!u.finished && !u.failed) return;
  // The samples' last tokens reach the view before the result does.
  if (!pending_.empty()) {
    auto batch = std::make_shared<std::vector<UiEvent>>(std::move(pending_));
    pending_.clear();
    notify(&EngineController::eventsReady, batch);
  }
  if (u.failed) {
    comparison_.reset();
    notify(&EngineController::comparisonFailed, tag, *u.failed);
  } else {
    notify(&EngineController::comparisonFinished, tag, u.json, u.csv);
  }
}

void EngineController::scoreText(const ScoreCommand& command) {
  QString refused = refusal(Capability::Score);
  if (refused.isEmpty() && !command.basePath.isEmpty()) refused = refusal(Capability::ScoreBase);
  if (!refused.isEmpty()) return notify(&EngineController::scoreFailed, command.tag, refused);
  QString error;
  const QString json = source_->score(command, error);
  if (!error.isEmpty()) return notify(&EngineController::scoreFailed, command.tag, error);
  notify(&EngineController::scoreFinished, command.tag, json);
}

void EngineController::inspect(const InspectCommand& command) {
  if (const QString refused = refusal(Capability::Inspect); !refused.isEmpty())
    return notify(&EngineController::inspectFailed, command.tag, refused);
  QString error;
  const QString json = source_->inspect(command, error);
  // The steps it ran (its own prefill, other requests' tokens) reach the UI first.
  collectEvents();
  scheduleSteps();
  if (!error.isEmpty()) return notify(&EngineController::inspectFailed, command.tag, error);
  notify(&EngineController::inspectFinished, command.tag, json);
}

void EngineController::exportTrace(const QString& path, const QString& format, const QString& branchesJson) {
  if (!source_) return notify(&EngineController::exportFinished, path, tr("Nothing to export: no model is loaded."));
  if (const QString refused = refusal(Capability::TraceExport); !refused.isEmpty())
    return notify(&EngineController::exportFinished, path, refused);
  notify(&EngineController::exportFinished, path, source_->exportTrace(path, format, branchesJson));
}

void EngineController::openTrace(const QString& path) {
  UiModelInfo info;
  UiEventBatch events;
  QString error;
  if (!readTraceForReplay(path, info, events, error)) return notify(&EngineController::traceOpenFailed, path, error);
  notify(&EngineController::traceOpened, info, events);
}

void EngineController::startServing(const QString& host, int port, const QString& apiKey) {
  if (const QString refused = source_ ? refusal(Capability::Serve) : tr("Load a model before serving it.");
      !refused.isEmpty())
    return notify(&EngineController::servingFailed, refused);
  stopServingNow(false);
  QString error;
  // From handler threads: a queued call is the thread-safe way into this thread.
  serving_ = Serving::start(
      static_cast<LocalEngineSource&>(*source_), host, port, apiKey,
      [this] { commands_->post([this] { serviceHub(); }, Mailbox::Delivery::Queued); }, error);
  if (!serving_) return notify(&EngineController::servingFailed, error);
  notify(&EngineController::servingStarted, serving_->address());
}

void EngineController::stopServing() { stopServingNow(true); }

void EngineController::stopServingNow(bool announce) {
  if (!serving_) return;
  serving_.reset();
  collectEvents();  // the cancellations
  scheduleSteps();
  if (announce) notify(&EngineController::servingStopped);
}

void EngineController::serviceHub() {
  if (!serving_) return;
  serving_->service();
  collectEvents();
  scheduleSteps();
}

void EngineController::collectEvents() {
  if (!source_) return;
  QStringList warnings;
  source_->drain(pending_, warnings);
  for (const QString& w : warnings) notify(&EngineController::engineError, w);
  pollComparison();
}

void EngineController::scheduleSteps() {
  numIdleSteps_ = 0;
  busy_ = busy_ || hasWork();
  if (source_ && !source_->steps()) {  // nothing to step: the flush timer drains the source
    if (!flushTimer_->isActive()) flushTimer_->start();
    return;
  }
  if (!hasWork()) {  // nothing to step: hand over what is pending now and stay asleep
    flushTimer_->stop();
    flush();
    return;
  }
  if (!flushTimer_->isActive()) flushTimer_->start();
  if (!paused_.load() && !stepTimer_->isActive()) stepTimer_->start();
}

bool EngineController::stepOnce() {
  if (!source_ || !source_->steps()) return false;
  QElapsedTimer timer;
  timer.start();
  QString error;
  const bool did = source_->step(error);
  stepMs_ += static_cast<double>(timer.nsecsElapsed()) / 1e6;
  timer.restart();
  collectEvents();
  translateMs_ += static_cast<double>(timer.nsecsElapsed()) / 1e6;
  if (!error.isEmpty()) {
    if (serving_) serving_->failAll(error);
    notify(&EngineController::engineError, error);
    return false;
  }
  return did;
}

void EngineController::runSteps() {
  // Several small steps per tick keep per-tick overhead low for tiny models, while
  // returning to the event loop every few ms lets commands (cancel, sliders) in.
  QElapsedTimer budget;
  budget.start();
  int idleSteps = numIdleSteps_;
  while (!paused_.load() && hasWork() && budget.elapsed() < 8) {
    // A step that runs nothing is normal once (it preempted, or failed a
    // request that can never start); several in a row with work left would
    // only spin. The engine reports such a request itself, so this is a guard.
    idleSteps = stepOnce() ? 0 : idleSteps + 1;
    if (idleSteps > 3) break;
  }
  numIdleSteps_ = idleSteps;
  const bool stalled = idleSteps > 3;
  if (paused_.load() || !hasWork() || stalled) {
    stepTimer_->stop();
    flush();
    if (source_) {
      QStringList warnings;
      source_->flushTrace(warnings);
      for (const QString& w : warnings) notify(&EngineController::engineError, w);
    }
    // Idle: nothing wakes this thread until the next command.
    flushTimer_->stop();
    if (stalled)
      notify(&EngineController::engineError,
             tr("The engine has requests it cannot run (KV pool full?). Release old branches."));
  }
}

void EngineController::flush() {
  if (source_ && !source_->steps()) collectEvents();  // a remote source's events arrive on their own
  if (!pending_.empty()) {
    auto batch = std::make_shared<std::vector<UiEvent>>(std::move(pending_));
    pending_.clear();
    notify(&EngineController::eventsReady, batch);
  }
  // Work ended since the last look: the panels may settle.
  if (busy_ && !hasWork()) {
    busy_ = false;
    notify(&EngineController::idle);
  }
}

bool EngineController::hasWork() const { return source_ && source_->hasWork(); }

}  // namespace gbui
