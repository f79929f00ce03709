// Registry of glassbox-cli subcommands. Each cmd_*.cpp file registers one
// subcommand with a static CommandRegistrar: its setup function adds options to
// the CLI11 subcommand and returns the function that runs it (exit code).
//
//   static const gb::cli::CommandRegistrar reg("info", "Describe a model file",
//       [](CLI::App& sub) -> gb::cli::CommandRunner {
//         auto opts = std::make_shared<Options>();
//         sub.add_option("path", opts->path)->required();
//         return [opts] { return run_info(*opts); };
//       });
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gb::cli {

using CommandRunner = std::function<int()>;
using CommandSetup = std::function<CommandRunner(CLI::App& sub)>;

struct CommandEntry {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<CommandEntry>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

// Prints "glassbox-cli: error: <message>" to stderr and returns exit code 1.
int fail(const std::string& message);

}  // namespace gb::cli
