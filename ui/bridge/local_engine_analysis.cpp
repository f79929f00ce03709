// LocalEngineSource: sampler comparisons (gb::Comparison on the loaded engine),
// teacher-forced scoring (on CPU backends of its own, so the engine's KV
// pool is untouched) and inside-the-model reports (on the loaded engine, whose
// prefix cache serves the inspected prefix). The Compare, Score and Inside
// panels' commands.
#include <QCoreApplication>

#include "engine_translation.h"
#include "local_engine_source.h"

#include "runtime/comparison.h"
#include "runtime/comparison_json.h"
#include "runtime/engine.h"
#include "runtime/inside.h"
#include "runtime/make_backend.h"
#include "runtime/text_score_json.h"
#include "runtime/text_scorer.h"
#include "tokenizer/tokenizer.h"

namespace gbui {
namespace {

// One comparison on the local engine: it watches the engine's events (the
// source's observer) and advances between batches: forking the lanes once the
// prompt is in, finishing when every sample has. Closing releases its KV.
class LocalComparisonRun final : public ComparisonRun {
 public:
  LocalComparisonRun(LocalEngineSource& source, std::unique_ptr<gb::Comparison> comparison, quint64 tag,
                     std::string promptText)
      : source_(source), comparison_(std::move(comparison)), tag_(tag), promptText_(std::move(promptText)) {
    observer_ = source_.observe([this](const std::vector<gb::TraceEvent>& events) {
      if (!comparison_) return;
      for (const gb::TraceEvent& e : events) comparison_->observe(e);
    });
  }
  ~LocalComparisonRun() override {
    source_.unobserve(observer_);
    if (comparison_) comparison_->close(source_.engine());
  }

  quint64 tag() const override { return tag_; }

  Update poll() override {
    Update u;
    if (!comparison_ || ended_) return u;
    gb::Comparison& c = *comparison_;
    const bool wasForked = c.forked(), wasDone = c.done();
    if (gb::Status st = c.advance(source_.engine()); !st) {
      comparison_->close(source_.engine());
      comparison_.reset();
      ended_ = true;
      u.failed = qstr(st.error().message);
      return u;
    }
    if (c.forked() && !wasForked) {
      QVector<quint64> ids;
      for (const gb::ComparisonSample& s : c.samples()) ids.push_back(s.request.value);
      u.started = ids;
    }
    if (c.done() && !wasDone) {
      gb::ComparisonJsonOptions options;
      options.prompt_text = promptText_;
      options.token_records = false;  // the view has the records from the event stream
      u.finished = true;
      u.json = qstr(gb::comparison_to_json(c, options));
      u.csv = qstr(gb::comparison_to_csv(c));
      ended_ = true;
    }
    return u;
  }

 private:
  LocalEngineSource& source_;
  std::unique_ptr<gb::Comparison> comparison_;
  const quint64 tag_;
  const std::string promptText_;
  int observer_ = -1;
  bool ended_ = false;
};

}  // namespace

std::unique_ptr<ComparisonRun> LocalEngineSource::startComparison(const CompareCommand& command, QString& error) {
  gb::ComparisonSpec spec;
  for (const CompareCommand::Lane& lane : command.lanes) {
    if (!lane.sampler.ok()) {
      error = QStringLiteral("lane %1: %2").arg(lane.name, lane.sampler.error);
      return nullptr;
    }
    gb::ComparisonLane out{lane.name.toStdString(), *lane.sampler.settings, {}};
    if (!lane.kvPolicyJson.isEmpty()) {
      auto policy = gb::kv_policy_from_json(lane.kvPolicyJson.toStdString());
      if (!policy) {
        error = QStringLiteral("lane %1: %2").arg(lane.name, qstr(policy.error().message));
        return nullptr;
      }
      out.kv_policy = *policy;
    }
    spec.lanes.push_back(std::move(out));
  }
  std::string promptText = command.prompt.toStdString();
  if (!command.chat.isEmpty()) {
    // The same rendering as a chat turn (the engine's ChatFormatter).
    gb::ChatRequest rendered = renderChatRequest(*model_, *tokenizer_, command.chat, command.chatFormat, gb::SamplerSettings{});
    spec.prompt_ids = std::move(rendered.request.prompt_ids);
    spec.stop_token_ids = rendered.request.sampling.stop_token_ids;
    spec.isolation = rendered.request.isolation;
    promptText = rendered.prompt.text;
  } else {
    spec.prompt_ids = tokenizer_->encode(promptText, true);
  }
  spec.num_samples = command.samples;
  spec.seed = command.seed;
  spec.crn = command.crn;
  spec.max_tokens = command.maxTokens;
  auto c = gb::Comparison::start(*engine_, std::move(spec));
  if (!c) {
    error = qstr(c.error().message);
    return nullptr;
  }
  return std::make_unique<LocalComparisonRun>(*this, std::move(*c), command.tag, std::move(promptText));
}

QString LocalEngineSource::score(const ScoreCommand& command, QString& error) {
  std::shared_ptr<const gb::Model> base;
  if (!command.basePath.isEmpty()) {
    gb::LoadOptions options;
    options.context_length = model_->config.context_length;
    auto model = gb::load_model(command.basePath.toStdString(), options);
    if (!model) return error = qstr(model.error().message), QString();
    auto tokenizer = gb::load_tokenizer(**model, "");
    if (!tokenizer) return error = qstr(tokenizer.error().message), QString();
    if (gb::Status st = gb::check_comparable_vocabularies(*tokenizer_, model_->path, **tokenizer,
                                                          command.basePath.toStdString());
        !st)
      return error = qstr(st.error().message), QString();
    base = *model;
  }
  const std::vector<gb::TokenId> ids = tokenizer_->encode(command.text.toStdString(), true);
  // Scoring runs on the host (the loaded engine keeps the device's memory); the
  // CPU device never fails to make a backend.
  const gb::BackendOptions host{gb::Device::Cpu, 0};
  std::unique_ptr<gb::Backend> backend = gb::make_backend(model_, host).value();
  std::unique_ptr<gb::Backend> baseBackend = base ? gb::make_backend(base, host).value() : nullptr;
  // K/V in the engine's types (what its generations saw), for the base too:
  // the KL is then the models' difference alone (glassbox-cli score
  // --base-kv-type-k/-v measures a KV type against F32).
  gb::ScoreOptions scoreOptions;
  scoreOptions.k_type = scoreOptions.base_k_type = engine_->kv_plan().types.k;
  scoreOptions.v_type = scoreOptions.base_v_type = engine_->kv_plan().types.v;
  auto scored = gb::score_tokens(*model_, *backend, base.get(), baseBackend.get(), ids, scoreOptions);
  if (!scored) return error = qstr(scored.error().message), QString();
  gb::TextScoreJsonOptions options;
  options.model_path = model_->path;
  options.base_path = command.basePath.toStdString();
  return qstr(gb::text_score_to_json(*scored, *tokenizer_, options));
}

// On the loaded engine: the prefix the engine still holds (a conversation just
// generated) comes from its prefix cache, so an inspection of a chat token
// recomputes at most the last partial block. Engine::inspect steps the engine
// meanwhile; its internal request's events reach the session like any other.
QString LocalEngineSource::inspect(const InspectCommand& command, QString& error) {
  gb::InsideOptions options;
  if (gb::Status st = gb::parse_inside_layers(command.layers.toStdString(), options); !st)
    return error = QStringLiteral("Layers: %1").arg(qstr(st.error().message)), QString();
  options.top_k = command.topK;
  std::vector<gb::TokenId> ids;
  ids.reserve(static_cast<size_t>(command.tokens.size()));
  for (int id : command.tokens) {
    if (id < 0 || id >= vocab_.size())
      return error = QStringLiteral("Token id %1 is not in the model's vocabulary.").arg(id), QString();
    ids.push_back(static_cast<gb::TokenId>(id));
  }
  auto report = engine_->inspect(ids, command.position, options);
  if (!report) return error = qstr(report.error().message), QString();
  return qstr(gb::inside_to_json(*report, *tokenizer_));
}

}  // namespace gbui
