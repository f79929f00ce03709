// The registry behind GB_TEST and GB_QTEST_MAIN and the shared helpers of every
// test executable (gb_test.h explains the scheme). No Qt: the workbench tests
// include it through gb_qtest_main.h without pulling in all of QtTest.
#pragma once

#include <string>
#include <vector>

namespace gbtest {

struct Case {
  const char* group;  // the test (CTest name) the case belongs to: GB_TEST_GROUP of its file
  const char* name;
  void (*fn)();
};
// Every GB_TEST case of the executable, in registration order, all tests mixed.
std::vector<Case>& registry();
struct Registrar {
  Registrar(const char* group, const char* name, void (*fn)()) { registry().push_back({group, name, fn}); }
};

// A test with a main of its own (a Qt Test class, GB_QTEST_MAIN): called with the
// command line minus the test name.
using SuiteMain = int (*)(int argc, char** argv);
struct Suite {
  const char* group;
  SuiteMain main;
};
std::vector<Suite>& suites();
struct SuiteRegistrar {
  SuiteRegistrar(const char* group, SuiteMain main) { suites().push_back({group, main}); }
};

// The tests this executable holds (GB_TEST groups and suites), sorted, no duplicates.
std::vector<std::string> test_names();
// Runs the test named by argv[1] with the remaining arguments (the shared part of
// both runners' main): prints the list for --list, usage for a missing or unknown
// name (exit 2). `run_cases` runs the selected GB_TEST group.
int dispatch(int argc, char** argv, int (*run_cases)(const char* group, int argc, char** argv));

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
