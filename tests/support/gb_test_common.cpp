#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "gb_test.h"

namespace gbtest {

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

std::vector<Suite>& suites() {
  static std::vector<Suite> all;
  return all;
}

std::vector<std::string> test_names() {
  std::vector<std::string> names;
  for (const Case& c : registry()) names.emplace_back(c.group);
  for (const Suite& s : suites()) names.emplace_back(s.group);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

int dispatch(int argc, char** argv, int (*run_cases)(const char* group, int argc, char** argv)) {
  const std::vector<std::string> names = test_names();
  if (argc > 1 && std::strcmp(argv[1], "--list") == 0) {
    for (const std::string& n : names) std::printf("%s\n", n.c_str());
    return 0;
  }
  const char* group = argc > 1 ? argv[1] : nullptr;
  if (!group || std::find(names.begin(), names.end(), group) == names.end()) {
    if (group) std::fprintf(stderr, "unknown test '%s'\n", group);
    std::fprintf(stderr, "usage: %s TEST [test arguments]   (or --list)\ntests in this executable:\n", argv[0]);
    for (const std::string& n : names) std::fprintf(stderr, "  %s\n", n.c_str());
    return 2;
  }
  // The test's own command line: the program name, then what followed the test name.
  std::vector<char*> args{argv[0]};
  args.insert(args.end(), argv + 2, argv + argc);
  args.push_back(nullptr);
  const int num_args = argc - 1;
  for (const Suite& s : suites())
    if (std::strcmp(s.group, group) == 0) return s.main(num_args, args.data());
  return run_cases(group, num_args, args.data());
}

std::string shared_dir() {
  if (const char* env = std::getenv("GLASSBOX_SHARED_DIR"); env && *env) return env;
  return GLASSBOX_SHARED_DIR_DEFAULT;
}

std::string shared_file(const std::string& relative) {
  std::filesystem::path p = std::filesystem::path(shared_dir()) / relative;
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p.string() : std::string();
}

std::string temp_dir() {
  static std::string dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "glassbox-test-XXXXXX").string();
    const char* made = mkdtemp(pattern.data());
    return made ? std::string(made) : std::string("/tmp");
  }();
  return dir;
}

}  // namespace gbtest
