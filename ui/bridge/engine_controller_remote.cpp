// EngineController, remote part: an OpenAI-compatible server as the engine
// (gb::server::RemoteSession). The session's threads do the network I/O; this
// thread only starts requests (which returns at once) and, on the flush timer,
// turns the session's events into the same UiEvents a local engine produces,
// so the panels need no remote branches beyond marking what is not available.
#include <QUrl>
#include <cmath>
#include <limits>

#include "engine_controller.h"
#include "engine_controller_state.h"

namespace gbui {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float probOf(float logprob) { return std::isnan(logprob) ? kNaN : std::exp(logprob); }

int localId(std::map<std::string, int>& ids, const std::string& token) {
  return ids.emplace(token, static_cast<int>(ids.size())).first->second;
}

// A remote token as a UiToken: what the API reported, nothing made up.
UiToken toUiToken(const gb::server::RemoteTokenEvent& e, std::map<std::string, int>& ids, double tMs) {
  UiToken t;
  t.remote = true;
  t.request = e.request;
  t.index = e.index;
  t.position = e.index;
  t.text = QString::fromStdString(e.token.text);
  t.piece = QString::fromStdString(e.token.token.empty() ? e.token.text : e.token.token);
  t.tokenId = localId(ids, t.piece.toStdString());
  t.probBefore = probOf(e.token.logprob);
  t.prob = kNaN;
  t.entropyBefore = t.entropyAfter = kNaN;
  t.draw = std::numeric_limits<double>::quiet_NaN();
  t.numCandidatesBefore = static_cast<int>(e.token.top.size());
  t.rank = static_cast<int>(e.token.top.size());
  for (size_t i = 0; i < e.token.top.size(); ++i) {
    UiCandidate c;
    c.text = QString::fromStdString(e.token.top[i].first);
    c.id = localId(ids, e.token.top[i].first);
    c.logit = kNaN;
    c.probBefore = probOf(e.token.top[i].second);
    if (c.id == t.tokenId && t.rank == static_cast<int>(e.token.top.size())) t.rank = static_cast<int>(i);
    t.top.push_back(std::move(c));
  }
  t.tMs = tMs;
  return t;
}

UiRemoteMetrics toUiMetrics(const gb::server::RemoteMetrics& m) {
  const auto v = [](const std::optional<double>& x) { return x ? *x : std::numeric_limits<double>::quiet_NaN(); };
  UiRemoteMetrics u;
  u.flavour = QString::fromStdString(m.flavour);
  u.numRunning = v(m.num_running);
  u.numWaiting = v(m.num_waiting);
  u.kvUsage = v(m.kv_usage);
  u.kvBlocksTotal = v(m.kv_blocks_total);
  u.kvBlocksUsed = v(m.kv_blocks_used);
  u.kvBlocksCached = v(m.kv_blocks_cached);
  u.prefixQueries = v(m.prefix_queries);
  u.prefixHits = v(m.prefix_hits);
  u.promptTokens = v(m.prompt_tokens);
  u.generationTokens = v(m.generation_tokens);
  u.preemptions = v(m.preemptions);
  return u;
}

}  // namespace

void EngineController::connectRemote(const QString& url, const QString& apiKey, int generation) {
  if (generation < 0) generation = loadGeneration_.load();
  if (generation != loadGeneration_.load()) return;
  gb::server::RemoteOptions options;
  options.url = url.trimmed().toStdString();
  options.api_key = apiKey.toStdString();
  options.top_logprobs = 20;
  auto session = gb::server::RemoteSession::connect(options);
  if (!session) {
    notify(&EngineController::modelLoadFailed, url, QString::fromStdString(session.error().message));
    return;
  }
  if (generation != loadGeneration_.load()) return;  // cancelled while connecting
  stopServingNow(true);
  stepTimer_->stop();
  pending_.clear();
  state_->reset();
  state_->model.reset();
  state_->tokenizer.reset();
  state_->vocab.clear();
  state_->remote = std::move(*session);
  options.model = state_->remote->model();
  state_->remoteOptions = options;
  UiModelInfo info;
  info.path = url;
  info.remoteUrl = url;
  info.name = QString::fromStdString(state_->remote->model());
  info.format = tr("remote (OpenAI API)");
  info.deviceBackend = tr("remote");
  info.deviceName = QUrl(url).host();
  info.metadata = {{tr("server"), url},
                   {tr("metrics"), state_->remote->metrics_flavour().empty()
                                       ? tr("none (no /metrics the workbench can read)")
                                       : QString::fromStdString(state_->remote->metrics_flavour())},
                   {tr("not available over the API"),
                    tr("token ids, logits, sampler stages, final probabilities, the random draw, entropy, KV blocks")}};
  flushTimer_->start();  // drains the session's events from now on
  notify(&EngineController::modelLoaded, info);
}

bool EngineController::refuseRemote(quint64 tag, const QString& what) {
  if (!state_->remote) return false;
  notify(&EngineController::requestFailed, tag, tr("%1 is not available with a remote engine (the OpenAI API does not offer it).").arg(what));
  return true;
}

bool EngineController::submitRemote(quint64 tag, const QString& prompt, const QString& samplerJson, int maxTokens) {
  if (!state_->remote) return false;
  auto settings = gb::sampler_settings_from_json(samplerJson.toStdString(), "sampler settings");
  if (!settings) {
    notify(&EngineController::requestFailed, tag, QString::fromStdString(settings.error().message));
    return true;
  }
  const uint64_t id = state_->remote->submit_completion(prompt.toStdString(), *settings, maxTokens);
  state_->remoteRequests[id] = {maxTokens, samplerJson, 0};
  notify(&EngineController::requestSubmitted, tag, id);
  return true;
}

bool EngineController::submitChatRemote(quint64 tag, const QVector<UiChatMessage>& messages, const QString& samplerJson,
                                        int maxTokens) {
  if (!state_->remote) return false;
  auto settings = gb::sampler_settings_from_json(samplerJson.toStdString(), "sampler settings");
  if (!settings) {
    notify(&EngineController::requestFailed, tag, QString::fromStdString(settings.error().message));
    return true;
  }
  std::vector<gb::ChatMessage> history;
  for (const UiChatMessage& m : messages) history.push_back({m.role.toStdString(), m.text.toStdString(), {}});
  // The server renders its own template: the prompt text is not known here.
  UiChatPrompt prompt;
  prompt.tag = tag;
  prompt.format = tr("remote");
  prompt.warning = tr("The server renders the conversation with its own chat template; the prompt is not shown.");
  notify(&EngineController::chatPromptReady, prompt);
  const uint64_t id = state_->remote->submit_chat(history, *settings, maxTokens);
  state_->remoteRequests[id] = {maxTokens, samplerJson, 0};
  notify(&EngineController::requestSubmitted, tag, id);
  return true;
}

void EngineController::drainRemote() {
  if (!state_->remote) return;
  bool finished = false, comparisonEnded = false;
  for (gb::server::RemoteEvent& e : state_->remote->drain()) {
    comparisonEnded = noteRemoteComparison(e) || comparisonEnded;
    UiEvent out;
    out.seq = state_->remoteSeq++;
    out.tUs = static_cast<qint64>(e.t_ms * 1000.0);
    if (const auto* s = std::get_if<gb::server::RemoteStarted>(&e.body)) {
      const auto& r = state_->remoteRequests[s->request];
      UiSubmitted u;
      u.request = s->request;
      u.maxTokens = r.maxTokens;
      u.samplerJson = r.samplerJson;
      out.body = u;
    } else if (const auto* t = std::get_if<gb::server::RemoteTokenEvent>(&e.body)) {
      // Running from the client's side: the first streamed token.
      if (state_->remoteRequests[t->request].numTokens++ == 0) {
        UiEvent admitted = out;
        admitted.body = UiAdmitted{t->request, 0, t->token.t_ms};
        pending_.push_back(std::move(admitted));
        out.seq = state_->remoteSeq++;
      }
      out.body = toUiToken(*t, state_->remoteTokenIds, e.t_ms);
    } else if (auto* f = std::get_if<gb::server::RemoteFinished>(&e.body)) {
      if (!f->error.empty()) {
        UiEvent err = out;
        err.body = UiError{f->request, QString::fromStdString(f->error)};
        pending_.push_back(std::move(err));
        out.seq = state_->remoteSeq++;
      }
      const gb::server::RemoteResult& r = f->result;
      UiFinished u;
      u.request = f->request;
      u.reason = QString::fromStdString(r.finish_reason);
      u.text = QString::fromStdString(r.text);
      u.numPromptTokens = r.num_prompt_tokens;
      u.numGenerated = r.num_generated;
      u.numCachedTokens = r.num_cached_tokens;
      u.ttftMs = r.ttft_ms;
      u.tpotMs = r.tpot_ms;
      u.e2eMs = r.e2e_ms;
      out.body = u;
      state_->remoteRequests.erase(f->request);
      finished = true;
    } else if (const auto* m = std::get_if<gb::server::RemoteMetricsSample>(&e.body)) {
      out.body = toUiMetrics(m->metrics);
    }
    pending_.push_back(std::move(out));
  }
  if (comparisonEnded) {
    // The samples' last tokens reach the view before the result does.
    auto batch = std::make_shared<std::vector<UiEvent>>(std::move(pending_));
    pending_.clear();
    if (!batch->empty()) notify(&EngineController::eventsReady, batch);
    finishRemoteComparison();
  }
  if (finished && state_->remoteRequests.empty()) notify(&EngineController::idle);
}

}  // namespace gbui
