#include "serving.h"

#include "local_engine_source.h"

#include "runtime/engine.h"
#include "server/openai_server.h"
#include "server/serve_hub.h"

namespace gbui {

Serving::Serving(LocalEngineSource& source) : source_(source) {}

std::unique_ptr<Serving> Serving::start(LocalEngineSource& source, const QString& host, int port,
                                        const QString& apiKey, std::function<void()> wake, QString& error) {
  std::unique_ptr<Serving> s(new Serving(source));
  gb::Engine& engine = source.engine();
  s->hub_ = std::make_unique<gb::server::ServeHub>(gb::server::engine_info(engine), gb::server::HubConfig{});
  s->hub_->set_wake(std::move(wake));
  gb::server::ServerConfig config;
  config.host = host.toStdString();
  config.port = port;
  if (!apiKey.isEmpty()) config.api_keys = {apiKey.toStdString()};
  config.record_top_n = 20;  // the inspector shows candidates of server requests too
  s->http_ = std::make_unique<gb::server::OpenAiServer>(*s->hub_, source.model(), source.tokenizer(), config);
  if (gb::Status st = s->http_->start(); !st.ok()) {
    error = QString::fromStdString(st.error().message);
    s->http_.reset();
    return nullptr;
  }
  s->hub_->update_gauges(engine);
  // Server requests' tokens go to their HTTP clients.
  gb::server::ServeHub* hub = s->hub_.get();
  s->observer_ = source.observe([hub, &source](const std::vector<gb::TraceEvent>& events) {
    for (const gb::TraceEvent& e : events) hub->on_event(e, *source.tokenizer());
    hub->update_gauges(source.engine());
  });
  return s;
}

Serving::~Serving() {
  if (observer_ >= 0) source_.unobserve(observer_);
  if (!hub_) return;
  // Refuse new submissions and answer queued ones before joining the handler
  // threads: a handler waiting for this thread would otherwise wait in vain.
  hub_->close();
  hub_->fail_all(source_.engine(), "the workbench stopped serving", false);
  if (http_) http_->stop();
  http_.reset();
  hub_.reset();
}

QString Serving::address() const { return http_ ? QString::fromStdString(http_->address()) : QString(); }

void Serving::service() { hub_->run_commands(source_.engine()); }

void Serving::failAll(const QString& message) {
  hub_->fail_all(source_.engine(), "engine failure: " + message.toStdString(), true);
}

}  // namespace gbui
