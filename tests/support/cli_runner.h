// Runs glassbox-cli as a subprocess for the CLI tests. The binary's path comes
// from CMake ($<TARGET_FILE:glassbox-cli>) as GLASSBOX_CLI_PATH, which each test
// target that includes this header defines.
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

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

// The whole file as bytes ("" if unreadable).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gbtest
