// EngineController: sampler comparisons, text scoring and branch release (the
// Compare view's, the Score view's and the Branches panel's commands). Part of the bridge, so it sees engine
// headers; the rest of the UI gets JSON text and request ids.
#include <QStringList>

#include "engine_controller.h"
#include "engine_controller_state.h"
#include "runtime/comparison_json.h"
#include "runtime/make_backend.h"
#include "runtime/text_score_json.h"
#include "runtime/text_scorer.h"
#include "server/remote_score_json.h"

namespace gbui {

void EngineController::release(quint64 request) {
  if (!state_->engine) return;
  state_->engine->release(gb::RequestId{request});
  collectEvents();
  scheduleSteps();  // starts the flush timer, so the release reaches the UI
}

void EngineController::closeComparison() {
  if (state_->remote && state_->remoteComparison) {
    for (const auto& [request, where] : state_->remoteComparison->requestSlots) state_->remote->cancel(request);
    state_->remoteComparison.reset();
  }
  if (!state_->engine || !state_->comparison) return;
  std::unique_ptr<gb::Comparison> c = std::move(state_->comparison);
  c->close(*state_->engine);
  collectEvents();
  scheduleSteps();
}

void EngineController::startComparison(quint64 tag, const QString& prompt, const QStringList& laneNames,
                                       const QStringList& laneJson, int samples, quint64 seed, bool crn,
                                       int maxTokens, const QVector<UiChatMessage>& chat, const QString& chatFormat) {
  closeComparison();
  if (state_->remote) return startComparisonRemote(tag, prompt, laneNames, laneJson, samples, seed, maxTokens, chat);
  if (!state_->engine) return notify(&EngineController::comparisonFailed, tag, tr("No model is loaded."));
  gb::ComparisonSpec spec;
  for (int i = 0; i < laneNames.size() && i < laneJson.size(); ++i) {
    auto settings = gb::sampler_settings_from_json(laneJson[i].toStdString(), "lane " + laneNames[i].toStdString());
    if (!settings) {
      notify(&EngineController::comparisonFailed, tag, QString::fromStdString(settings.error().message));
      return;
    }
    spec.lanes.push_back({laneNames[i].toStdString(), *settings});
  }
  std::string promptText = prompt.toStdString();
  if (!chat.isEmpty()) {
    // The same rendering as a chat turn (the engine's ChatFormatter).
    gb::ChatRequest rendered = renderChatRequest(*state_->model, *state_->tokenizer, chat, chatFormat, gb::SamplerSettings{});
    spec.prompt_ids = std::move(rendered.request.prompt_ids);
    spec.stop_token_ids = rendered.request.sampling.stop_token_ids;
    spec.isolation = rendered.request.isolation;
    promptText = rendered.prompt.text;
  } else {
    spec.prompt_ids = state_->tokenizer->encode(promptText, true);
  }
  spec.num_samples = samples;
  spec.seed = seed;
  spec.crn = crn;
  spec.max_tokens = maxTokens;
  auto c = gb::Comparison::start(*state_->engine, std::move(spec));
  if (!c) {
    collectEvents();
    notify(&EngineController::comparisonFailed, tag, QString::fromStdString(c.error().message));
    return;
  }
  state_->comparison = std::move(*c);
  state_->comparisonTag = tag;
  state_->comparisonPrompt = promptText;
  collectEvents();
  scheduleSteps();
}

void EngineController::advanceComparison() {
  gb::Comparison& c = *state_->comparison;
  const bool was_forked = c.forked(), was_done = c.done();
  if (gb::Status st = c.advance(*state_->engine); !st) {
    std::unique_ptr<gb::Comparison> failed = std::move(state_->comparison);
    failed->close(*state_->engine);
    notify(&EngineController::comparisonFailed, state_->comparisonTag, QString::fromStdString(st.error().message));
    return;
  }
  if (c.forked() && !was_forked) {
    QVector<quint64> ids;
    for (const gb::ComparisonSample& s : c.samples()) ids.push_back(s.request.value);
    notify(&EngineController::comparisonStarted, state_->comparisonTag, ids);
  }
  if (c.done() && !was_done) {
    gb::ComparisonJsonOptions options;
    options.prompt_text = state_->comparisonPrompt;
    options.token_records = false;  // the view has the records from the event stream
    notify(&EngineController::comparisonFinished, state_->comparisonTag, QString::fromStdString(gb::comparison_to_json(c, options)),
                            QString::fromStdString(gb::comparison_to_csv(c)));
  }
}

// A remote engine scores through echo + logprobs (RemoteClient::score) on a
// client of its own; this thread (the engine thread, never the GUI's) waits.
void EngineController::scoreTextRemote(quint64 tag, const QString& text, const QString& basePath) {
  if (!basePath.isEmpty())
    return notify(&EngineController::scoreFailed, tag, tr("A base model (KL) is not available with a remote engine."));
  auto client = gb::server::RemoteClient::connect(state_->remoteOptions);
  if (!client) return notify(&EngineController::scoreFailed, tag, QString::fromStdString(client.error().message));
  auto scored = (*client)->score(text.toStdString(), state_->remoteOptions.top_logprobs);
  if (!scored) return notify(&EngineController::scoreFailed, tag, QString::fromStdString(scored.error().message));
  notify(&EngineController::scoreFinished, tag, QString::fromStdString(
                              gb::server::remote_score_to_json(*scored, state_->remoteOptions.url, (*client)->model())));
}

void EngineController::scoreText(quint64 tag, const QString& text, const QString& basePath) {
  if (state_->remote) return scoreTextRemote(tag, text, basePath);
  if (!state_->model) return notify(&EngineController::scoreFailed, tag, tr("No model is loaded."));
  std::shared_ptr<const gb::Model> base;
  if (!basePath.isEmpty()) {
    gb::LoadOptions options;
    options.context_length = state_->model->config.context_length;
    auto model = gb::load_model(basePath.toStdString(), options);
    if (!model) return notify(&EngineController::scoreFailed, tag, QString::fromStdString(model.error().message));
    auto tokenizer = gb::load_tokenizer(**model, "");
    if (!tokenizer) return notify(&EngineController::scoreFailed, tag, QString::fromStdString(tokenizer.error().message));
    if (gb::Status st = gb::check_comparable_vocabularies(*state_->tokenizer, state_->model->path, **tokenizer,
                                                          basePath.toStdString());
        !st)
      return notify(&EngineController::scoreFailed, tag, QString::fromStdString(st.error().message));
    base = *model;
  }
  const std::vector<gb::TokenId> ids = state_->tokenizer->encode(text.toStdString(), true);
  // Scoring runs on the host (the loaded engine keeps the device's memory); the
  // CPU device never fails to make a backend.
  const gb::BackendOptions host{gb::Device::Cpu, 0};
  std::unique_ptr<gb::Backend> backend = gb::make_backend(state_->model, host).value();
  std::unique_ptr<gb::Backend> baseBackend = base ? gb::make_backend(base, host).value() : nullptr;
  // K/V in the engine's types (what its generations saw), for the base too:
  // the KL is then the models' difference alone (glassbox-cli score
  // --base-kv-type-k/-v measures a KV type against F32).
  gb::ScoreOptions scoreOptions;
  scoreOptions.k_type = scoreOptions.base_k_type = state_->engine->kv_plan().types.k;
  scoreOptions.v_type = scoreOptions.base_v_type = state_->engine->kv_plan().types.v;
  auto score = gb::score_tokens(*state_->model, *backend, base.get(), baseBackend.get(), ids, scoreOptions);
  if (!score) return notify(&EngineController::scoreFailed, tag, QString::fromStdString(score.error().message));
  gb::TextScoreJsonOptions options;
  options.model_path = state_->model->path;
  options.base_path = basePath.toStdString();
  notify(&EngineController::scoreFinished, tag, QString::fromStdString(gb::text_score_to_json(*score, *state_->tokenizer, options)));
}

}  // namespace gbui
