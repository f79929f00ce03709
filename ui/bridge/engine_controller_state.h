// EngineController::State: the engine objects the controller owns. Private to
// the controller's own .cpp files (the bridge); nothing else includes it.
// Threads: the controller's thread only.
#pragma once

#include <QLockFile>
#include <QString>
#include <QVector>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "engine_controller.h"
#include "model/model.h"
#include "runtime/chat_request.h"
#include "runtime/comparison.h"
#include "runtime/engine.h"
#include "sampling/sampler_settings_json.h"
#include "speculative/speculative_decoder.h"
#include "tokenizer/tokenizer.h"
#include "trace/chrome_trace.h"
#include "trace/trace_event.h"
#include "trace/trace_header.h"
#include "trace/trace_jsonl.h"
#include "trace/background_trace_writer.h"
#include "kv/scheduler.h"
#include "server/openai_server.h"
#include "server/remote_comparison_json.h"
#include "server/remote_session.h"
#include "server/serve_hub.h"

namespace gbui {

struct EngineController::State {
  std::shared_ptr<const gb::Model> model;
  std::shared_ptr<const gb::Tokenizer> tokenizer;
  std::unique_ptr<gb::Engine> engine;
  QVector<QString> vocab;                 // (vocab_size) decoded text per id
  // Every event of this session, written as it happens (a crash loses at most
  // the last second) to a spool file that Export trace reads back. Its lines
  // are formatted and written on the writer's own thread, not this one.
  std::unique_ptr<gb::BackgroundTraceWriter> spool;
  std::unique_ptr<QLockFile> spoolLock;   // held while the spool is written (trace_spool.h)
  bool spoolFailed = false;               // its error was reported once
  std::unique_ptr<gb::Comparison> comparison;  // the Compare view's run, if any
  quint64 comparisonTag = 0;
  std::string comparisonPrompt;
  int numScratchBlocks = 0;               // the pool's lookahead reserve (self-draft scratch)
  // Serving (startServing): the hub takes HTTP requests into `engine`; the
  // server's handler threads only touch the hub. Stopped before engine changes.
  std::unique_ptr<gb::server::ServeHub> hub;
  std::unique_ptr<gb::server::OpenAiServer> http;
  // A remote engine (connectRemote) instead of `engine`: its requests' settings
  // (for UiSubmitted) and local numbers for the token strings it reports.
  std::unique_ptr<gb::server::RemoteSession> remote;
  gb::server::RemoteOptions remoteOptions;  // how `remote` was reached (the Score view's own client)
  struct RemoteRequest {
    int maxTokens = 0;
    QString samplerJson;
    int numTokens = 0;
  };
  std::map<uint64_t, RemoteRequest> remoteRequests;
  std::map<std::string, int> remoteTokenIds;
  quint64 remoteSeq = 0;
  // The Compare view's run on a remote engine: one streamed request per
  // sample, its tokens collected here for the result JSON.
  struct RemoteComparison {
    quint64 tag = 0;
    std::vector<gb::server::RemoteLane> lanes;
    std::map<uint64_t, std::pair<size_t, size_t>> requestSlots;  // request -> (lane, sample)
    gb::server::RemoteComparisonInfo info;
    std::chrono::steady_clock::time_point start;
  };
  std::unique_ptr<RemoteComparison> remoteComparison;

  void reset() {
    remoteComparison.reset();
    remote.reset();
    remoteRequests.clear();
    remoteTokenIds.clear();
    comparison.reset();
    engine.reset();
    spool.reset();  // flushed and closed; the file stays (pruned to the size cap later)
    spoolLock.reset();  // unlocked: the file may be pruned now
    spoolFailed = false;
  }
};

// The chat panel's messages rendered for the engine: the model's own template
// ("model") or a built-in format, assistant answers without their reasoning
// (engine_controller_chat.cpp; used by chat turns and chat comparisons).
gb::ChatRequest renderChatRequest(const gb::Model& model, const gb::Tokenizer& tokenizer,
                                  const QVector<UiChatMessage>& messages, const QString& format,
                                  const gb::SamplerSettings& settings);

// Engine value -> UI value (engine_controller_events.cpp).
UiEvent toUiEvent(const gb::TraceEvent& event, const QVector<QString>& vocab);

}  // namespace gbui
