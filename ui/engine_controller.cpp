// EngineController: commands in, UiEvent batches out. See engine_controller.h.
// Translation of engine values into ui_events.h values lives in
// engine_controller_events.cpp (same class, split to keep files small).
#include "engine_controller.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <QThread>
#include <map>

#include "engine_controller_state.h"

#include "backend/kv_pool_sizing.h"
#include "runtime/make_backend.h"

namespace gbui {

EngineController::EngineController(QObject* parent)
    : QObject(parent), commands_(new Mailbox(this)), outbox_(new Mailbox), state_(std::make_unique<State>()) {
  stepTimer_ = new QTimer(this);
  stepTimer_->setInterval(0);
  connect(stepTimer_, &QTimer::timeout, this, &EngineController::runSteps);
  flushTimer_ = new QTimer(this);
  flushTimer_->setInterval(flushIntervalMs());
  connect(flushTimer_, &QTimer::timeout, this, &EngineController::flush);
}

EngineController::~EngineController() {
  stopServingNow(false);
  // Signals not yet delivered name this object: they go with it. The outbox
  // lives on the constructing thread, so it is deleted there.
  outbox_->close();
  outbox_->deleteLater();
}

QString EngineController::defaultSamplerJson() {
  return QString::fromStdString(gb::sampler_settings_to_json(gb::SamplerSettings{}, 2));
}

QString EngineController::validateSamplerJson(const QString& json) {
  auto parsed = gb::sampler_settings_from_json(json.toStdString(), "sampler settings");
  return parsed ? QString() : QString::fromStdString(parsed.error().message);
}

QString EngineController::canonicalSamplerJson(const QString& json, int indent) {
  auto parsed = gb::sampler_settings_from_json(json.toStdString(), "sampler settings");
  return parsed ? QString::fromStdString(gb::sampler_settings_to_json(*parsed, indent)) : QString();
}

QString EngineController::validateSpeculativeSpec(const QString& spec) {
  if (spec.isEmpty()) return {};
  auto parsed = gb::parse_speculative_spec(spec.toStdString());
  return parsed ? QString() : QString::fromStdString(parsed.error().message);
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

void EngineController::loadModel(const QString& path, const QString& device, int contextLength, int generation,
                                 bool bf16Matmuls, const QString& kvTypes) {
  if (generation < 0) generation = loadGeneration_.load();
  if (generation != loadGeneration_.load()) return;  // cancelled before it started
  gb::LoadOptions options;
  options.context_length = contextLength;
  // The loader reads every page with progress; a Cancel (a newer generation)
  // stops it between chunks.
  int lastPercent = -1;
  options.progress = [&](double fraction) {
    if (loadGeneration_.load() != generation) return false;
    const int percent = static_cast<int>(fraction * 100.0);
    if (percent != lastPercent) notify(&EngineController::loadProgress, lastPercent = percent);
    return true;
  };
  auto model = gb::load_model(path.toStdString(), options);
  if (!model) {
    notify(&EngineController::modelLoadFailed, path, QString::fromStdString(model.error().message));
    return;
  }
  auto tokenizer = gb::load_tokenizer(**model, "");
  if (!tokenizer) {
    notify(&EngineController::modelLoadFailed, path, QString::fromStdString(tokenizer.error().message));
    return;
  }
  // The device policy is the engine's (make_backend); anything but "cpu" or
  // "cuda" means auto.
  if (device == "cuda" && !gb::cuda_backend_built()) {
    notify(&EngineController::modelLoadFailed, path, tr("This build of Glassbox has no CUDA backend."));
    return;
  }
  gb::BackendOptions backendOptions;
  backendOptions.device = gb::parse_device(device.toStdString()).value_or(gb::Device::Auto);
  backendOptions.bf16_matmuls = bf16Matmuls;
  auto backend = gb::make_backend(*model, backendOptions);
  if (!backend) {
    notify(&EngineController::modelLoadFailed, path, QString::fromStdString(backend.error().message));
    return;
  }
  gb::EngineConfig config;
  // KV types: "K/V" names, each falling back to F32 where the backend's
  // attention does not read it (CUDA reads F32 only).
  const QStringList kvNames = kvTypes.split('/');
  const std::vector<gb::WeightType> readable = (*backend)->kv_types();
  for (int i = 0; i < 2; ++i) {
    gb::WeightType& t = i == 0 ? config.kv_types.k : config.kv_types.v;
    if (i < kvNames.size() && !kvNames[i].isEmpty()) {
      auto parsed = gb::parse_kv_type(kvNames[i].toStdString(), i == 0 ? "K type" : "V type");
      if (!parsed) {
        notify(&EngineController::modelLoadFailed, path, QString::fromStdString(parsed.error().message));
        return;
      }
      t = *parsed;
    }
    if (std::find(readable.begin(), readable.end(), t) == readable.end()) t = gb::WeightType::F32;
  }
  // The context: the one asked for, else the model's if its KV fits the host's
  // memory, else the largest that does; a pool of a few such contexts (room to
  // show sharing and branches), fewer where they do not fit. Committed as used.
  config.max_context = contextLength;
  config.kv_full_contexts = 4;
  // Self drafting writes drafted positions to lookahead blocks of the pool; room
  // for a few drafting requests at the default K bound (more decode plainly).
  config.num_scratch_blocks =
      kSelfDraftSeqs * gb::self_draft_scratch_blocks(gb::SpeculativeConfig{}.k_max, config.block_size);
  config.max_retained = kMaxKeptBranches;
  auto engine = std::make_unique<gb::Engine>(*model, *tokenizer, std::move(*backend), config);
  if (gb::Status s = engine->start(); !s.ok()) {
    notify(&EngineController::modelLoadFailed, path, QString::fromStdString(s.error().message));
    return;
  }
  if (generation != loadGeneration_.load()) return;  // cancelled while loading: drop it
  stopServingNow(true);  // the server served the old engine
  stepTimer_->stop();
  pending_.clear();
  state_->reset();
  state_->model = *model;
  state_->tokenizer = *tokenizer;
  state_->engine = std::move(engine);
  state_->numScratchBlocks = config.num_scratch_blocks;
  state_->vocab = vocabularyTexts();
  startTraceSpool();
  notify(&EngineController::modelLoaded, modelInfo());
}

bool EngineController::localSettings(quint64 tag, const QString& samplerJson, int maxTokens,
                                     gb::SamplerSettings& out) {
  if (!state_->engine) {
    notify(&EngineController::requestFailed, tag, tr("No model is loaded."));
    return false;
  }
  auto settings = gb::sampler_settings_from_json(samplerJson.toStdString(), "sampler settings");
  if (!settings) {
    notify(&EngineController::requestFailed, tag, QString::fromStdString(settings.error().message));
    return false;
  }
  out = std::move(*settings);
  out.max_tokens = maxTokens;
  return true;
}

void EngineController::submitLocal(quint64 tag, gb::GenerationRequest request, const QVector<quint64>& branchFrom,
                                   const QString& speculativeSpec) {
  request.retain_kv = true;  // so any token can be branched later
  // An edited or regenerated turn forks the earlier request that shares the
  // longest token prefix with this prompt (KV reused up to it).
  for (quint64 k : branchFrom) request.branch_from.push_back(gb::RequestId{k});
  if (!speculativeSpec.isEmpty()) {
    auto spec = gb::parse_speculative_spec(speculativeSpec.toStdString());
    if (!spec) {
      notify(&EngineController::requestFailed, tag, QString::fromStdString(spec.error().message));
      return;
    }
    request.speculative = std::move(*spec);
  }
  auto id = state_->engine->submit(std::move(request));
  collectEvents();
  if (!id) {
    flush();
    notify(&EngineController::requestFailed, tag, QString::fromStdString(id.error().message));
    return;
  }
  notify(&EngineController::requestSubmitted, tag, id->value);
  scheduleSteps();
}

void EngineController::submit(quint64 tag, const QString& prompt, const QString& samplerJson, int maxTokens,
                              const QString& speculativeSpec, const QVector<quint64>& branchFrom) {
  if (!speculativeSpec.isEmpty() && refuseRemote(tag, tr("Speculative decoding"))) return;
  if (submitRemote(tag, prompt, samplerJson, maxTokens)) return;
  gb::GenerationRequest request;
  if (!localSettings(tag, samplerJson, maxTokens, request.sampling)) return;
  request.prompt_ids = state_->tokenizer->encode(prompt.toStdString(), true);
  submitLocal(tag, std::move(request), branchFrom, speculativeSpec);
}

void EngineController::fork(quint64 tag, quint64 parent, int numTokens, int forcedToken, int maxTokens) {
  if (refuseRemote(tag, tr("Branching"))) return;
  if (!state_->engine) {
    notify(&EngineController::requestFailed, tag, tr("No model is loaded."));
    return;
  }
  std::optional<gb::TokenId> forced;
  if (forcedToken >= 0) forced = forcedToken;
  auto id = state_->engine->fork(gb::RequestId{parent}, numTokens, forced, maxTokens);
  collectEvents();
  if (!id) {
    flush();
    notify(&EngineController::requestFailed, tag, QString::fromStdString(id.error().message));
    return;
  }
  notify(&EngineController::requestSubmitted, tag, id->value);
  scheduleSteps();
}

void EngineController::cancel(quint64 request) {
  if (state_->remote) state_->remote->cancel(request);  // its stream is closed; the finish arrives as an event
  if (!state_->engine) return;
  state_->engine->cancel(gb::RequestId{request});
  collectEvents();
  scheduleSteps();
}

void EngineController::releaseBranches(const QVector<quint64>& keep) {
  if (!state_->engine) {
    if (state_->remote) notify(&EngineController::branchesReleased, 0);  // a remote keeps no KV for us
    return;
  }
  int released = 0;
  for (gb::RequestId id : state_->engine->retained_requests())
    if (!keep.contains(id.value)) released += state_->engine->release(id) ? 1 : 0;
  collectEvents();
  scheduleSteps();
  notify(&EngineController::branchesReleased, released);
}

void EngineController::setSamplerSettings(quint64 request, const QString& samplerJson) {
  if (!state_->engine) return;
  // A slider moved just as the request finished: nothing is left to sample.
  if (!state_->engine->scheduler().find(gb::RequestId{request})) return;
  auto settings = gb::sampler_settings_from_json(samplerJson.toStdString(), "sampler settings");
  if (!settings) {
    notify(&EngineController::engineError, QString::fromStdString(settings.error().message));
    return;
  }
  if (gb::Status s = state_->engine->set_sampler_settings(gb::RequestId{request}, *settings); !s.ok())
    notify(&EngineController::engineError, QString::fromStdString(s.error().message));
}

void EngineController::scheduleSteps() {
  numIdleSteps_ = 0;
  if (state_->remote) {  // nothing to step: the flush timer drains the remote session
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
  if (!state_->engine) return false;
  QElapsedTimer timer;
  timer.start();
  auto did = state_->engine->step();
  stepMs_ += static_cast<double>(timer.nsecsElapsed()) / 1e6;
  timer.restart();
  collectEvents();
  translateMs_ += static_cast<double>(timer.nsecsElapsed()) / 1e6;
  if (!did) {
    if (state_->hub) state_->hub->fail_all(*state_->engine, "engine failure: " + did.error().message, true);
    notify(&EngineController::engineError, QString::fromStdString(did.error().message));
    return false;
  }
  return *did;
}

void EngineController::runSteps() {
  // Several small steps per tick keep per-tick overhead low for tiny models, while
  // returning to the event loop every few ms lets commands (cancel, sliders) in.
  QElapsedTimer budget;
  budget.start();
  int idleSteps = numIdleSteps_;
  while (!paused_.load() && state_->engine && state_->engine->has_work() && budget.elapsed() < 8) {
    // A step that runs nothing is normal once (it preempted, or failed a
    // request that can never start); several in a row with work left would
    // only spin. The engine reports such a request itself, so this is a guard.
    idleSteps = stepOnce() ? 0 : idleSteps + 1;
    if (idleSteps > 3) break;
  }
  numIdleSteps_ = idleSteps;
  const bool stalled = idleSteps > 3;
  if (paused_.load() || !state_->engine || !state_->engine->has_work() || stalled) {
    stepTimer_->stop();
    flush();
    flushTraceSpool();
    // Idle: nothing wakes this thread until the next command.
    flushTimer_->stop();
    if (stalled) notify(&EngineController::engineError, tr("The engine has requests it cannot run (KV pool full?). Release old branches."));
    else if (state_->engine && !state_->engine->has_work()) notify(&EngineController::idle);
  }
}

void EngineController::flush() {
  drainRemote();
  if (pending_.empty()) return;
  auto batch = std::make_shared<std::vector<UiEvent>>(std::move(pending_));
  pending_.clear();
  notify(&EngineController::eventsReady, batch);
}

QString EngineController::kvSnapshotSummary() const {
  if (!state_->engine) return {};
  const gb::KvSnapshot snap = state_->engine->scheduler().kv_cache().snapshot();
  return QStringLiteral("%1 %2 %3 %4")
      .arg(snap.num_owned)
      .arg(snap.num_free)
      .arg(snap.num_cached)
      .arg(static_cast<int>(snap.blocks.size()));
}

QString EngineController::kvWindowSummary() const {
  if (!state_->engine) return {};
  const gb::KvSnapshot snap = state_->engine->scheduler().kv_cache().snapshot();
  return QStringLiteral("%1 %2").arg(snap.num_window_released).arg(snap.num_window_released_total);
}

QVector<int> EngineController::kvRefCounts() const {
  QVector<int> out;
  if (!state_->engine) return out;
  for (const gb::KvBlockView& b : state_->engine->scheduler().kv_cache().snapshot().blocks) out.push_back(b.ref_count);
  return out;
}

QVector<quint64> EngineController::keptRequests() const {
  QVector<quint64> out;
  if (!state_->engine) return out;
  for (gb::RequestId id : state_->engine->retained_requests()) out.push_back(id.value);
  return out;
}

bool EngineController::hasWork() const {
  if (state_->remote) return state_->remote->num_active() > 0;
  return state_->engine && state_->engine->has_work();
}

QVector<int> EngineController::tokensOf(quint64 request) const {
  QVector<int> out;
  if (!state_->engine) return out;
  const gb::Request* r = state_->engine->scheduler().find(gb::RequestId{request});
  if (!r) return out;
  for (int i = 0; i < r->num_tokens_total(); ++i) out.push_back(r->token_at(i));
  return out;
}

}  // namespace gbui
