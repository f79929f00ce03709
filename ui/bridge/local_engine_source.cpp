// LocalEngineSource: loading, requests, steps and events of a local gb::Engine.
// Translation of engine values into ui_events.h values is engine_translation.cpp;
// comparisons and scoring are local_engine_analysis.cpp.
#include "local_engine_source.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QLockFile>
#include <QStandardPaths>
#include <algorithm>
#include <atomic>

#include "engine_translation.h"
#include "trace_spool.h"

#include "backend/kv_pool_sizing.h"
#include "core/atomic_file.h"
#include "kv/kv_policy.h"
#include "runtime/engine.h"
#include "runtime/make_backend.h"
#include "runtime/make_trace_header.h"
#include "speculative/speculative_config.h"
#include "speculative/speculative_decoder.h"
#include "trace/background_trace_writer.h"
#include "trace/chrome_trace.h"
#include "trace/trace_jsonl.h"

namespace gbui {

namespace {

QString traceSpoolDir() {
  return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/traces");
}

// KV types: "K/V" names, each falling back to F32 where the backend's attention
// does not read it. "" on success, else the parser's message.
QString chooseKvTypes(const QString& kvTypes, const std::vector<gb::WeightType>& readable, gb::KvTypes& out) {
  const QStringList names = kvTypes.split('/');
  for (int i = 0; i < 2; ++i) {
    gb::WeightType& t = i == 0 ? out.k : out.v;
    if (i < names.size() && !names[i].isEmpty()) {
      auto parsed = gb::parse_kv_type(names[i].toStdString(), i == 0 ? "K type" : "V type");
      if (!parsed) return qstr(parsed.error().message);
      t = *parsed;
    }
    if (std::find(readable.begin(), readable.end(), t) == readable.end()) t = gb::WeightType::F32;
  }
  return {};
}

// The request's KV eviction (GenerationRequest::kv_policy, kv_shadow) from the
// codec's checked choice: the engine resolves the policy again at submit and
// refuses what this model or backend cannot do (its message reaches the chat).
gb::Status applyKvPolicy(const KvPolicyChoice& choice, gb::GenerationRequest& request) {
  if (!choice.ok()) return gb::make_error(choice.error.toStdString());
  auto kind = gb::kv_policy_from_name(choice.policy.toStdString());
  if (!kind) return kind.error();
  request.kv_policy.kind = *kind;
  if (!request.kv_policy.active()) return {};
  request.kv_policy.budget = choice.budget;
  request.kv_policy.sinks = choice.sinks;
  request.kv_shadow = choice.shadow;
  return {};
}

}  // namespace

LocalEngineSource::~LocalEngineSource() = default;

std::unique_ptr<LocalEngineSource> LocalEngineSource::open(const LoadCommand& command,
                                                           const std::function<bool(int)>& progress, QString& error) {
  gb::LoadOptions options;
  options.context_length = command.contextLength;
  // The loader reads every page with progress; a false return stops it between chunks.
  int lastPercent = -1;
  bool cancelled = false;
  options.progress = [&](double fraction) {
    const int percent = static_cast<int>(fraction * 100.0);
    if (percent != lastPercent && !progress(lastPercent = percent)) cancelled = true;
    return !cancelled;
  };
  auto model = gb::load_model(command.path.toStdString(), options);
  if (!model) {
    error = cancelled ? QString() : qstr(model.error().message);
    return nullptr;
  }
  auto tokenizer = gb::load_tokenizer(**model, "");
  if (!tokenizer) {
    error = qstr(tokenizer.error().message);
    return nullptr;
  }
  // The device policy is the engine's (make_backend); anything but "cpu" or "cuda" means auto.
  gb::BackendOptions backendOptions;
  backendOptions.device = gb::parse_device(command.device.toStdString()).value_or(gb::Device::Auto);
  backendOptions.bf16_matmuls = command.bf16Matmuls;
  auto backend = gb::make_backend(*model, backendOptions);
  if (!backend) {
    error = qstr(backend.error().message);
    return nullptr;
  }
  gb::EngineConfig config;
  if (error = chooseKvTypes(command.kvTypes, (*backend)->kv_types(), config.kv_types); !error.isEmpty()) return nullptr;
  // The context: the one asked for, else the model's if its KV fits the memory
  // budget, else the largest that does; a pool of a few such contexts (room to
  // show sharing and branches), fewer where they do not fit.
  config.max_context = command.contextLength;
  config.kv_full_contexts = 4;
  // Self drafting writes drafted positions to lookahead blocks of the pool; room
  // for a few drafting requests at the default K bound (more decode plainly).
  config.num_scratch_blocks =
      kSelfDraftSeqs * gb::self_draft_scratch_blocks(gb::SpeculativeConfig{}.k_max, config.block_size);
  config.max_retained = kMaxKeptBranches;
  auto engine = std::make_unique<gb::Engine>(*model, *tokenizer, std::move(*backend), config);
  if (gb::Status s = engine->start(); !s.ok()) {
    error = qstr(s.error().message);
    return nullptr;
  }
  std::unique_ptr<LocalEngineSource> source(new LocalEngineSource);
  source->model_ = *model;
  source->tokenizer_ = *tokenizer;
  source->engine_ = std::move(engine);
  source->numScratchBlocks_ = config.num_scratch_blocks;
  source->vocab_ = vocabularyTexts(*source->tokenizer_);
  source->startTraceSpool(source->openWarnings_);
  return source;
}

QString LocalEngineSource::refusal(Capability) const { return {}; }  // a local engine can do everything asked

UiModelInfo LocalEngineSource::info() const {
  UiModelInfo out = modelInfo(*model_, *tokenizer_, *engine_, numScratchBlocks_);
  out.vocab = vocab_;
  return out;
}

SubmitResult LocalEngineSource::submit(const SubmitCommand& command) {
  SubmitResult out;
  if (!command.sampler.ok()) {
    out.error = command.sampler.error;
    return out;
  }
  gb::SamplerSettings settings = *command.sampler.settings;
  settings.max_tokens = command.turn.maxTokens;
  gb::GenerationRequest request;
  if (command.turn.chat) {
    gb::ChatRequest chat = renderChatRequest(*model_, *tokenizer_, command.turn.messages, command.turn.format, settings);
    out.prompt = toUiPrompt(command.turn.tag, chat, *tokenizer_, engine_->max_context());
    request = std::move(chat.request);
  } else {
    request.sampling = std::move(settings);
    request.prompt_ids = tokenizer_->encode(command.turn.prompt.toStdString(), true);
  }
  request.retain_kv = true;  // so any token can be branched later
  // An edited or regenerated turn forks the earlier request that shares the
  // longest token prefix with this prompt (KV reused up to it).
  for (quint64 k : command.turn.branchFrom) request.branch_from.push_back(gb::RequestId{k});
  if (!command.speculative.isEmpty()) {
    auto spec = gb::parse_speculative_spec(command.speculative.toStdString());
    if (!spec) {
      out.error = qstr(spec.error().message);
      return out;
    }
    request.speculative = std::move(*spec);
  }
  if (gb::Status st = applyKvPolicy(command.kvPolicy, request); !st) {
    out.error = qstr(st.error().message);
    return out;
  }
  auto id = engine_->submit(std::move(request));
  if (!id) out.error = qstr(id.error().message);
  else out.request = id->value;
  return out;
}

SubmitResult LocalEngineSource::fork(const ForkCommand& command) {
  SubmitResult out;
  std::optional<gb::TokenId> forced;
  if (command.forcedToken >= 0) forced = command.forcedToken;
  auto id = engine_->fork(gb::RequestId{command.parent}, command.numTokens, forced, command.maxTokens);
  if (!id) out.error = qstr(id.error().message);
  else out.request = id->value;
  return out;
}

void LocalEngineSource::cancel(quint64 request) { engine_->cancel(gb::RequestId{request}); }

void LocalEngineSource::release(quint64 request) { engine_->release(gb::RequestId{request}); }

int LocalEngineSource::releaseBranches(const QVector<quint64>& keep) {
  int released = 0;
  for (gb::RequestId id : engine_->retained_requests())
    if (!keep.contains(id.value)) released += engine_->release(id) ? 1 : 0;
  return released;
}

QString LocalEngineSource::setSamplerSettings(quint64 request, const SamplerChoice& sampler) {
  // A slider moved just as the request finished: nothing is left to sample.
  if (!engine_->is_live(gb::RequestId{request})) return {};
  if (!sampler.ok()) return sampler.error;
  gb::Status s = engine_->set_sampler_settings(gb::RequestId{request}, *sampler.settings);
  return s.ok() ? QString() : qstr(s.error().message);
}

bool LocalEngineSource::step(QString& error) {
  auto did = engine_->step();
  if (!did) {
    error = qstr(did.error().message);
    return false;
  }
  return *did;
}

bool LocalEngineSource::hasWork() const { return engine_->has_work(); }

void LocalEngineSource::drain(std::vector<UiEvent>& out, QStringList& warnings) {
  warnings.append(std::exchange(openWarnings_, {}));
  std::vector<gb::TraceEvent> events = engine_->drain_events();
  out.reserve(out.size() + events.size());
  for (const gb::TraceEvent& e : events) out.push_back(toUiEvent(e, vocab_));
  for (auto& [id, observer] : observers_) observer(events);
  // Last: the spool takes the events themselves (its thread writes them).
  if (spool_) {
    if (gb::Status st = spool_->append(std::move(events)); !st) {
      warnings << QCoreApplication::translate("gbui::LocalEngineSource", "The session trace is no longer recorded: %1")
                      .arg(qstr(st.error().message));
      spool_.reset();
      spoolFailed_ = true;
    }
  }
}

int LocalEngineSource::observe(Observer observer) {
  observers_.emplace_back(nextObserver_, std::move(observer));
  return nextObserver_++;
}

void LocalEngineSource::unobserve(int id) {
  std::erase_if(observers_, [id](const auto& o) { return o.first == id; });
}

void LocalEngineSource::startTraceSpool(QStringList& warnings) {
  const QString dir = traceSpoolDir();
  QDir().mkpath(dir);
  QDir d(dir);
  // Earlier sessions' files go, oldest first, beyond the size cap; this
  // process's own and other running processes' stay (trace_spool.h).
  pruneTraceSpools(dir, traceSpoolCapBytes(), QStringLiteral("-%1-").arg(QCoreApplication::applicationPid()));
  auto header = gb::make_trace_header(*model_, tokenizer_.get(), "", gb::SamplerSettings{}, false);
  if (!header) return;
  header->kv_block_size = engine_->block_size();
  header->kv_num_blocks = engine_->num_pool_blocks();
  header->kv_types = gb::kv_types_name(engine_->kv_plan().types);
  // Time, process and a per-process sequence number: two sources of one
  // process (two windows, or a model reopened) that start a spool in the same
  // second must not share a file.
  static std::atomic<int> sequence{0};
  const QString path = d.filePath(QStringLiteral("session-%1-%2-%3.jsonl")
                                      .arg(QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-hhmmss")))
                                      .arg(QCoreApplication::applicationPid())
                                      .arg(sequence.fetch_add(1)));
  auto spool = gb::BackgroundTraceWriter::open(QFile::encodeName(path).toStdString(), *header);
  if (!spool) {
    warnings << QCoreApplication::translate("gbui::LocalEngineSource", "The session trace is not recorded: %1")
                    .arg(qstr(spool.error().message));
    spoolFailed_ = true;
    return;
  }
  spool_ = std::move(*spool);
  spoolLock_ = std::make_unique<QLockFile>(spoolLockPath(path));
  spoolLock_->setStaleLockTime(0);  // a live writer's lock never goes stale
  if (!spoolLock_->tryLock(0)) spoolLock_.reset();  // the process marker still protects it
}

void LocalEngineSource::flushTrace(QStringList& warnings) {
  if (!spool_) return;
  if (gb::Status st = spool_->flush(); !st) {
    warnings << QCoreApplication::translate("gbui::LocalEngineSource", "The session trace is no longer recorded: %1")
                    .arg(qstr(st.error().message));
    spool_.reset();
    spoolFailed_ = true;
  }
}

QString LocalEngineSource::exportTrace(const QString& path, const QString& format, const QString& branchesJson) {
  const auto tr = [](const char* text) { return QCoreApplication::translate("gbui::LocalEngineSource", text); };
  auto header = gb::make_trace_header(*model_, tokenizer_.get(), "", gb::SamplerSettings{}, false);
  if (!header) return qstr(header.error().message);
  header->kv_block_size = engine_->block_size();
  header->kv_num_blocks = engine_->num_pool_blocks();
  header->kv_types = gb::kv_types_name(engine_->kv_plan().types);
  header->branches = branchesJson.toStdString();
  // The events come back from the spool (the session's events are not kept in
  // memory); the export's header names the branch tree as it is now.
  if (!spool_)
    return spoolFailed_ ? tr("The session trace could not be recorded (see the earlier error).")
                        : tr("Nothing to export: no session trace.");
  QStringList ignored;  // a flush failure shows up as the read's error below
  flushTrace(ignored);
  const std::string spoolPath = spool_ ? spool_->path() : std::string();
  if (format != QLatin1String("chrome")) {
    // The spool's event lines are already canonical: the export is the new
    // header line and those lines, copied without parsing them.
    auto text = gb::read_whole_file(spoolPath);
    if (!text) return qstr(text.error().message);
    const size_t firstEnd = text->find('\n');
    std::string out = gb::trace_header_line(*header) + "\n";
    if (firstEnd != std::string::npos) out.append(*text, firstEnd + 1, std::string::npos);
    const gb::Status s = gb::write_file_atomically(path.toStdString(), out);
    return s.ok() ? QString() : qstr(s.error().message);
  }
  auto spooled = gb::read_trace_jsonl(spoolPath);
  if (!spooled) return qstr(spooled.error().message);
  const gb::Status s = gb::write_chrome_trace(path.toStdString(), *header, spooled->events);
  return s.ok() ? QString() : qstr(s.error().message);
}

}  // namespace gbui
