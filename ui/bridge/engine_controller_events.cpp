// EngineController, part two: engine values -> ui_events.h values, the model
// info summary, and trace export / import. Runs on the controller's thread.
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QStandardPaths>
#include <atomic>
#include <map>
#include <type_traits>

#include "backend/kv_pool_sizing.h"
#include "engine_controller_state.h"
#include "trace_spool.h"
#include "core/utf8.h"
#include "engine_event_mirror.h"
#include "model/architecture.h"
#include "model/weight_report.h"
#include "runtime/make_trace_header.h"

namespace gbui {
namespace {

QString tokenText(const QVector<QString>& vocab, int id) {
  if (id >= 0 && id < vocab.size()) return vocab[id];
  return QStringLiteral("#%1").arg(id);
}

UiToken toUiToken(const gb::TokenSampledEvent& e, const QVector<QString>& vocab) {
  UiToken t;
  mirror::mirror(e, t);
  mirror::mirror(e.record, t);
  t.piece = tokenText(vocab, e.token);
  for (UiCandidate& c : t.top) c.text = tokenText(vocab, c.id);
  return t;
}

}  // namespace

UiEvent toUiEvent(const gb::TraceEvent& event, const QVector<QString>& vocab) {
  UiEvent out;
  out.seq = event.seq;
  out.tUs = event.t_us;
  out.body = std::visit(
      [&](const auto& e) -> UiEventBody {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, gb::TokenSampledEvent>) {
          UiToken t = toUiToken(e, vocab);
          t.tMs = static_cast<double>(event.t_us) / 1000.0;
          return t;
        } else {
          typename mirror::MirrorOf<E>::U u;
          mirror::mirror(e, u);
          if constexpr (std::is_same_v<E, gb::KvTraceEvent>) mirror::mirror(e.kv, u);
          return u;
        }
      },
      event.body);
  return out;
}

void EngineController::collectEvents() {
  if (!state_->engine) return;
  std::vector<gb::TraceEvent> events = state_->engine->drain_events();
  pending_.reserve(pending_.size() + events.size());
  for (const gb::TraceEvent& e : events) {
    pending_.push_back(toUiEvent(e, state_->vocab));
    if (state_->comparison) state_->comparison->observe(e);
  }
  if (state_->hub) {  // server requests' tokens go to their HTTP clients too
    for (const gb::TraceEvent& e : events) state_->hub->on_event(e, *state_->tokenizer);
    state_->hub->update_gauges(*state_->engine);
  }
  // Last: the spool takes the events themselves (its thread writes them).
  if (state_->spool) {
    if (gb::Status st = state_->spool->append(std::move(events)); !st) {
      notify(&EngineController::engineError, tr("The session trace is no longer recorded: %1").arg(QString::fromStdString(st.error().message)));
      state_->spool.reset();
      state_->spoolFailed = true;
    }
  }
  if (state_->comparison) advanceComparison();
}

QVector<QString> EngineController::vocabularyTexts() const {
  QVector<QString> out;
  const gb::Tokenizer& tok = *state_->tokenizer;
  out.reserve(tok.vocab_size());
  // Byte-level tokens that hold part of a character read as <0xE2>, not U+FFFD.
  for (int i = 0; i < tok.vocab_size(); ++i) out.push_back(QString::fromStdString(gb::utf8_readable(tok.token_bytes(i))));
  return out;
}

UiModelInfo EngineController::modelInfo() const {
  const gb::Model& m = *state_->model;
  const gb::ModelConfig& c = m.config;
  UiModelInfo info;
  info.path = QString::fromStdString(m.path);
  info.name = QString::fromStdString(m.name);
  const std::string_view format = gb::model_format_name(m.format);
  info.format = QString::fromUtf8(format.data(), static_cast<qsizetype>(format.size()));
  info.architecture = QString::fromStdString(c.architecture);
  info.chatTemplate = QString::fromStdString(m.chat_template);
  const std::string_view kind = state_->tokenizer->kind();
  info.tokenizerKind = QString::fromUtf8(kind.data(), static_cast<qsizetype>(kind.size()));
  info.shapes = {{"dim", QString::number(c.dim)},           {"hidden_dim", QString::number(c.hidden_dim)},
                 {"layers", QString::number(c.num_layers)}, {"heads", QString::number(c.num_heads)},
                 {"kv heads", QString::number(c.num_kv_heads)}, {"head_dim", QString::number(c.head_dim)},
                 {"rope_dim", QString::number(c.rope_dim)}, {"vocab", QString::number(c.vocab_size)},
                 {"rope base", QString::number(c.rope_freq_base)}, {"rms eps", QString::number(c.rms_eps)},
                 {"tied classifier", c.tied_classifier ? "yes" : "no"},
                 {"block", QString::fromStdString(gb::describe_block(c))},
                 {"rope", QString::fromStdString(gb::describe_rope(c))},
                 {"sliding window", QString::fromStdString(gb::describe_sliding_window(c))},
                 {"soft-caps", QString::fromStdString(gb::describe_softcaps(c))}};
  for (const auto& [k, v] : m.metadata) info.metadata.push_back({QString::fromStdString(k), QString::fromStdString(v)});
  // One row per weight type (largest share first), then the whole model.
  for (const gb::WeightTypeRow& r : gb::weight_type_table(m))
    info.tensorTypes.push_back({QString::fromStdString(std::string(gb::dtype_info(r.type).name)),
                                QStringLiteral("%1 tensors, %2 bytes, %3 bpw")
                                    .arg(r.num_tensors)
                                    .arg(r.num_bytes)
                                    .arg(r.bits_per_weight(), 0, 'f', 2)});
  info.tensorTypes.push_back({QStringLiteral("total"), QString::fromStdString(gb::weight_type_label(m))});
  info.numParameters = m.num_parameters();
  info.weightBytes = m.weight_bytes();
  info.contextLength = state_->engine->max_context();
  info.vocabSize = c.vocab_size;
  info.numLayers = c.num_layers;
  info.numKvHeads = c.num_kv_heads;
  info.headDim = c.head_dim;
  const gb::KvPlan& plan = state_->engine->kv_plan();
  info.kvBytesPerTokenFormula = plan.bytes_per_token;
  info.kvMainLayers = c.num_layers - plan.num_window_layers;
  info.kvWindow = plan.window;
  info.kvWindowLayers = plan.num_window_layers;
  // The window pool as allocated: the plan's blocks and the same self-draft
  // reserve as the main pool (kv/scheduler.h).
  const gb::KvCacheManager* windowKv = state_->engine->scheduler().window_kv_cache();
  info.kvWindowBlocks = windowKv ? windowKv->num_blocks() : 0;
  info.kvWindowBytesPerToken = plan.window_bytes_per_token;
  info.kvWindowPoolBytes = windowKv ? plan.window_bytes_per_token * static_cast<size_t>(windowKv->num_blocks()) *
                                          static_cast<size_t>(windowKv->block_size())
                                    : 0;
  info.kvTypeK = QString::fromStdString(std::string(gb::kernels::kv_type_name(plan.types.k)));
  info.kvTypeV = QString::fromStdString(std::string(gb::kernels::kv_type_name(plan.types.v)));
  info.kvRowBytesK = gb::kernels::kv_row_bytes(plan.types.k, c.kv_dim());
  info.kvRowBytesV = gb::kernels::kv_row_bytes(plan.types.v, c.kv_dim());
  info.kvBudgetBytes = plan.budget.for_kv();
  info.kvResidentBytes = state_->engine->backend().kv_resident_bytes();
  info.kvPlanNote = QString::fromStdString(plan.note);
  info.kvPoolBytes = state_->engine->backend().kv_pool_bytes();
  info.numBlocks = state_->engine->num_pool_blocks();  // the lookahead reserve included
  info.numScratchBlocks = state_->numScratchBlocks;
  info.blockSize = state_->engine->scheduler().kv_cache().snapshot().block_size;
  const gb::DeviceInfo d = state_->engine->backend().device_info();
  info.deviceBackend = QString::fromStdString(d.backend);
  info.deviceName = QString::fromStdString(d.name);
  info.deviceMemoryUsed = d.memory_used_bytes;
  info.deviceMemoryTotal = d.memory_total_bytes;
  info.numThreads = d.num_threads;
  info.bf16Matmuls = d.bf16_matmuls;
  info.bosId = state_->tokenizer->bos_id();
  info.eosId = state_->tokenizer->eos_id();
  info.vocab = state_->vocab;
  return info;
}

namespace {
QString traceSpoolDir() {
  return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/traces");
}
}  // namespace

void EngineController::startTraceSpool() {
  const QString dir = traceSpoolDir();
  QDir().mkpath(dir);
  QDir d(dir);
  // Earlier sessions' files go, oldest first, beyond the size cap; this
  // process's own and other running processes' stay (trace_spool.h).
  pruneTraceSpools(dir, traceSpoolCapBytes(), QStringLiteral("-%1-").arg(QCoreApplication::applicationPid()));
  auto header = gb::make_trace_header(*state_->model, state_->tokenizer.get(), "", gb::SamplerSettings{}, false);
  if (!header) return;
  header->kv_block_size = state_->engine->block_size();
  header->kv_num_blocks = state_->engine->num_pool_blocks();
  header->kv_types = gb::kv_types_name(state_->engine->kv_plan().types);
  // Time, process and a per-process sequence number: two controllers of one
  // process (two windows, or a model reopened) that start a spool in the same
  // second must not share a file (the second truncated the first's, and an
  // export then missed the first window's requests).
  static std::atomic<int> sequence{0};
  const QString path = d.filePath(QStringLiteral("session-%1-%2-%3.jsonl")
                                      .arg(QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-hhmmss")))
                                      .arg(QCoreApplication::applicationPid())
                                      .arg(sequence.fetch_add(1)));
  auto spool = gb::BackgroundTraceWriter::open(QFile::encodeName(path).toStdString(), *header);
  if (!spool) {
    notify(&EngineController::engineError, tr("The session trace is not recorded: %1").arg(QString::fromStdString(spool.error().message)));
    state_->spoolFailed = true;
    return;
  }
  state_->spool = std::move(*spool);
  state_->spoolLock = std::make_unique<QLockFile>(spoolLockPath(path));
  state_->spoolLock->setStaleLockTime(0);  // a live writer's lock never goes stale
  if (!state_->spoolLock->tryLock(0)) state_->spoolLock.reset();  // the process marker still protects it
}

void EngineController::flushTraceSpool() {
  if (!state_->spool) return;
  if (gb::Status st = state_->spool->flush(); !st) {
    notify(&EngineController::engineError, tr("The session trace is no longer recorded: %1").arg(QString::fromStdString(st.error().message)));
    state_->spool.reset();
    state_->spoolFailed = true;
  }
}

void EngineController::exportTrace(const QString& path, const QString& format, const QString& branchesJson) {
  if (!state_->model) {
    notify(&EngineController::exportFinished, path, state_->remote ? tr("A remote engine writes no engine trace (the API does not show its steps).")
                                             : tr("Nothing to export: no model is loaded."));
    return;
  }
  auto header = gb::make_trace_header(*state_->model, state_->tokenizer.get(), "", gb::SamplerSettings{}, false);
  if (!header) {
    notify(&EngineController::exportFinished, path, QString::fromStdString(header.error().message));
    return;
  }
  if (state_->engine) {
    header->kv_block_size = state_->engine->block_size();
    header->kv_num_blocks = state_->engine->num_pool_blocks();
    header->kv_types = gb::kv_types_name(state_->engine->kv_plan().types);
  }
  header->branches = branchesJson.toStdString();
  // The events come back from the spool (the session's events are not kept in
  // memory); the export's header names the branch tree as it is now.
  if (!state_->spool) {
    notify(&EngineController::exportFinished, path, state_->spoolFailed ? tr("The session trace could not be recorded (see the earlier error).")
                                                  : tr("Nothing to export: no session trace."));
    return;
  }
  flushTraceSpool();
  const std::string spoolPath = state_->spool ? state_->spool->path() : std::string();
  if (format != QLatin1String("chrome")) {
    // The spool's event lines are already canonical: the export is the new
    // header line and those lines, copied without parsing them.
    auto text = gb::read_whole_file(spoolPath);
    if (!text) {
      notify(&EngineController::exportFinished, path, QString::fromStdString(text.error().message));
      return;
    }
    const size_t firstEnd = text->find('\n');
    std::string out = gb::trace_header_line(*header) + "\n";
    if (firstEnd != std::string::npos) out.append(*text, firstEnd + 1, std::string::npos);
    const gb::Status s = gb::write_file_atomically(path.toStdString(), out);
    notify(&EngineController::exportFinished, path, s.ok() ? QString() : QString::fromStdString(s.error().message));
    return;
  }
  auto spooled = gb::read_trace_jsonl(spoolPath);
  if (!spooled) {
    notify(&EngineController::exportFinished, path, QString::fromStdString(spooled.error().message));
    return;
  }
  const gb::Status s = gb::write_chrome_trace(path.toStdString(), *header, spooled->events);
  notify(&EngineController::exportFinished, path, s.ok() ? QString() : QString::fromStdString(s.error().message));
}

void EngineController::openTrace(const QString& path) {
  auto file = gb::read_trace_jsonl(path.toStdString());
  if (!file) {
    notify(&EngineController::traceOpenFailed, path, QString::fromStdString(file.error().message));
    return;
  }
  const gb::TraceHeader& h = file->header;
  const gb::ModelConfig& c = h.model.config;
  UiModelInfo info;
  info.path = QString::fromStdString(h.model.path);
  info.name = QString::fromStdString(h.model.name) + tr(" (replay)");
  info.format = QString::fromStdString(h.model.format);
  info.architecture = QString::fromStdString(c.architecture);
  info.tokenizerKind = QString::fromStdString(h.tokenizer.kind);
  info.shapes = {{"dim", QString::number(c.dim)}, {"hidden_dim", QString::number(c.hidden_dim)},
                 {"layers", QString::number(c.num_layers)}, {"heads", QString::number(c.num_heads)},
                 {"kv heads", QString::number(c.num_kv_heads)}, {"head_dim", QString::number(c.head_dim)},
                 {"vocab", QString::number(c.vocab_size)}};
  info.branchTreeJson = QString::fromStdString(h.branches);
  info.metadata = {{"trace", path}, {"created", QString::fromStdString(h.created)},
                   {"engine version", QString::fromStdString(h.engine_version)},
                   {"model sha256", QString::fromStdString(h.model.sha256)}};
  // A last line cut short (a session that crashed while writing): skipped, said here.
  for (const std::string& w : file->warnings) info.metadata.push_back({tr("warning"), QString::fromStdString(w)});
  info.contextLength = c.context_length;
  info.vocabSize = c.vocab_size;
  info.numLayers = c.num_layers;
  info.numKvHeads = c.num_kv_heads;
  info.headDim = c.head_dim;
  info.kvBytesPerTokenFormula = c.kv_bytes_per_token(4);
  info.kvMainLayers = c.num_layers;
  info.kvRowBytesK = info.kvRowBytesV = static_cast<quint64>(c.kv_dim()) * 4;
  // The recorded KV types ("k/v"; absent in older traces: F32).
  if (const auto slash = h.kv_types.find('/'); slash != std::string::npos) {
    auto k = gb::parse_kv_type(h.kv_types.substr(0, slash), "K type");
    auto v = gb::parse_kv_type(h.kv_types.substr(slash + 1), "V type");
    if (k && v && gb::kv_types_unsupported(c, {*k, *v}).empty()) {
      info.kvTypeK = QString::fromStdString(h.kv_types.substr(0, slash));
      info.kvTypeV = QString::fromStdString(h.kv_types.substr(slash + 1));
      info.kvRowBytesK = gb::kernels::kv_row_bytes(*k, c.kv_dim());
      info.kvRowBytesV = gb::kernels::kv_row_bytes(*v, c.kv_dim());
      info.kvBytesPerTokenFormula = gb::kv_bytes_per_token(c, {*k, *v});
    }
  }
  // Traces written before the header carried it: EngineConfig's default.
  info.blockSize = h.kv_block_size > 0 ? h.kv_block_size : 16;
  info.deviceBackend = tr("replay");
  info.bosId = h.tokenizer.bos_id;
  info.eosId = h.tokenizer.eos_id;
  // Token texts come from the model's tokenizer when the file is still there;
  // otherwise the panels show ids.
  if (auto model = gb::load_model(h.model.path)) {
    if (auto tok = gb::load_tokenizer(**model, "")) {
      for (int i = 0; i < (*tok)->vocab_size(); ++i) info.vocab.push_back(QString::fromStdString((*tok)->token_bytes(i)));
    }
  }
  auto events = std::make_shared<std::vector<UiEvent>>();
  events->reserve(file->events.size());
  for (const gb::TraceEvent& e : file->events) {
    events->push_back(toUiEvent(e, info.vocab));
    if (const auto* step = std::get_if<gb::StepEvent>(&e.body)) info.numBlocks = std::max(info.numBlocks, step->num_blocks_total);
  }
  notify(&EngineController::traceOpened, info, events);
}

}  // namespace gbui
