#include "download/catalog.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "backend/kv_pool_sizing.h"
#include "core/atomic_file.h"
#include "core/environment.h"

#ifndef GLASSBOX_CATALOG_URL
#define GLASSBOX_CATALOG_URL "https://example.org/glassbox/catalog/v1/catalog.json"
#endif

namespace gb::download {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bounds a catalog entry must stay within: anything outside is a typo or a
// hostile document, never a model this program could run.
constexpr uint64_t kMaxCatalogFileBytes = uint64_t{1} << 40;    // 1 TiB
constexpr uint64_t kMaxCatalogParameters = uint64_t{1} << 44;   // ~17.6 T
constexpr int64_t kMaxCatalogContext = int64_t{1} << 24;         // the loader's limit
constexpr uint64_t kMaxKvBytesPerToken = uint64_t{1} << 30;
constexpr size_t kMaxCatalogDocumentBytes = size_t{4} << 20;      // a catalog is a few KB
constexpr size_t kMaxTextField = 400;

bool is_slug(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  const auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(id.front())) return false;
  return std::all_of(id.begin(), id.end(), [&](char c) { return lower_alnum(c) || c == '.' || c == '_' || c == '-'; });
}

// A file path the downloader can name a file after and put in a resolve URL as
// it is: relative, no '..', no empty component, printable; no '@' (it would
// read as a revision in REPO:FILE@REV), ':', '?', '#' or '%' (they would change
// the URL) or '\'; a name before the ".gguf" (any case).
bool is_repo_gguf_path(std::string_view path) {
  if (path.empty() || path.size() > 512 || path.front() == '/' || path.back() == '/') return false;
  if (path.find("..") != std::string_view::npos || path.find("//") != std::string_view::npos) return false;
  if (std::any_of(path.begin(), path.end(), [](char c) {
        return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || std::string_view("\\@:?#%").find(c) != std::string_view::npos;
      }))
    return false;
  constexpr std::string_view ext = ".gguf";
  if (path.size() <= ext.size()) return false;
  std::string tail(path.substr(path.size() - ext.size()));
  std::transform(tail.begin(), tail.end(), tail.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return tail == ext && path[path.size() - ext.size() - 1] != '/';
}

// One entry's fields, each checked; `where` names the entry in messages.
Status read_entry(const json& e, const std::string& where, CatalogEntry& out) {
  if (!e.is_object()) return make_error(where + " is not an object");
  const auto text = [&](const char* key, std::string& dest, bool one_line) -> Status {
    const auto it = e.find(key);
    if (it == e.end()) return make_error(where + ": missing field '" + key + "'");
    if (!it->is_string()) return make_error(where + ": field '" + key + "' is not a string");
    dest = it->get<std::string>();
    if (dest.empty()) return make_error(where + ": field '" + key + "' is empty");
    if (dest.size() > kMaxTextField) return make_error(where + ": field '" + key + "' is longer than 400 bytes");
    if (one_line && dest.find_first_of("\r\n") != std::string::npos)
      return make_error(where + ": field '" + key + "' is not one line");
    return {};
  };
  const auto count = [&](const char* key, uint64_t low, uint64_t high, uint64_t& dest, bool required) -> Status {
    const auto it = e.find(key);
    if (it == e.end()) return required ? make_error(where + ": missing field '" + key + "'") : Status{};
    if (!it->is_number_unsigned())
      return make_error(where + ": field '" + key + "' is not a whole number");
    dest = it->get<uint64_t>();
    if (dest < low || dest > high)
      return make_error(where + ": " + key + " " + std::to_string(dest) + " is outside " + std::to_string(low) + " to " +
                        std::to_string(high));
    return {};
  };
  GB_TRY(text("id", out.id, true));
  if (!is_slug(out.id))
    return make_error(where + ": id '" + out.id + "' is not a short slug (a-z, 0-9, '.', '_', '-'; at most 64)");
  GB_TRY(text("name", out.name, true));
  GB_TRY(text("repo", out.repo, true));
  GB_TRY(text("file", out.file, true));
  // The repository as `models pull` reads one (OWNER/NAME, each part a name).
  auto spec = parse_model_spec(out.repo);
  if (!spec || spec->is_url || spec->repo != out.repo || !spec->file.empty())
    return make_error(where + ": repo '" + out.repo + "' is not OWNER/NAME");
  if (!is_repo_gguf_path(out.file))
    return make_error(where + ": file '" + out.file +
                      "' is not a .gguf path inside the repository (relative; no '..', '\\', '@', ':', '?', '#' or '%')");
  GB_TRY(count("size_bytes", 1, kMaxCatalogFileBytes, out.size_bytes, true));
  GB_TRY(text("weight_type", out.weight_type, true));
  GB_TRY(text("architecture", out.architecture, true));
  GB_TRY(count("parameters", 1, kMaxCatalogParameters, out.parameters, true));
  uint64_t context = 0;
  GB_TRY(count("context_length", 1, static_cast<uint64_t>(kMaxCatalogContext), context, true));
  out.context_length = static_cast<int64_t>(context);
  GB_TRY(text("license", out.license, true));
  GB_TRY(text("description", out.description, true));
  GB_TRY(count("kv_bytes_per_token", 1, kMaxKvBytesPerToken, out.kv_bytes_per_token, false));
  return {};
}

Result<std::string> read_text_file(const fs::path& path, size_t max_bytes) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return make_error(path.string() + ": " + ec.message());
  if (size > max_bytes) return make_error(path.string() + ": larger than " + std::to_string(max_bytes) + " bytes");
  return read_whole_file(path.string());
}

Result<Catalog> read_catalog_file(const fs::path& path) {
  auto text = read_text_file(path, kMaxCatalogDocumentBytes);
  if (!text) return text.error();
  auto catalog = parse_catalog(*text);
  if (!catalog) return make_error(path.string() + ": " + catalog.error().message);
  return catalog;
}

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

}  // namespace

std::string default_catalog_url() { return GLASSBOX_CATALOG_URL; }

Result<Catalog> parse_catalog(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return make_error("the catalog is not valid JSON");
  if (!j.is_object()) return make_error("the catalog is not a JSON object");
  const auto version = j.find("format_version");
  if (version == j.end() || !version->is_number_integer())
    return make_error("the catalog has no format_version (a whole number)");
  if (version->get<int64_t>() != kCatalogFormatVersion)
    return make_error("catalog format version " + std::to_string(version->get<int64_t>()) +
                      " is not supported (this Glassbox reads version " + std::to_string(kCatalogFormatVersion) +
                      "; a newer Glassbox may read it)");
  const auto models = j.find("models");
  if (models == j.end() || !models->is_array()) return make_error("the catalog has no 'models' array");
  if (models->empty()) return make_error("the catalog lists no models");
  Catalog c;
  std::set<std::string> ids;
  for (size_t i = 0; i < models->size(); ++i) {
    const json& e = (*models)[i];
    std::string where = "model " + std::to_string(i + 1);
    if (e.is_object())
      if (const auto id = e.find("id"); id != e.end() && id->is_string())
        where += " (" + id->get<std::string>().substr(0, 64) + ")";
    CatalogEntry entry;
    if (Status st = read_entry(e, where, entry); !st) return st.error();
    if (!ids.insert(entry.id).second) return make_error(where + ": id '" + entry.id + "' appears twice");
    c.entries.push_back(std::move(entry));
  }
  return c;
}

const CatalogEntry* find_catalog_entry(const Catalog& catalog, std::string_view id) {
  for (const CatalogEntry& e : catalog.entries)
    if (e.id == id) return &e;
  return nullptr;
}

ModelSpec catalog_spec(const CatalogEntry& entry) {
  ModelSpec s;
  s.repo = entry.repo;
  s.file = entry.file;
  return s;
}

Result<ModelSpec> resolve_pull_spec(std::string_view text, const Catalog* catalog) {
  if (text.find('/') != std::string_view::npos) return parse_model_spec(text);
  if (catalog)
    if (const CatalogEntry* e = find_catalog_entry(*catalog, text)) return catalog_spec(*e);
  std::string ids;
  if (catalog)
    for (const CatalogEntry& e : catalog->entries) ids += (ids.empty() ? "" : ", ") + e.id;
  return make_error(std::string(text) + ": not a catalog id, an OWNER/NAME[:FILE][@REVISION] repository or an http(s) URL" +
                    (ids.empty() ? std::string(" (no catalog was found)") : "; the catalog's ids: " + ids));
}

fs::path user_catalog_path() {
  if (std::string d = env_or_empty("XDG_DATA_HOME"); !d.empty()) return fs::path(d) / "glassbox" / "catalog.json";
  return fs::path(env_or_empty("HOME")) / ".local" / "share" / "glassbox" / "catalog.json";
}

std::vector<fs::path> shipped_catalog_paths() {
  std::vector<fs::path> out;
  const fs::path relative = fs::path("share") / "glassbox" / "catalog.json";
  // PREFIX/bin/glassbox finds PREFIX/share; a program in a build tree
  // (build/app/glassbox-cli, build/app/gui/glassbox, build/tests/ui/...) finds
  // build/share, where resources/CMakeLists.txt copies the catalog. Looked up
  // from the executable, so no build path is compiled in.
  if (fs::path dir = executable_dir(); !dir.empty()) {
    for (int up = 0; up < 4; ++up) {
      const fs::path parent = dir.parent_path();
      if (parent.empty() || parent == dir) break;
      dir = parent;
      out.push_back(dir / relative);
    }
  }
  std::string dirs = env_or_empty("XDG_DATA_DIRS");
  if (dirs.empty()) dirs = "/usr/local/share:/usr/share";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    if (colon > start) out.push_back(fs::path(dirs.substr(start, colon - start)) / "glassbox" / "catalog.json");
    start = colon + 1;
  }
  return out;
}

Result<LoadedCatalog> load_catalog(const fs::path& user_path, const std::vector<fs::path>& shipped) {
  LoadedCatalog loaded;
  std::error_code ec;
  if (fs::exists(user_path, ec)) {
    auto user = read_catalog_file(user_path);
    if (user) {
      loaded.catalog = std::move(*user);
      loaded.path = user_path;
      loaded.user_copy = true;
      return loaded;
    }
    loaded.note = "the user catalog is not used: " + user.error().message;
  }
  std::string tried;
  for (const fs::path& p : shipped) {
    if (!fs::exists(p, ec)) {
      tried += "\n  " + p.string() + ": not there";
      continue;
    }
    auto c = read_catalog_file(p);
    if (!c) {
      tried += "\n  " + c.error().message;
      continue;
    }
    loaded.catalog = std::move(*c);
    loaded.path = p;
    return loaded;
  }
  return make_error("no model catalog found" + (loaded.note.empty() ? std::string() : " (" + loaded.note + ")") +
                    "; tried:\n  " + user_path.string() + (fs::exists(user_path, ec) ? ": not valid" : ": not there") +
                    tried);
}

Result<LoadedCatalog> load_catalog() { return load_catalog(user_catalog_path(), shipped_catalog_paths()); }

Result<ModelSpec> resolve_pull_spec(std::string_view text) {
  if (text.find('/') != std::string_view::npos) return parse_model_spec(text);
  auto loaded = load_catalog();
  if (!loaded)
    return make_error(std::string(text) +
                      ": not an OWNER/NAME[:FILE][@REVISION] repository or an http(s) URL, and as a catalog id: " +
                      loaded.error().message);
  return resolve_pull_spec(text, &loaded->catalog);
}

Result<Catalog> update_catalog(const std::string& url, const fs::path& user_path) {
  const bool local = url.rfind("file://", 0) == 0;
  if (!local && url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return make_error(url + ": a catalog is fetched from an http://, https:// or file:// URL");
  auto text = local ? read_text_file(url.substr(7), kMaxCatalogDocumentBytes)
                    : fetch_text(url, {}, kMaxCatalogDocumentBytes);
  if (!text)
    return make_error("the catalog could not be fetched (" + text.error().message + "); " + user_path.string() +
                      " was left as it was");
  auto catalog = parse_catalog(*text);
  if (!catalog)
    return make_error(url + " is not a valid catalog (" + catalog.error().message + "); " + user_path.string() +
                      " was left as it was");
  std::error_code ec;
  fs::create_directories(user_path.parent_path(), ec);
  if (ec) return make_error("cannot create " + user_path.parent_path().string() + ": " + ec.message());
  // The document as published (unknown fields and all), all at once.
  if (Status st = write_file_atomically(user_path.string(), *text); !st) return st.error();
  return catalog;
}

std::vector<CatalogEntryState> catalog_states(const Catalog& catalog, const fs::path& models_dir, uint64_t available) {
  if (available == 0) available = available_host_memory();
  std::vector<CatalogEntryState> out;
  out.reserve(catalog.entries.size());
  for (const CatalogEntry& e : catalog.entries) {
    CatalogEntryState s;
    // Where plan_pull puts it: the models folder, under the file's own name.
    s.local_path = models_dir / fs::path(e.file).filename();
    std::error_code ec;
    s.downloaded = fs::is_regular_file(s.local_path, ec);
    // The file's bytes stand in for the weights (the vocabulary is a few MiB
    // more): on the safe side.
    s.fit = estimate_fit(e.size_bytes, e.kv_bytes_per_token, e.context_length, available);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gb::download
