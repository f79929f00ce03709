#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "gb_test_registry.h"

namespace gbtest {

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

std::vector<Suite>& suites() {
  static std::vector<Suite> all;
  return all;
}

namespace {
std::vector<SourceFile>& source_files() {
  static std::vector<SourceFile> files;
  return files;
}
const char* g_current_test = "";

// Sets the group of every case and suite from the file table; false (after
// naming them) if some file is in no test.
bool assign_groups() {
  bool ok = true;
  auto assign = [&ok](const char* file, const char*& group) {
    group = test_of_file(file);
    if (!group) {
      std::fprintf(stderr, "%s: this file's cases belong to no test of this executable (list it in a "
                           "glassbox_add_test of its folder, tests/glassbox_tests.cmake)\n", file);
      ok = false;
    }
  };
  for (Case& c : registry()) assign(c.file, c.group);
  for (Suite& s : suites()) assign(s.file, s.group);
  return ok;
}
}  // namespace

SourceFilesRegistrar::SourceFilesRegistrar(const SourceFile* files, int count) {
  source_files().insert(source_files().end(), files, files + count);
}

const char* test_of_file(const char* file) {
  // __FILE__ is the path the compiler was given (absolute with CMake, relative
  // under a ccache base_dir) or, in a unity batch, the one it was included by.
  const std::string path = std::filesystem::path(file).lexically_normal().generic_string();
  const SourceFile* best = nullptr;
  for (const SourceFile& f : source_files()) {
    const size_t n = std::strlen(f.path);
    if (path.size() < n || path.compare(path.size() - n, n, f.path) != 0) continue;
    if (path.size() > n && path[path.size() - n - 1] != '/') continue;
    if (!best || n > std::strlen(best->path)) best = &f;
  }
  return best ? best->test : nullptr;
}

const char* current_test() { return g_current_test; }

std::vector<std::string> test_names() {
  std::vector<std::string> names;
  for (const Case& c : registry()) names.emplace_back(c.group);
  for (const Suite& s : suites()) names.emplace_back(s.group);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

int dispatch(int argc, char** argv, int (*run_cases)(const char* group, int argc, char** argv)) {
  if (!assign_groups()) return 2;
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
  g_current_test = group;
  for (const Suite& s : suites())
    if (std::strcmp(s.group, group) == 0) return s.main(num_args, args.data());
  return run_cases(group, num_args, args.data());
}

namespace {
int g_num_skips = 0;
}

void note_skip(const std::string& reason) {
  ++g_num_skips;
  if (const char* log = std::getenv("GLASSBOX_SKIP_LOG"); log && *log) {
    std::ofstream out(log, std::ios::app);
    std::string line = reason;
    for (char& c : line)
      if (c == '\n' || c == '\t') c = ' ';
    out << (g_current_test ? g_current_test : "?") << '\t' << line << '\n';
  }
}

int num_skips() { return g_num_skips; }

std::string shared_dir() {
  if (const char* env = std::getenv("GLASSBOX_SHARED_DIR"); env && *env) return env;
  return GLASSBOX_SHARED_DIR_DEFAULT;
}

std::string shared_file(const std::string& relative) {
  std::filesystem::path p = std::filesystem::path(shared_dir()) / relative;
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) ? p.string() : std::string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
// The test process's scratch directory, removed with everything in it when the
// process exits (by the process that made it: a forked child that returned
// through exit() would otherwise take it from under its parent). Set
// GLASSBOX_KEEP_TEST_TMP=1 to keep it for a look after a failure.
struct ScratchDir {
  std::string path;
  pid_t owner = 0;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "glassbox-test-XXXXXX").string();
    if (const char* made = mkdtemp(pattern.data())) {
      path = made;
      owner = ::getpid();
    }
  }
  ~ScratchDir() {
    if (path.empty() || ::getpid() != owner || std::getenv("GLASSBOX_KEEP_TEST_TMP")) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};
}  // namespace

std::string temp_dir() {
  static ScratchDir dir;
  return dir.path.empty() ? std::string("/tmp") : dir.path;
}

}  // namespace gbtest
