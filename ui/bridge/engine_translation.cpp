// Engine values -> ui_events.h values (engine_translation.h).
#include "engine_translation.h"

#include <QCoreApplication>
#include <algorithm>
#include <type_traits>

#include "engine_event_mirror.h"

#include "backend/kv_pool_sizing.h"
#include "core/utf8.h"
#include "model/architecture.h"
#include "model/weight_report.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"
#include "trace/trace_jsonl.h"

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
  if (const auto& g = e.record.grammar) {
    auto info = std::make_shared<UiGrammarInfo>();
    info->massAllowed = g->mass_allowed;
    info->numAllowed = g->num_allowed;
    info->forced = g->forced;
    info->state = QString::fromStdString(g->state);
    t.grammar = std::move(info);
  }
  if (const auto& r = e.record.routing) {
    auto info = std::make_shared<UiRouting>();
    info->perToken = r->experts_per_token;
    info->experts = QVector<int>(r->experts.begin(), r->experts.end());
    info->weights = QVector<float>(r->weights.begin(), r->weights.end());
    t.routing = std::move(info);
  }
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

QVector<QString> vocabularyTexts(const gb::Tokenizer& tok) {
  QVector<QString> out;
  out.reserve(tok.vocab_size());
  // Byte-level tokens that hold part of a character read as <0xE2>, not U+FFFD.
  for (int i = 0; i < tok.vocab_size(); ++i) out.push_back(QString::fromStdString(gb::utf8_readable(tok.token_bytes(i))));
  return out;
}

UiModelInfo modelInfo(const gb::Model& m, const gb::Tokenizer& tokenizer, gb::Engine& engine, int numScratchBlocks) {
  const gb::ModelConfig& c = m.config;
  UiModelInfo info;
  info.path = QString::fromStdString(m.path);
  info.name = QString::fromStdString(m.name);
  const std::string_view format = gb::model_format_name(m.format);
  info.format = QString::fromUtf8(format.data(), static_cast<qsizetype>(format.size()));
  info.architecture = QString::fromStdString(c.architecture);
  info.chatTemplate = QString::fromStdString(m.chat_template);
  const std::string_view kind = tokenizer.kind();
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
  info.activeParameters = m.active_parameters();
  info.numExperts = c.num_experts;
  info.numExpertsUsed = c.num_experts_used;
  info.weightBytes = m.weight_bytes();
  info.contextLength = engine.max_context();
  info.vocabSize = c.vocab_size;
  info.numLayers = c.num_layers;
  info.numKvHeads = c.num_kv_heads;
  info.headDim = c.head_dim;
  const gb::KvPlan& plan = engine.kv_plan();
  info.kvBytesPerTokenFormula = plan.bytes_per_token;
  info.kvMainLayers = c.num_layers - plan.num_window_layers;
  info.kvWindow = plan.window;
  info.kvWindowLayers = plan.num_window_layers;
  // The window pool as allocated: the plan's blocks and the same self-draft
  // reserve as the main pool (kv/scheduler.h).
  info.kvWindowBlocks = engine.kv_usage().num_window_blocks;
  info.kvWindowBytesPerToken = plan.window_bytes_per_token;
  info.kvWindowPoolBytes = plan.window_bytes_per_token * static_cast<size_t>(info.kvWindowBlocks) *
                           static_cast<size_t>(engine.block_size());
  info.kvTypeK = QString::fromStdString(std::string(gb::kernels::kv_type_name(plan.types.k)));
  info.kvTypeV = QString::fromStdString(std::string(gb::kernels::kv_type_name(plan.types.v)));
  info.kvRowBytesK = gb::kernels::kv_row_bytes(plan.types.k, c.kv_dim());
  info.kvRowBytesV = gb::kernels::kv_row_bytes(plan.types.v, c.kv_dim());
  info.kvBudgetBytes = plan.budget.for_kv();
  info.kvResidentBytes = engine.backend().kv_resident_bytes();
  info.kvPlanNote = QString::fromStdString(plan.note);
  info.kvPoolBytes = engine.backend().kv_pool_bytes();
  info.numBlocks = engine.num_pool_blocks();  // the lookahead reserve included
  info.numScratchBlocks = numScratchBlocks;
  info.blockSize = engine.block_size();
  const gb::DeviceInfo d = engine.backend().device_info();
  info.deviceBackend = QString::fromStdString(d.backend);
  info.deviceName = QString::fromStdString(d.name);
  info.deviceMemoryUsed = d.memory_used_bytes;
  info.deviceMemoryTotal = d.memory_total_bytes;
  info.numThreads = d.num_threads;
  info.bf16Matmuls = d.bf16_matmuls;
  info.bosId = tokenizer.bos_id();
  info.eosId = tokenizer.eos_id();
  return info;
}

UiChatPrompt toUiPrompt(quint64 tag, const gb::ChatRequest& chat, const gb::Tokenizer& tokenizer, int contextLength) {
  UiChatPrompt p;
  p.tag = tag;
  p.text = QString::fromStdString(chat.prompt.text);
  p.format = QString::fromStdString(chat.prompt.format);
  p.warning = QString::fromStdString(chat.prompt.warning);
  p.templateHash = QString::fromStdString(chat.prompt.template_hash);
  p.contextLength = contextLength;
  for (gb::TokenId id : chat.request.prompt_ids) {
    p.ids.push_back(id);
    p.pieces.push_back(QString::fromStdString(tokenizer.token_piece(id)));
    p.control.push_back(tokenizer.is_control(id));
  }
  return p;
}

gb::ChatRequest renderChatRequest(const gb::Model& model, const gb::Tokenizer& tokenizer,
                                  const QVector<UiChatMessage>& messages, const QString& format,
                                  const gb::SamplerSettings& settings) {
  std::optional<gb::BuiltinChatFormat> forced;
  if (format != QLatin1String("model")) forced = gb::builtin_chat_format_from_name(format.toStdString());
  const gb::ChatFormatter formatter = gb::chat_formatter_for(model, tokenizer, forced);
  std::vector<gb::ChatMessage> history;
  for (const UiChatMessage& m : messages) {
    if (m.role == QLatin1String("assistant")) history.push_back(gb::assistant_history_message(m.text.toStdString()));
    else history.push_back({m.role.toStdString(), m.text.toStdString(), {}});
  }
  return gb::make_chat_request(formatter, tokenizer, history, settings);
}

bool readTraceForReplay(const QString& path, UiModelInfo& info, UiEventBatch& batch, QString& error) {
  const auto tr = [](const char* text) { return QCoreApplication::translate("gbui::EngineController", text); };
  auto file = gb::read_trace_jsonl(path.toStdString());
  if (!file) {
    error = QString::fromStdString(file.error().message);
    return false;
  }
  const gb::TraceHeader& h = file->header;
  const gb::ModelConfig& c = h.model.config;
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
  batch = std::move(events);
  return true;
}

}  // namespace gbui
