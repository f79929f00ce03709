// Test support shared by every engine and kernel test.
//
// Tests are free functions declared with GB_TEST(name) and checked with Qt Test's
// macros (QVERIFY, QVERIFY2, QCOMPARE, QFAIL, QSKIP). Each test folder builds one
// executable (glassbox_tests_<folder>, tests/glassbox_tests.cmake) that holds
// several tests; a test is the cases of its source files, which CMake compiles
// with GB_TEST_GROUP="<test name>", and the executable's first argument picks it:
// `glassbox_tests_engine_kv block_pool_test` runs that test,
// `glassbox_tests_engine_kv block_pool_test cases:name` one case of it, and
// `--list` prints the tests an executable holds. CTest registers each test under
// its own name. When Qt is available the runner is real Qt Test: one
// data-driven slot whose rows are the test's cases, so output and exit codes are
// Qt Test's. Without Qt (GLASSBOX_UI=OFF on a machine without Qt, e.g. the GPU
// machine) a small Qt-free runner provides the same macros with the same meaning.
// The workbench tests are Qt Test classes; GB_QTEST_MAIN (gb_qtest_main.h)
// registers one as its test's main in place of QTEST_MAIN.
//
// Like Qt Test's, the macros `return` from the calling function on failure, so
// use them in void functions; helpers can test QTest::currentTestFailed().
#pragma once

#include "gb_test_registry.h"

// GB_TEST_GROUP is defined by glassbox_add_test (tests/glassbox_tests.cmake) as
// the name of the test the file belongs to.
#define GB_TEST(name)                                                               \
  static void name();                                                               \
  static const ::gbtest::Registrar name##_registrar_(GB_TEST_GROUP, #name, &name); \
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
