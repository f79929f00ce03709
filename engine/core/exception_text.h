// Library exceptions carry an internal tag before their sentence, e.g.
// nlohmann::json's "[json.exception.parse_error.101] parse error at line 1, ...".
// A user-facing message keeps the sentence and drops the tag (the bad-input
// rule: no raw exception text in front of the user). Header-only; any thread.
#pragma once

#include <string>
#include <string_view>

namespace gb {

inline std::string exception_sentence(std::string_view what) {
  if (!what.empty() && what.front() == '[') {
    const size_t end = what.find("] ");
    if (end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return std::string(what);
}

}  // namespace gb
