// The registry behind GB_TEST and GB_QTEST_MAIN and the shared helpers of every
// test executable (gb_test.h explains the scheme). No Qt: the workbench tests
// include it through gb_qtest_main.h without pulling in all of QtTest.
#pragma once

#include <string>
#include <vector>

namespace gbtest {

// A test is named after its source files, not by a compile definition, so that
// the files of a folder can be compiled together (unity batches, several files in
// one translation unit): a case or suite registers the __FILE__ it was defined
// in, and dispatch() looks its test up in the executable's file table, which
// CMake generates from the glassbox_add_test / glassbox_add_ui_test calls of the
// folder (tests/glassbox_tests.cmake).
struct Case {
  const char* file;          // __FILE__ of the GB_TEST
  const char* name;
  void (*fn)();
  const char* group = nullptr;  // the test (CTest name) the case belongs to, set by dispatch()
};
// Every GB_TEST case of the executable, in registration order, all tests mixed.
std::vector<Case>& registry();
struct Registrar {
  Registrar(const char* file, const char* name, void (*fn)()) { registry().push_back({file, name, fn}); }
};

// The file table: each test source of the executable (its path relative to the
// project's root) and the test it belongs to. Registered by the generated
// <executable>_files.cpp.
struct SourceFile {
  const char* path;
  const char* test;
};
struct SourceFilesRegistrar {
  SourceFilesRegistrar(const SourceFile* files, int count);
};
// The test that the source file `file` (a __FILE__: absolute, or relative to
// wherever the compiler ran) belongs to; nullptr if it is in no test.
const char* test_of_file(const char* file);

// A test with a main of its own (a Qt Test class, GB_QTEST_MAIN): called with the
// command line minus the test name.
using SuiteMain = int (*)(int argc, char** argv);
struct Suite {
  const char* file;  // __FILE__ of the GB_QTEST_MAIN
  SuiteMain main;
  const char* group = nullptr;  // set by dispatch()
};
std::vector<Suite>& suites();
struct SuiteRegistrar {
  SuiteRegistrar(const char* file, SuiteMain main) { suites().push_back({file, main}); }
};

// The tests this executable holds (GB_TEST groups and suites), sorted, no duplicates.
std::vector<std::string> test_names();
// Runs the test named by argv[1] with the remaining arguments (the shared part of
// both runners' main): prints the list for --list, usage for a missing or unknown
// name (exit 2). `run_cases` runs the selected GB_TEST group.
// Every case and suite must belong to a test of the executable: one from a file
// that is not in the table is an error (exit 2, naming the file).
int dispatch(int argc, char** argv, int (*run_cases)(const char* group, int argc, char** argv));
// The test dispatch() is running (its CTest name).
const char* current_test();

// Root of the shared models/testdata folder: $GLASSBOX_SHARED_DIR if set, else the
// CMake cache value compiled in.
std::string shared_dir();
// Full path of a file under shared_dir(); empty if it does not exist.
std::string shared_file(const std::string& relative);
// A fresh empty temporary directory for this test process.
std::string temp_dir();
// The whole file as bytes ("" if unreadable).
std::string read_text(const std::string& path);

// Exit code meaning "every case skipped" (registered as CTest SKIP_RETURN_CODE).
constexpr int kSkipExitCode = 77;
// Set by a test main before running to skip the whole binary (e.g. no CUDA device).
void skip_all(const std::string& reason);
// A case skipped (QSKIP) or the whole test (skip_all): counted, so a test with a
// skipped case and no failure exits kSkipExitCode (CTest reports it Skipped, not
// Passed), and appended as "TEST<TAB>REASON" to $GLASSBOX_SKIP_LOG when set
// (tools/test.sh counts them by reason).
void note_skip(const std::string& reason);
int num_skips();

}  // namespace gbtest
