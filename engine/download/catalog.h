// The model catalog: a short list of well-known GGUF files on the Hugging Face
// hub (resources/models/catalog.json, installed as share/glassbox/catalog.json),
// as data. `models catalog` lists it, `models pull ID` downloads an entry, the
// workbench's Models dialog offers it ("Available to download") and shows it on
// a first start with an empty models folder (issue #43).
//
// The document (format version 1):
//   {"format_version": 1,
//    "models": [{"id": "gemma-3-270m-it", "name": "Gemma 3 270M Instruct",
//                "repo": "ggml-org/gemma-3-270m-it-GGUF", "file": "gemma-3-270m-it-Q8_0.gguf",
//                "size_bytes": 291545600, "weight_type": "Q8_0", "architecture": "gemma3",
//                "parameters": 268098176, "context_length": 32768, "license": "gemma",
//                "description": "one line", "kv_bytes_per_token": 18432}, ...]}
// kv_bytes_per_token is optional (F16 K and V of one token over all layers, for
// the fit estimate); other unknown fields are ignored, so a newer catalog of the
// same version still reads. A catalog states sizes for people: a download checks
// the size and sha256 the hub lists at download time, never the catalog's, so a
// wrong catalog can never let a bad file through.
//
// Which catalog: the user copy ($XDG_DATA_HOME/glassbox/catalog.json, else
// ~/.local/share/glassbox/catalog.json, i.e. beside the default models folder)
// when it exists and is valid, which `models catalog --update [URL]` replaces
// atomically; else the shipped one (share/glassbox/catalog.json beside the
// executable's prefix or a build tree it runs from, then $XDG_DATA_DIRS).
// Threads: any; update_catalog blocks on the network.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "download/model_download.h"

namespace gb::download {

inline constexpr int kCatalogFormatVersion = 1;
// Where `models catalog --update` with no URL fetches from (docs/models.md;
// the CMake option GLASSBOX_CATALOG_URL sets it for a distribution).
std::string default_catalog_url();

struct CatalogEntry {
  std::string id;            // [a-z0-9][a-z0-9._-]*, at most 64: what `models pull ID` takes
  std::string name;          // for people, "Gemma 3 270M Instruct"
  std::string repo;          // OWNER/NAME on the hub
  std::string file;          // a *.gguf path in the repository
  uint64_t size_bytes = 0;   // as the catalog states it (see above)
  std::string weight_type;   // "Q4_K_M", "Q8_0", ...
  std::string architecture;  // "llama", "gemma3", ...
  uint64_t parameters = 0;
  int64_t context_length = 0;
  std::string license;      // the hub's licence tag, "apache-2.0"
  std::string description;  // one line
  uint64_t kv_bytes_per_token = 0;  // 0: not stated (the fit counts the weights alone)
};

struct Catalog {
  int format_version = kCatalogFormatVersion;
  std::vector<CatalogEntry> entries;  // in the document's order
};

// Parses and validates a catalog document. Never throws. Errors name the entry
// (index and id) and the field: an unknown format version, a missing or
// mistyped field, an id that is not a short slug or appears twice, a repo that
// is not OWNER/NAME, a file that is absolute, has '..' or is not a .gguf, a size,
// parameter count or context outside sane bounds, no entries at all.
Result<Catalog> parse_catalog(std::string_view json);

// The entry called `id`, or nullptr.
const CatalogEntry* find_catalog_entry(const Catalog& catalog, std::string_view id);
// What pulling `entry` downloads: REPO:FILE at revision main.
ModelSpec catalog_spec(const CatalogEntry& entry);
// `models pull TEXT`: an http(s) URL or OWNER/NAME[:FILE][@REVISION] as
// parse_model_spec reads them, else (no '/' in TEXT) the id of an entry of
// `catalog` (nullptr: there is none), whose REPO:FILE it resolves to.
Result<ModelSpec> resolve_pull_spec(std::string_view text, const Catalog* catalog);
// The same with the catalog load_catalog() finds, read only when TEXT can be an
// id (what `models pull` and the Models dialog's download line accept).
Result<ModelSpec> resolve_pull_spec(std::string_view text);

// The user copy: $XDG_DATA_HOME/glassbox/catalog.json, else
// ~/.local/share/glassbox/catalog.json.
std::filesystem::path user_catalog_path();
// The shipped catalogs, in the order they are tried: share/glassbox/catalog.json
// in the folders above the running executable, nearest first, up to four
// (PREFIX/bin/.. of an installed or relocated package; the top of a build tree
// the program runs from), then each of $XDG_DATA_DIRS (default
// /usr/local/share:/usr/share).
std::vector<std::filesystem::path> shipped_catalog_paths();

struct LoadedCatalog {
  Catalog catalog;
  std::filesystem::path path;  // where it was read from
  bool user_copy = false;      // the user copy (else a shipped one)
  std::string note;            // why a user copy that exists was not used ("" when none)
};
// The user copy when it exists and is valid, else the first shipped catalog
// that is. An error says what was tried.
Result<LoadedCatalog> load_catalog(const std::filesystem::path& user_path,
                                   const std::vector<std::filesystem::path>& shipped);
Result<LoadedCatalog> load_catalog();  // user_catalog_path(), shipped_catalog_paths()

// Downloads the catalog at `url` (http, https, or file:// for local files and
// tests), validates it and replaces `user_path` atomically. A download or a
// document that fails leaves the old user copy as it was; the error says why.
Result<Catalog> update_catalog(const std::string& url, const std::filesystem::path& user_path);

// One catalog entry against this machine and a models folder.
struct CatalogEntryState {
  bool downloaded = false;           // the file is in the models folder
  std::filesystem::path local_path;  // where it is or would go
  FitEstimate fit;                   // the same rule as scan_models, from size_bytes and kv_bytes_per_token
};
// One state per entry, in order. `available` 0: this machine's available memory.
std::vector<CatalogEntryState> catalog_states(const Catalog& catalog, const std::filesystem::path& models_dir,
                                              uint64_t available = 0);

}  // namespace gb::download
