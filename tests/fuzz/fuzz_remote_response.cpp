// A remote server's answers, as RemoteClient reads them (client/remote_response.h
// and parse_prometheus_text): the same bytes as a model list, a non-streamed
// completion (n = 1 and 2), an echo score, an error body, Prometheus metrics
// (and read_remote_metrics), one streamed chunk, and a whole server-sent-events
// stream split into lines as RemoteClient::stream splits it. Any answer is a
// value or an error; an exception escaping is a crash here (libFuzzer aborts on
// it), as it would end the workbench.
#include <string>
#include <string_view>

#include "client/remote_client.h"
#include "client/remote_metrics.h"
#include "client/remote_response.h"
#include "fuzz_support.h"

namespace {

void check_chunk(std::string_view data) {
  for (const bool chat : {false, true}) {
    auto chunk = gb::server::parse_stream_chunk(data, chat);
    if (!chunk.ok()) {
      if (chunk.error().message.empty()) gbfuzz::fuzz_fail("a stream chunk error without a message");
      continue;
    }
    for (const gb::server::RemoteToken& t : chunk->tokens)
      for (size_t i = 1; i < t.top.size(); ++i)
        if (t.top[i - 1].second < t.top[i].second) gbfuzz::fuzz_fail("alternatives not sorted most likely first");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto models = gb::server::parse_models_list(text); models.ok() && models->empty())
    gbfuzz::fuzz_fail("an empty model list accepted");
  for (const int n : {1, 2})
    if (auto choices = gb::server::parse_completion(text, n); choices.ok() && static_cast<int>(choices->size()) != n)
      gbfuzz::fuzz_fail("parse_completion gave " + std::to_string(choices->size()) + " choices for n = " + std::to_string(n));
  if (auto scored = gb::server::parse_scored_prompt(text); scored.ok() && scored->size() < 2)
    gbfuzz::fuzz_fail("an echo score of fewer than two tokens accepted");
  (void)gb::server::parse_error_message(text);
  (void)gb::server::read_remote_metrics(gb::server::parse_prometheus_text(std::string(text)));
  check_chunk(text);
  // As a stream: each line's data, as RemoteClient::stream reads it.
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const auto chunk = gb::server::sse_data(line)) check_chunk(*chunk);
  }
  return 0;
}
