// Programmer-error checks. GB_CHECK fails hard with file and line in every build
// type: it guards invariants that only a bug can break (never user input, which
// gets a Result with a message instead). Any thread may use it.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace gb::detail {
[[noreturn]] inline void check_failed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "glassbox: check failed: %s at %s:%d%s%s\n", expr, file, line,
               msg ? ": " : "", msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}
}  // namespace gb::detail

#define GB_CHECK(expr)                                                         \
  do {                                                                         \
    if (!(expr)) ::gb::detail::check_failed(#expr, __FILE__, __LINE__, nullptr); \
  } while (0)

#define GB_CHECK_MSG(expr, msg)                                              \
  do {                                                                       \
    if (!(expr)) ::gb::detail::check_failed(#expr, __FILE__, __LINE__, msg); \
  } while (0)

