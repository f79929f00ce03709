// Runs glassbox-cli as a subprocess for the CLI tests, and the helpers they share
// (defined once here: the test files of a folder may share a unity batch). The
// binary's path comes from CMake ($<TARGET_FILE:glassbox-cli>) as
// GLASSBOX_CLI_PATH, which each test target that includes this header defines.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/wait.h>

#include "gb_test_registry.h"

namespace gbtest {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout, and stderr too when merged
};

// `args` is appended to the quoted binary path as shell words.
inline CliResult run_cli(const std::string& args, bool merge_stderr = true) {
  CliResult r;
  // Appended rather than chained with operator+: GCC 12 reports a false
  // -Warray-bounds inside std::string's operator+ (GCC bug 105651).
  std::string command = "'";
  command += GLASSBOX_CLI_PATH;
  command += "' ";
  command += args;
  command += merge_stderr ? " 2>&1" : " 2>/dev/null";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `s` in single quotes, as one shell word (test paths hold no single quote).
inline std::string quote(const std::string& s) { return "'" + s + "'"; }

// Writes `bytes` to the file `name` in the test's temporary directory; its path.
inline std::string write_temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

struct CliSplitResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs glassbox-cli with stdout and stderr captured apart and `stdin_text` as its
// standard input (empty: end of file at once, never the terminal).
inline CliSplitResult run_cli_split(const std::string& args, const std::string& stdin_text = "") {
  const std::string dir = temp_dir();
  const std::string in = dir + "/stdin", out = dir + "/stdout", err = dir + "/stderr";
  std::ofstream(in, std::ios::binary) << stdin_text;
  std::string command = "'";
  command += GLASSBOX_CLI_PATH;
  command += "' " + args + " <'" + in + "' >'" + out + "' 2>'" + err + "'";
  const int status = std::system(command.c_str());
  return CliSplitResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out), read_text(err)};
}

}  // namespace gbtest
