#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "gb_test.h"

namespace gbtest {

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
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
