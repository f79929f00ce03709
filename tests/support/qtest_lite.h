// The subset of Qt Test's macros that engine tests use, for builds without Qt.
// Semantics follow Qt Test: a failed check records the failure and returns from
// the calling function; QSKIP marks the current case skipped and returns.
#pragma once

#include <sstream>
#include <string>

namespace gbtest::lite {
void record_failure(const std::string& what, const char* file, int line);
void record_skip(const std::string& why, const char* file, int line);
template <class A, class B>
bool compare(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
  if (a == b) return true;
  std::ostringstream msg;
  msg << "Compared values are not the same: " << ea << " vs " << eb;
  if constexpr (requires(std::ostream& os) { os << a; os << b; }) msg << "\n   Actual: " << a << "\n   Expected: " << b;
  record_failure(msg.str(), file, line);
  return false;
}
}  // namespace gbtest::lite

namespace QTest {
bool currentTestFailed();
}

#define QVERIFY(cond)                                                               \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      ::gbtest::lite::record_failure("'" #cond "' returned FALSE.", __FILE__, __LINE__); \
      return;                                                                       \
    }                                                                               \
  } while (0)
#define QVERIFY2(cond, message)                                                     \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      ::gbtest::lite::record_failure(std::string("'" #cond "' returned FALSE. (") + (message) + ")", \
                                     __FILE__, __LINE__);                           \
      return;                                                                       \
    }                                                                               \
  } while (0)
#define QCOMPARE(actual, expected)                                                                \
  do {                                                                                            \
    if (!::gbtest::lite::compare((actual), (expected), #actual, #expected, __FILE__, __LINE__)) return; \
  } while (0)
#define QFAIL(message)                                                  \
  do {                                                                  \
    ::gbtest::lite::record_failure((message), __FILE__, __LINE__);      \
    return;                                                             \
  } while (0)
#define QSKIP(message)                                                  \
  do {                                                                  \
    ::gbtest::lite::record_skip((message), __FILE__, __LINE__);         \
    return;                                                             \
  } while (0)
