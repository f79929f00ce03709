// The model catalog as the model manager reads it (engine/download/catalog.h:
// parse_catalog, then resolve_pull_spec on its ids): a catalog comes from a
// URL anyone can serve (`models catalog --update URL`), so parsing may not
// crash or throw, and whatever it accepts holds what the downloader and the
// workbench rely on: ids that are short slugs and unique, repositories that
// `models pull` reads as OWNER/NAME, .gguf files inside the repository, sizes
// and counts within their bounds, one-line texts.
#include <cctype>
#include <set>
#include <string>
#include <string_view>

#include "download/catalog.h"
#include "fuzz_support.h"

namespace {

bool ends_with_gguf(const std::string& path) {
  if (path.size() <= 5) return false;
  std::string tail = path.substr(path.size() - 5);
  for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".gguf";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace dl = gb::download;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto catalog = dl::parse_catalog(text);
  if (!catalog) return 0;
  if (catalog->entries.empty()) gbfuzz::fuzz_fail("a catalog with no models accepted");
  std::set<std::string> ids;
  for (const dl::CatalogEntry& e : catalog->entries) {
    if (e.id.empty() || e.id.size() > 64 || e.id.find('/') != std::string::npos || !ids.insert(e.id).second)
      gbfuzz::fuzz_fail("an id that is empty, long, has a '/' or repeats: " + e.id);
    if (e.file.empty() || e.file.front() == '/' || e.file.find("..") != std::string::npos || !ends_with_gguf(e.file))
      gbfuzz::fuzz_fail("a file outside the repository or not a GGUF: " + e.file);
    auto spec = dl::resolve_pull_spec(e.id, &*catalog);
    if (!spec || spec->is_url || spec->repo != e.repo || spec->file != e.file)
      gbfuzz::fuzz_fail("an id that does not resolve to its entry: " + e.id);
    auto parsed = dl::parse_model_spec(e.repo);
    if (!parsed || parsed->is_url || parsed->repo != e.repo || !parsed->file.empty())
      gbfuzz::fuzz_fail("a repository `models pull` would not read as OWNER/NAME: " + e.repo);
    if (e.size_bytes == 0 || e.size_bytes > (uint64_t{1} << 40) || e.parameters == 0 || e.context_length <= 0 ||
        e.context_length > (int64_t{1} << 24))
      gbfuzz::fuzz_fail("a size, parameter count or context out of bounds in " + e.id);
    for (const std::string* t : {&e.name, &e.description, &e.license, &e.weight_type, &e.architecture})
      if (t->empty() || t->find('\n') != std::string::npos) gbfuzz::fuzz_fail("an empty or multi-line text in " + e.id);
    (void)dl::estimate_fit(e.size_bytes, e.kv_bytes_per_token, e.context_length, 1);
  }
  // The raw input as `models pull` text, against this catalog.
  if (text.size() < 256) (void)dl::resolve_pull_spec(text, &*catalog);
  return 0;
}
