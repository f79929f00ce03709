// EngineController, serving: the OpenAI-compatible server driven from the
// workbench's engine thread. Handler threads queue commands in the ServeHub and
// wake this thread with a queued call; serviceHub() runs them between steps and
// collectEvents() hands every event to the hub, so HTTP requests are scheduled,
// shown and traced like the chat's own.
#include "engine_controller.h"
#include "engine_controller_state.h"

namespace gbui {

void EngineController::startServing(const QString& host, int port, const QString& apiKey) {
  if (!state_->engine) {
    notify(&EngineController::servingFailed, state_->remote ? tr("A remote engine cannot be served again from here; load a local model.")
                                      : tr("Load a model before serving it."));
    return;
  }
  stopServingNow(false);
  auto hub = std::make_unique<gb::server::ServeHub>(gb::server::engine_info(*state_->engine), gb::server::HubConfig{});
  // From handler threads: a queued call is the thread-safe way into this thread.
  hub->set_wake([this] { commands_->post([this] { serviceHub(); }, Mailbox::Delivery::Queued); });
  gb::server::ServerConfig config;
  config.host = host.toStdString();
  config.port = port;
  if (!apiKey.isEmpty()) config.api_keys = {apiKey.toStdString()};
  config.record_top_n = 20;  // the inspector shows candidates of server requests too
  auto http = std::make_unique<gb::server::OpenAiServer>(*hub, state_->model, state_->tokenizer, config);
  if (gb::Status s = http->start(); !s.ok()) {
    notify(&EngineController::servingFailed, QString::fromStdString(s.error().message));
    return;
  }
  hub->update_gauges(*state_->engine);
  state_->hub = std::move(hub);
  state_->http = std::move(http);
  notify(&EngineController::servingStarted, QString::fromStdString(state_->http->address()));
}

void EngineController::stopServing() { stopServingNow(true); }

void EngineController::stopServingNow(bool announce) {
  if (!state_->hub) return;
  // Refuse new submissions and answer queued ones before joining the handler
  // threads: a handler waiting for this thread would otherwise wait in vain.
  state_->hub->close();
  if (state_->engine) state_->hub->fail_all(*state_->engine, "the workbench stopped serving", false);
  state_->http->stop();
  state_->http.reset();
  state_->hub.reset();
  collectEvents();  // the cancellations
  scheduleSteps();
  if (announce) notify(&EngineController::servingStopped);
}

void EngineController::serviceHub() {
  if (!state_->hub || !state_->engine) return;
  state_->hub->run_commands(*state_->engine);
  collectEvents();
  scheduleSteps();
}

}  // namespace gbui
