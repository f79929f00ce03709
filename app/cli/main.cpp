// glassbox-cli: the terminal face of the engine (generate, tokenize, info, synth,
// bench, serve-bench, trace ...). Subcommands live in cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "cli/command_registry.h"

namespace gb::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> entries;
  return entries;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "glassbox-cli: error: %s\n", message.c_str());
  return 1;
}

}  // namespace gb::cli

int main(int argc, char** argv) {
  CLI::App app{"Glassbox command-line tool: run, inspect and benchmark llama-family models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", GLASSBOX_VERSION);
  std::map<CLI::App*, gb::cli::CommandRunner> runners;
  for (auto& entry : gb::cli::command_registry()) {
    CLI::App* sub = app.add_subcommand(entry.name, entry.description);
    runners[sub] = entry.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return gb::cli::fail("no command given (try --help)");
}
