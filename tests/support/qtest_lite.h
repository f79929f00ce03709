// The subset of Qt Test's macros that engine tests use, for builds without Qt.
// Semantics follow Qt Test: a failed check records the failure and returns from
// the calling function; QSKIP marks the current case skipped and returns.
#pragma once

#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>

namespace gbtest::lite {
void record_failure(const std::string& what, const char* file, int line);
void record_skip(const std::string& why, const char* file, int line);
// Qt Test's documented float comparison: infinities equal when of the same
// sign, NaN equals NaN, an expected value that is (fuzzily) zero wants an
// actual that is too, otherwise the two agree to about 12 significant digits
// (double) or 5 (float).
template <class T>
bool fuzzy_equal(T actual, T expected) {
  constexpr bool is_float = std::is_same_v<T, float>;
  const T null_bound = is_float ? T(1e-5) : T(1e-12);
  const T relative = is_float ? T(100000) : T(1000000000000.0);
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return std::isinf(actual) && (actual < 0) == (expected < 0);
  if (std::abs(expected) <= null_bound) return std::abs(actual) <= null_bound;
  return std::abs(actual - expected) * relative <= std::min(std::abs(actual), std::abs(expected));
}

template <class A, class B>
bool compare(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
  bool same = false;
  if constexpr (std::is_floating_point_v<A> && std::is_floating_point_v<B>) {
    using T = std::conditional_t<std::is_same_v<A, float> && std::is_same_v<B, float>, float, double>;
    same = fuzzy_equal<T>(static_cast<T>(a), static_cast<T>(b));
  } else {
    same = a == b;
  }
  if (same) return true;
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
