// EngineController, the Compare view on a remote engine: each lane's samples
// are streamed requests of the RemoteSession (seed + j per sample, as a
// Glassbox or vLLM server numbers n choices), so their tokens fill the lane
// columns through the ordinary event stream while they arrive; the session's
// events are also collected here, and when the last sample ends the result
// JSON (server/remote_comparison_json.h) goes to the view. Common random
// numbers, entropies and shared prompt blocks are not available over the API.
#include <QStringList>

#include "engine_controller.h"
#include "engine_controller_state.h"

namespace gbui {

void EngineController::startComparisonRemote(quint64 tag, const QString& prompt, const QStringList& laneNames,
                                             const QStringList& laneJson, int samples, quint64 seed, int maxTokens,
                                             const QVector<UiChatMessage>& chat) {
  auto run = std::make_unique<State::RemoteComparison>();
  for (int i = 0; i < laneNames.size() && i < laneJson.size(); ++i) {
    auto settings = gb::sampler_settings_from_json(laneJson[i].toStdString(), "lane " + laneNames[i].toStdString());
    if (!settings) return notify(&EngineController::comparisonFailed, tag, QString::fromStdString(settings.error().message));
    run->lanes.push_back({laneNames[i].toStdString(), *settings, {}});
  }
  if (run->lanes.empty() || samples < 1) return notify(&EngineController::comparisonFailed, tag, tr("A comparison needs lanes and samples."));
  std::vector<gb::ChatMessage> history;
  for (const UiChatMessage& m : chat) history.push_back({m.role.toStdString(), m.text.toStdString(), {}});
  QVector<quint64> ids;
  for (size_t i = 0; i < run->lanes.size(); ++i) {
    gb::server::RemoteLane& lane = run->lanes[i];
    const uint64_t laneSeed = gb::comparison_sample_seed(seed, 0, gb::lane_stream_key(lane.settings));
    for (int j = 0; j < samples; ++j) {
      gb::SamplerSettings one = lane.settings;
      one.seed = laneSeed + static_cast<uint64_t>(j);
      const uint64_t id = chat.isEmpty() ? state_->remote->submit_completion(prompt.toStdString(), one, maxTokens)
                                         : state_->remote->submit_chat(history, one, maxTokens);
      state_->remoteRequests[id] = {maxTokens, laneJson[static_cast<int>(i)], 0};
      run->requestSlots[id] = {i, static_cast<size_t>(j)};
      lane.samples.push_back({one.seed, {}, {}, {}, 0.0});
      ids.push_back(id);
    }
  }
  run->tag = tag;
  run->info = {state_->remote->url(), state_->remote->model(), chat.isEmpty() ? prompt.toStdString() : std::string(),
               seed, maxTokens, 0.0};
  run->start = std::chrono::steady_clock::now();
  state_->remoteComparison = std::move(run);
  notify(&EngineController::comparisonStarted, tag, ids);
}

// One session event for the running comparison; true when it has ended
// (its last sample finished, or one failed: then the rest are cancelled).
bool EngineController::noteRemoteComparison(const gb::server::RemoteEvent& e) {
  State::RemoteComparison* run = state_->remoteComparison.get();
  if (!run) return false;
  if (const auto* t = std::get_if<gb::server::RemoteTokenEvent>(&e.body)) {
    auto slot = run->requestSlots.find(t->request);
    if (slot != run->requestSlots.end())
      run->lanes[slot->second.first].samples[slot->second.second].tokens.push_back(t->token);
    return false;
  }
  const auto* f = std::get_if<gb::server::RemoteFinished>(&e.body);
  if (!f) return false;
  auto slot = run->requestSlots.find(f->request);
  if (slot == run->requestSlots.end()) return false;
  gb::server::RemoteLaneSample& s = run->lanes[slot->second.first].samples[slot->second.second];
  s.text = f->result.text;
  s.finish_reason = f->result.finish_reason;
  s.e2e_ms = f->result.e2e_ms;
  const std::string lane = run->lanes[slot->second.first].name;
  run->requestSlots.erase(slot);
  if (!f->error.empty()) {
    std::unique_ptr<State::RemoteComparison> failed = std::move(state_->remoteComparison);
    for (const auto& [request, where] : failed->requestSlots) state_->remote->cancel(request);
    notify(&EngineController::comparisonFailed, failed->tag, QString::fromStdString("lane " + lane + ": " + f->error));
    return true;
  }
  return run->requestSlots.empty();
}

void EngineController::finishRemoteComparison() {
  std::unique_ptr<State::RemoteComparison> run = std::move(state_->remoteComparison);
  if (!run) return;
  run->info.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - run->start).count();
  // No CSV: its columns are the engine's per-token records (docs/compare.md).
  notify(&EngineController::comparisonFinished, run->tag, QString::fromStdString(gb::server::remote_comparison_to_json(run->lanes, run->info)),
                          QString());
}

}  // namespace gbui
