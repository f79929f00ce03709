// Test support shared by every engine and kernel test.
//
// Tests are free functions declared with GB_TEST(name) and checked with Qt Test's
// macros (QVERIFY, QVERIFY2, QCOMPARE, QFAIL, QSKIP). When Qt is available the
// runner is real Qt Test: one data-driven slot whose rows are the registered cases,
// so `test_x cases:name` selects one case and output/exit codes are Qt Test's.
// Without Qt (GLASSBOX_UI=OFF on a machine without Qt, e.g. the GPU machine) a
// small Qt-free runner provides the same macros with the same meaning.
//
// Like Qt Test's, the macros `return` from the calling function on failure, so
// use them in void functions; helpers can test QTest::currentTestFailed().
#pragma once

#include <string>
#include <vector>

namespace gbtest {

struct Case {
  const char* name;
  void (*fn)();
};
std::vector<Case>& registry();
struct Registrar {
  Registrar(const char* name, void (*fn)()) { registry().push_back({name, fn}); }
};

// Root of the shared models/testdata folder: $GLASSBOX_SHARED_DIR if set, else the
// CMake cache value compiled in.
std::string shared_dir();
// Full path of a file under shared_dir(); empty if it does not exist.
std::string shared_file(const std::string& relative);
// A fresh empty temporary directory for this test process.
std::string temp_dir();

// Exit code meaning "every case skipped" (registered as CTest SKIP_RETURN_CODE).
constexpr int kSkipExitCode = 77;
// Set by a test main before running to skip the whole binary (e.g. no CUDA device).
void skip_all(const std::string& reason);

}  // namespace gbtest

#define GB_TEST(name)                                                \
  static void name();                                                \
  static const ::gbtest::Registrar name##_registrar_(#name, &name); \
  static void name()

// Binds `var` to the full path of a shared data file, failing the test (never
// passing silently) when the file is missing.
#define GB_REQUIRE_SHARED(var, relative)                                                     \
  const std::string var = ::gbtest::shared_file(relative);                                   \
  do {                                                                                       \
    if (var.empty())                                                                         \
      QFAIL(("missing test data: " + ::gbtest::shared_dir() + "/" + (relative) +             \
             " (set GLASSBOX_SHARED_DIR or -DGLASSBOX_SHARED_DIR)").c_str());                \
  } while (0)

#if defined(GLASSBOX_WITH_QTEST)
#include <QtTest/QtTest>
#else
#include "qtest_lite.h"
#endif
