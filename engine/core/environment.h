// An environment variable's value, or "" when it is not set. Header-only; any
// thread (reads only; nothing in Glassbox sets variables while threads run,
// but tests that call setenv do so between cases).
#pragma once

#include <cstdlib>
#include <string>

namespace gb {

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace gb
