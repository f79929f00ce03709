// RemoteEngineSource: an OpenAI-compatible server (another Glassbox,
// llama-server, vLLM) as the engine (gb::server::RemoteSession). The session's
// threads do the network I/O; the controller's thread only starts requests
// (which returns at once) and drains the session's events at display rate,
// turned into the same UiEvents a local engine produces (UiToken::remote set:
// up to 20 alternatives, client-side timings), and the server's /metrics,
// when it has them, as UiRemoteMetrics. What the API cannot do is its
// capability table (refusal()); sampler changes do not reach a request already sent.
// Threads: the controller's thread only.
#pragma once

#include <QString>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "engine_source.h"

namespace gb::server {
class RemoteSession;
struct RemoteEvent;
struct RemoteOptions;
}  // namespace gb::server

namespace gbui {

class RemoteEngineSource final : public EngineSource {
 public:
  // Connects (GET /v1/models; /metrics probed once). nullptr with `error` set
  // when the server cannot be used.
  static std::unique_ptr<RemoteEngineSource> connect(const QString& url, const QString& apiKey, QString& error);
  ~RemoteEngineSource() override;

  QString refusal(Capability what) const override;
  UiModelInfo info() const override { return info_; }
  SubmitResult submit(const SubmitCommand& command) override;
  SubmitResult fork(const ForkCommand& command) override;
  void cancel(quint64 request) override;
  void release(quint64) override {}                                  // a remote keeps no KV for us
  int releaseBranches(const QVector<quint64>&) override { return 0; }
  QString setSamplerSettings(quint64, const SamplerChoice&) override { return {}; }  // the request was sent
  bool steps() const override { return false; }
  bool step(QString&) override { return false; }
  bool hasWork() const override;
  void drain(std::vector<UiEvent>& out, QStringList& warnings) override;
  void flushTrace(QStringList&) override {}
  std::unique_ptr<ComparisonRun> startComparison(const CompareCommand& command, QString& error) override;
  QString score(const ScoreCommand& command, QString& error) override;
  QString inspect(const InspectCommand& command, QString& error) override;
  QString exportTrace(const QString&, const QString&, const QString&) override { return refusal(Capability::TraceExport); }

  gb::server::RemoteSession& session() const { return *session_; }
  // Remembers what a request was sent with (its UiSubmitted says so).
  void noteRequest(quint64 request, int maxTokens, const QString& samplerJson);
  // The session's raw events, before they are translated (a comparison collects its samples).
  void setObserver(std::function<void(const gb::server::RemoteEvent&)> observer) { observer_ = std::move(observer); }

 private:
  RemoteEngineSource();
  struct RequestInfo {
    int maxTokens = 0;
    QString samplerJson;
    int numTokens = 0;
  };
  std::unique_ptr<gb::server::RemoteSession> session_;
  std::unique_ptr<gb::server::RemoteOptions> options_;  // how it was reached (scoring's own client)
  UiModelInfo info_;
  std::map<quint64, RequestInfo> requests_;
  std::map<std::string, int> tokenIds_;  // local numbers for the token strings it reports
  quint64 seq_ = 0;
  std::function<void(const gb::server::RemoteEvent&)> observer_;
};

}  // namespace gbui
