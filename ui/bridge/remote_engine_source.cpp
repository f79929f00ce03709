// RemoteEngineSource: an OpenAI-compatible server as the engine
// (remote_engine_source.h). Its comparisons are one streamed request per
// sample (seed + j per sample, as a Glassbox or vLLM server numbers n
// choices), so their tokens fill the lane columns through the ordinary event
// stream while they arrive; the result JSON (server/remote_comparison_json.h)
// goes to the view when the last sample ends. Common random numbers,
// entropies and shared prompt blocks are not available over the API.
#include "remote_engine_source.h"

#include <QCoreApplication>
#include <QUrl>
#include <chrono>
#include <cmath>
#include <limits>

#include "runtime/comparison.h"
#include "client/remote_comparison_json.h"
#include "client/remote_score_json.h"
#include "client/remote_session.h"

namespace gbui {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float probOf(float logprob) { return std::isnan(logprob) ? kNaN : std::exp(logprob); }

int localId(std::map<std::string, int>& ids, const std::string& token) {
  return ids.emplace(token, static_cast<int>(ids.size())).first->second;
}

// A remote token as a UiToken: what the API reported, nothing made up.
UiToken remoteToken(const gb::server::RemoteTokenEvent& e, std::map<std::string, int>& ids, double tMs) {
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

UiRemoteMetrics remoteMetrics(const gb::server::RemoteMetrics& m) {
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



QString trRemote(const char* text) { return QCoreApplication::translate("gbui::RemoteEngineSource", text); }

std::vector<gb::ChatMessage> toHistory(const QVector<UiChatMessage>& messages) {
  std::vector<gb::ChatMessage> history;
  for (const UiChatMessage& m : messages) history.push_back({m.role.toStdString(), m.text.toStdString(), {}});
  return history;
}

// What the OpenAI API does not offer, in one place.
struct Refusal {
  Capability what;
  const char* message;
};
constexpr Refusal kRefusals[] = {
    {Capability::Branching, QT_TRANSLATE_NOOP("gbui::RemoteEngineSource",
                                              "Branching is not available with a remote engine (the OpenAI API does not offer it).")},
    {Capability::Speculative, QT_TRANSLATE_NOOP("gbui::RemoteEngineSource",
                                                "Speculative decoding is not available with a remote engine (the OpenAI API does not offer it).")},
    {Capability::KvEviction, QT_TRANSLATE_NOOP("gbui::RemoteEngineSource",
                                               "KV eviction (a policy other than full) is not available with a remote engine (the OpenAI API does not offer it); set the policy to full.")},
    {Capability::ScoreBase, QT_TRANSLATE_NOOP("gbui::RemoteEngineSource",
                                              "A base model (KL) is not available with a remote engine.")},
    {Capability::Inspect, QT_TRANSLATE_NOOP("gbui::RemoteEngineSource",
                                            "Inside the model is not available with a remote engine yet (it needs the Glassbox server's inspect endpoint).")},
    {Capability::Serve, QT_TRANSLATE_NOOP("gbui::RemoteEngineSource",
                                          "A remote engine cannot be served again from here; load a local model.")},
    {Capability::TraceExport, QT_TRANSLATE_NOOP("gbui::RemoteEngineSource",
                                                "A remote engine writes no engine trace (the API does not show its steps).")},
};

// The Compare view's run on the server: the samples' tokens collected from the
// session's events for the result JSON.
class RemoteComparisonRun final : public ComparisonRun {
 public:
  RemoteComparisonRun(RemoteEngineSource& source, quint64 tag) : source_(source), tag_(tag) {
    source_.setObserver([this](const gb::server::RemoteEvent& e) { note(e); });
  }
  ~RemoteComparisonRun() override {
    source_.setObserver({});
    for (const auto& [request, where] : requestSlots_) source_.cancel(request);
  }
  quint64 tag() const override { return tag_; }
  Update poll() override {
    Update u;
    if (!started_.isEmpty()) u.started = std::exchange(started_, {});
    if (failed_) {
      u.failed = *failed_;
      failed_.reset();
      ended_ = true;
    } else if (!ended_ && requestSlots_.empty()) {
      info_.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
      u.finished = true;
      u.json = QString::fromStdString(gb::server::remote_comparison_to_json(lanes_, info_));
      // No CSV: its columns are the engine's per-token records (docs/compare.md).
      ended_ = true;
    }
    return u;
  }

  std::vector<gb::server::RemoteLane> lanes_;
  std::map<uint64_t, std::pair<size_t, size_t>> requestSlots_;  // request -> (lane, sample)
  gb::server::RemoteComparisonInfo info_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  QVector<quint64> started_;

 private:
  // One session event; a failed sample ends the run (the rest are cancelled).
  void note(const gb::server::RemoteEvent& e) {
    if (const auto* t = std::get_if<gb::server::RemoteTokenEvent>(&e.body)) {
      auto slot = requestSlots_.find(t->request);
      if (slot != requestSlots_.end()) lanes_[slot->second.first].samples[slot->second.second].tokens.push_back(t->token);
      return;
    }
    const auto* f = std::get_if<gb::server::RemoteFinished>(&e.body);
    if (!f) return;
    auto slot = requestSlots_.find(f->request);
    if (slot == requestSlots_.end()) return;
    gb::server::RemoteLaneSample& s = lanes_[slot->second.first].samples[slot->second.second];
    s.text = f->result.text;
    s.finish_reason = f->result.finish_reason;
    s.e2e_ms = f->result.e2e_ms;
    const std::string lane = lanes_[slot->second.first].name;
    requestSlots_.erase(slot);
    if (!f->error.empty() && !failed_) {
      failed_ = QString::fromStdString("lane " + lane + ": " + f->error);
      for (const auto& [request, where] : requestSlots_) source_.cancel(request);
      requestSlots_.clear();
    }
  }

  RemoteEngineSource& source_;
  const quint64 tag_;
  std::optional<QString> failed_;
  bool ended_ = false;
};

}  // namespace

RemoteEngineSource::RemoteEngineSource() = default;
RemoteEngineSource::~RemoteEngineSource() = default;

std::unique_ptr<RemoteEngineSource> RemoteEngineSource::connect(const QString& url, const QString& apiKey,
                                                                QString& error) {
  auto options = std::make_unique<gb::server::RemoteOptions>();
  options->url = url.trimmed().toStdString();
  options->api_key = apiKey.toStdString();
  options->top_logprobs = 20;
  auto session = gb::server::RemoteSession::connect(*options);
  if (!session) {
    error = QString::fromStdString(session.error().message);
    return nullptr;
  }
  std::unique_ptr<RemoteEngineSource> source(new RemoteEngineSource);
  source->session_ = std::move(*session);
  options->model = source->session_->model();
  source->options_ = std::move(options);
  UiModelInfo& info = source->info_;
  info.path = url;
  info.remoteUrl = url;
  info.name = QString::fromStdString(source->session_->model());
  info.format = trRemote("remote (OpenAI API)");
  info.deviceBackend = trRemote("remote");
  info.deviceName = QUrl(url).host();
  info.metadata = {{trRemote("server"), url},
                   {trRemote("metrics"), source->session_->metrics_flavour().empty()
                                       ? trRemote("none (no /metrics the workbench can read)")
                                       : QString::fromStdString(source->session_->metrics_flavour())},
                   {trRemote("not available over the API"),
                    trRemote("token ids, logits, sampler stages, final probabilities, the random draw, entropy, KV blocks")}};
  return source;
}

QString RemoteEngineSource::refusal(Capability what) const {
  for (const Refusal& r : kRefusals)
    if (r.what == what) return trRemote(r.message);
  return {};
}

void RemoteEngineSource::noteRequest(quint64 request, int maxTokens, const QString& samplerJson) {
  requests_[request] = {maxTokens, samplerJson, 0};
}

SubmitResult RemoteEngineSource::submit(const SubmitCommand& command) {
  SubmitResult out;
  if (!command.sampler.ok()) {
    out.error = command.sampler.error;
    return out;
  }
  const TurnCommand& turn = command.turn;
  if (turn.chat) {
    // The server renders its own template: the prompt text is not known here.
    UiChatPrompt prompt;
    prompt.tag = turn.tag;
    prompt.format = trRemote("remote");
    prompt.warning = trRemote("The server renders the conversation with its own chat template; the prompt is not shown.");
    out.prompt = prompt;
    out.request = session_->submit_chat(toHistory(turn.messages), *command.sampler.settings, turn.maxTokens);
  } else {
    out.request = session_->submit_completion(turn.prompt.toStdString(), *command.sampler.settings, turn.maxTokens);
  }
  noteRequest(out.request, turn.maxTokens, command.sampler.json);
  return out;
}

SubmitResult RemoteEngineSource::fork(const ForkCommand&) { return {0, refusal(Capability::Branching), {}}; }

void RemoteEngineSource::cancel(quint64 request) { session_->cancel(request); }  // its finish arrives as an event

bool RemoteEngineSource::hasWork() const { return session_->num_active() > 0; }

void RemoteEngineSource::drain(std::vector<UiEvent>& out, QStringList&) {
  for (gb::server::RemoteEvent& e : session_->drain()) {
    if (observer_) observer_(e);
    UiEvent ev;
    ev.seq = seq_++;
    ev.tUs = static_cast<qint64>(e.t_ms * 1000.0);
    if (const auto* s = std::get_if<gb::server::RemoteStarted>(&e.body)) {
      const RequestInfo& r = requests_[s->request];
      UiSubmitted u;
      u.request = s->request;
      u.maxTokens = r.maxTokens;
      u.samplerJson = r.samplerJson;
      ev.body = u;
    } else if (const auto* t = std::get_if<gb::server::RemoteTokenEvent>(&e.body)) {
      // Running from the client's side: the first streamed token.
      if (requests_[t->request].numTokens++ == 0) {
        UiEvent admitted = ev;
        admitted.body = UiAdmitted{t->request, 0, t->token.t_ms};
        out.push_back(std::move(admitted));
        ev.seq = seq_++;
      }
      ev.body = remoteToken(*t, tokenIds_, e.t_ms);
    } else if (auto* f = std::get_if<gb::server::RemoteFinished>(&e.body)) {
      if (!f->error.empty()) {
        UiEvent err = ev;
        err.body = UiError{f->request, QString::fromStdString(f->error)};
        out.push_back(std::move(err));
        ev.seq = seq_++;
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
      ev.body = u;
      requests_.erase(f->request);
    } else if (const auto* m = std::get_if<gb::server::RemoteMetricsSample>(&e.body)) {
      ev.body = remoteMetrics(m->metrics);
    }
    out.push_back(std::move(ev));
  }
}

std::unique_ptr<ComparisonRun> RemoteEngineSource::startComparison(const CompareCommand& command, QString& error) {
  auto run = std::make_unique<RemoteComparisonRun>(*this, command.tag);
  for (const CompareCommand::Lane& lane : command.lanes) {
    if (!lane.sampler.ok()) {
      error = QStringLiteral("lane %1: %2").arg(lane.name, lane.sampler.error);
      return nullptr;
    }
    run->lanes_.push_back({lane.name.toStdString(), *lane.sampler.settings, {}});
  }
  if (run->lanes_.empty() || command.samples < 1) {
    error = trRemote("A comparison needs lanes and samples.");
    return nullptr;
  }
  const std::vector<gb::ChatMessage> history = toHistory(command.chat);
  for (size_t i = 0; i < run->lanes_.size(); ++i) {
    gb::server::RemoteLane& lane = run->lanes_[i];
    const uint64_t laneSeed = gb::comparison_sample_seed(command.seed, 0, gb::lane_stream_key(lane.settings));
    for (int j = 0; j < command.samples; ++j) {
      gb::SamplerSettings one = lane.settings;
      one.seed = laneSeed + static_cast<uint64_t>(j);
      const uint64_t id = command.chat.isEmpty()
                              ? session_->submit_completion(command.prompt.toStdString(), one, command.maxTokens)
                              : session_->submit_chat(history, one, command.maxTokens);
      noteRequest(id, command.maxTokens, command.lanes[static_cast<int>(i)].sampler.json);
      run->requestSlots_[id] = {i, static_cast<size_t>(j)};
      lane.samples.push_back({one.seed, {}, {}, {}, 0.0});
      run->started_.push_back(id);
    }
  }
  run->info_ = {session_->url(), session_->model(), command.chat.isEmpty() ? command.prompt.toStdString() : std::string(),
                command.seed, command.maxTokens, 0.0};
  return run;
}

// Scoring through echo + logprobs (RemoteClient::score) on a client of its own;
// the controller's thread (never the GUI's) waits.
QString RemoteEngineSource::score(const ScoreCommand& command, QString& error) {
  auto client = gb::server::RemoteClient::connect(*options_);
  if (!client) return error = QString::fromStdString(client.error().message), QString();
  auto scored = (*client)->score(command.text.toStdString(), options_->top_logprobs);
  if (!scored) return error = QString::fromStdString(scored.error().message), QString();
  return QString::fromStdString(gb::server::remote_score_to_json(*scored, options_->url, (*client)->model()));
}

// The capability table refuses it (the controller asks refusal() first).
QString RemoteEngineSource::inspect(const InspectCommand&, QString& error) {
  error = refusal(Capability::Inspect);
  return {};
}

}  // namespace gbui
