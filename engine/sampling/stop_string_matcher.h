// StopStringMatcher: finds stop strings in generated text that arrives in
// decoded chunks (one per token), across chunk boundaries, and never lets any
// part of a stop string reach the output.
//
// It holds back the longest tail of the text seen so far that could still grow
// into a stop string (a proper prefix of one), and releases it as soon as it no
// longer can. When a stop string completes, everything before it is released,
// the stop string and everything after it are dropped, and the matcher stops.
//   feed("Hello, Wor") -> emit "Hello, ", hold "Wor"   (stop strings: "World")
//   feed("ld!")        -> emit "",        stopped     (matched "World")
// Several stop strings: the one starting earliest wins; at equal starts the
// shorter one (it completes first). Matching is on bytes; the caller feeds whole
// UTF-8 characters (StreamingDecoder does), so held text never splits one.
// Threads: one matcher per request; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gb {

struct StopMatch {
  std::string text;      // safe to show / send now
  bool stopped = false;  // a stop string completed; generation must end
  int stop_index = -1;   // which stop string (index into the constructor's list)
};

class StopStringMatcher {
 public:
  // Empty stop strings are ignored (validate() rejects them in settings).
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Feeds the next decoded chunk. After a stop, returns {"", true, index} again.
  StopMatch feed(std::string_view chunk);

  // Releases the held-back tail when generation ends for another reason (max
  // tokens, stop token): it was not a stop string after all. Empty after a stop.
  std::string flush();

  bool stopped() const { return stop_index_ >= 0; }
  const std::string& held() const { return held_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;     // text received but not yet released: a prefix of some stop string
  int stop_index_ = -1;
};

}  // namespace gb
