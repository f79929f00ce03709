// Serving: the loaded local engine over the OpenAI API (engine/server,
// docs/server.md), driven from the controller's thread. HTTP handler threads
// queue commands in a ServeHub and wake the controller (the `wake` callback,
// a queued call); service() runs them between steps, and the engine's events
// reach the hub through the source's observer, so HTTP requests are
// scheduled, shown and traced like the chat's own.
// Threads: the controller's thread, except `wake`, which handler threads call.
#pragma once

#include <QString>
#include <functional>
#include <memory>

namespace gb::server {
class OpenAiServer;
class ServeHub;
}  // namespace gb::server

namespace gbui {

class LocalEngineSource;

class Serving {
 public:
  // Starts the server on `source`'s engine; nullptr with `error` set when it
  // cannot listen. port 0 picks a free port; apiKey "" needs none.
  static std::unique_ptr<Serving> start(LocalEngineSource& source, const QString& host, int port, const QString& apiKey,
                                        std::function<void()> wake, QString& error);
  // Refuses new submissions, answers queued ones and joins the handler threads.
  ~Serving();
  QString address() const;
  // Runs the handler threads' queued commands on the engine.
  void service();
  // The engine failed: every server request ends with `message`.
  void failAll(const QString& message);

 private:
  explicit Serving(LocalEngineSource& source);
  LocalEngineSource& source_;
  std::unique_ptr<gb::server::ServeHub> hub_;
  std::unique_ptr<gb::server::OpenAiServer> http_;
  int observer_ = -1;
};

}  // namespace gbui
