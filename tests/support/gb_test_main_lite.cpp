// Qt-free runner with Qt Test's output shape: PASS/FAIL!/SKIP lines and a Totals line.
// `glassbox_tests_X TEST [cases:name | name]` runs one test, or one case of it.
#include <cstdio>
#include <cstring>
#include <string>

#include "gb_test.h"

namespace {
std::string g_skip_all_reason;
bool g_failed = false;
bool g_skipped = false;
}  // namespace

void gbtest::skip_all(const std::string& reason) { g_skip_all_reason = reason; }
bool QTest::currentTestFailed() { return g_failed; }

void gbtest::lite::record_failure(const std::string& what, const char* file, int line) {
  g_failed = true;
  std::printf("FAIL!  : %s\n   Loc: [%s(%d)]\n", what.c_str(), file, line);
}
void gbtest::lite::record_skip(const std::string& why, const char* file, int line) {
  g_skipped = true;
  gbtest::note_skip(why);
  std::printf("SKIP   : %s\n   Loc: [%s(%d)]\n", why.c_str(), file, line);
}

extern void gb_test_setup() __attribute__((weak));

namespace {
int run_cases(const char* group, int argc, char** argv) {
  if (gb_test_setup) gb_test_setup();
  if (!g_skip_all_reason.empty()) {
    std::printf("SKIP   : all cases: %s\n", g_skip_all_reason.c_str());
    gbtest::note_skip(g_skip_all_reason);
    return gbtest::kSkipExitCode;
  }
  // Optional filter after the test name: `cases:name` or `name` runs one case.
  const char* only = nullptr;
  if (argc > 1) only = std::strncmp(argv[1], "cases:", 6) == 0 ? argv[1] + 6 : argv[1];
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& c : gbtest::registry()) {
    if (std::strcmp(c.group, group) != 0) continue;
    if (only && std::strcmp(only, c.name) != 0) continue;
    g_failed = g_skipped = false;
    c.fn();
    if (g_failed) {
      ++failed;
      std::printf("FAIL!  : cases(%s)\n", c.name);
    } else if (g_skipped) {
      ++skipped;
    } else {
      ++passed;
      std::printf("PASS   : cases(%s)\n", c.name);
    }
  }
  std::printf("Totals: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  // As Qt Test: a case name that matches nothing is an error, not an empty pass.
  if (only && passed + failed + skipped == 0) {
    std::printf("FAIL!  : unknown case '%s'\n", only);
    return 1;
  }
  if (failed > 0) return 1;
  return skipped > 0 ? gbtest::kSkipExitCode : 0;
}
}  // namespace

// The first argument names the test (gb_test.h); the rest are the test's own.
int main(int argc, char** argv) { return gbtest::dispatch(argc, argv, run_cases); }
