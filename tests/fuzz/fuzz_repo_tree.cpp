// The Hugging Face hub's tree listing as the model manager reads it
// (engine/download: parse_repo_tree) and `models pull` specs
// (parse_model_spec): outside data, so neither may crash or throw, and what
// they accept holds what the downloader relies on.
#include <string_view>

#include "download/model_download.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto files = gb::download::parse_repo_tree(text)) {
    for (const auto& f : *files) {
      if (f.path.empty() || f.path.front() == '/' || f.path.find("..") != std::string::npos)
        gbfuzz::fuzz_fail("a listed file whose path names no file in the repository: " + f.path);
      if (!f.sha256.empty() && f.sha256.size() != 64) gbfuzz::fuzz_fail("a sha256 that is not 64 hex digits: " + f.sha256);
    }
  }
  if (auto spec = gb::download::parse_model_spec(text)) {
    if (spec->is_url && spec->url.rfind("http://", 0) != 0 && spec->url.rfind("https://", 0) != 0)
      gbfuzz::fuzz_fail("a URL of another scheme accepted: " + spec->url);
    if (!spec->is_url && (spec->file.find("..") != std::string::npos || spec->repo.find('/') == std::string::npos))
      gbfuzz::fuzz_fail("a repository spec that leaves the repository: " + std::string(text));
  }
  return 0;
}
