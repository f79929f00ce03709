// glassbox-cli: the terminal face of the engine (generate, tokenize, info, synth,
// bench, serve-bench, trace ...). Subcommands live in cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

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
  // llama.cpp's spellings of the KV type options (-ctk q8_0 -ctv q8_0): CLI11
  // takes one-letter short options only, so they are renamed before parsing.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& arg : args) {
    if (arg == "-ctk" || arg == "--cache-type-k") arg = "--kv-type-k";
    else if (arg == "-ctv" || arg == "--cache-type-v") arg = "--kv-type-v";
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return gb::cli::fail("no command given (try --help)");
}
