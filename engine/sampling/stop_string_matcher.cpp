// StopStringMatcher; see stop_string_matcher.h.
#include "sampling/stop_string_matcher.h"

#include <algorithm>

namespace gb {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatch StopStringMatcher::feed(std::string_view chunk) {
  StopMatch out;
  if (stopped()) {
    out.stopped = true;
    out.stop_index = stop_index_;
    return out;
  }
  std::string pending = held_;
  pending.append(chunk);
  held_.clear();

  // Earliest complete stop string (ties: the shorter one).
  size_t best_pos = std::string::npos;
  size_t best_len = 0;
  int best = -1;
  for (size_t k = 0; k < stops_.size(); ++k) {
    const size_t pos = pending.find(stops_[k]);
    if (pos == std::string::npos) continue;
    if (best < 0 || pos < best_pos || (pos == best_pos && stops_[k].size() < best_len)) {
      best_pos = pos;
      best_len = stops_[k].size();
      best = static_cast<int>(k);
    }
  }
  if (best >= 0) {
    stop_index_ = best;
    out.text = pending.substr(0, best_pos);
    out.stopped = true;
    out.stop_index = best;
    return out;
  }

  // No complete match: hold back the longest tail that is a proper prefix of a stop.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending.size()); len > hold; --len) {
      if (pending.compare(pending.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  out.text = pending.substr(0, pending.size() - hold);
  held_ = pending.substr(pending.size() - hold);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace gb
