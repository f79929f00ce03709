// Runs glassbox-cli (path from CMake as GLASSBOX_CLI_PATH) as a subprocess and
// captures stdout and stderr together, for the trace CLI tests.
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

namespace gbtest {

struct CliResult {
  int exit_code = -1;
  std::string output;
};

inline CliResult run_cli(const std::string& args, bool with_stderr = true) {
  CliResult r;
  const std::string command = std::string("'") + GLASSBOX_CLI_PATH + "' " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gbtest
