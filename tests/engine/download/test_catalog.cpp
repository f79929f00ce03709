// The model catalog (engine/download/catalog.h): the shipped catalog is valid
// and every entry resolves to a pull spec; malformed catalogs are refused, each
// with its reason (one mutation of a valid document per row); unknown fields
// are ignored; the user copy wins only while it is valid; an update replaces it
// atomically and a bad one leaves it as it was; an entry's state says whether
// it is in the models folder and whether it fits, by the rule of `models list`.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "download/catalog.h"
#include "gb_test.h"

namespace {

namespace fs = std::filesystem;
namespace dl = gb::download;
using nlohmann::json;

json valid_catalog_doc() {
  return json::parse(R"({"format_version": 1, "models": [
    {"id": "tiny-1", "name": "Tiny One", "repo": "acme/tiny-GGUF", "file": "tiny-Q4_K_M.gguf",
     "size_bytes": 1000000, "weight_type": "Q4_K_M", "architecture": "llama", "parameters": 1000,
     "context_length": 8192, "license": "mit", "description": "A tiny model.", "kv_bytes_per_token": 100},
    {"id": "tiny-2", "name": "Tiny Two", "repo": "acme/tiny2-GGUF", "file": "sub/dir/tiny2-Q8_0.gguf",
     "size_bytes": 2000000, "weight_type": "Q8_0", "architecture": "qwen2", "parameters": 2000,
     "context_length": 100, "license": "apache-2.0", "description": "Another one."}]})");
}

std::string write_catalog_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string read_file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path catalog_test_dir(const std::string& name) {
  const fs::path d = fs::path(gbtest::temp_dir()) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

GB_TEST(shipped_catalog_is_valid_and_every_entry_resolves_to_a_pull_spec) {
  const std::string text = read_file_text(GLASSBOX_SOURCE_CATALOG);
  QVERIFY2(!text.empty(), GLASSBOX_SOURCE_CATALOG);
  auto catalog = dl::parse_catalog(text);
  QVERIFY2(catalog.ok(), catalog.ok() ? "" : catalog.error().message.c_str());
  QVERIFY(catalog->entries.size() >= 6);
  for (const dl::CatalogEntry& e : catalog->entries) {
    // REPO:FILE as `models pull` reads it names the same repository and file.
    auto spec = dl::parse_model_spec(e.repo + ":" + e.file);
    QVERIFY2(spec.ok(), e.id.c_str());
    QCOMPARE(spec->repo, e.repo);
    QCOMPARE(spec->file, e.file);
    auto resolved = dl::resolve_pull_spec(e.id, &*catalog);
    QVERIFY2(resolved.ok(), e.id.c_str());
    QCOMPARE(resolved->repo, e.repo);
    QCOMPARE(resolved->file, e.file);
    QCOMPARE(resolved->revision, std::string("main"));
    QVERIFY2(e.kv_bytes_per_token > 0, e.id.c_str());
  }
  QVERIFY(dl::find_catalog_entry(*catalog, "gemma-3-270m-it") != nullptr);
  QVERIFY(dl::find_catalog_entry(*catalog, "no-such-model") == nullptr);
}

GB_TEST(pull_specs_resolve_catalog_ids_and_pass_repositories_and_urls_through) {
  auto catalog = dl::parse_catalog(valid_catalog_doc().dump());
  QVERIFY(catalog.ok());
  auto id = dl::resolve_pull_spec("tiny-2", &*catalog);
  QVERIFY(id.ok() && !id->is_url);
  QCOMPARE(id->repo, std::string("acme/tiny2-GGUF"));
  QCOMPARE(id->file, std::string("sub/dir/tiny2-Q8_0.gguf"));
  auto repo = dl::resolve_pull_spec("owner/name:x.gguf@v2", &*catalog);
  QVERIFY(repo.ok());
  QCOMPARE(repo->revision, std::string("v2"));
  auto url = dl::resolve_pull_spec("https://example.org/m.gguf", nullptr);
  QVERIFY(url.ok() && url->is_url);
  auto unknown = dl::resolve_pull_spec("tiny-3", &*catalog);
  QVERIFY(!unknown.ok());
  QVERIFY2(unknown.error().message.find("tiny-1, tiny-2") != std::string::npos, unknown.error().message.c_str());
  QVERIFY(!dl::resolve_pull_spec("tiny-1", nullptr).ok());
}

GB_TEST(malformed_catalogs_are_refused_with_the_reason) {
  QVERIFY(dl::parse_catalog(valid_catalog_doc().dump()).ok());
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* reason;  // a part of the error message
  };
  json& (*entry)(json&, int) = [](json& d, int i) -> json& { return d["models"][static_cast<size_t>(i)]; };
  const std::vector<Case> cases = {
      {"newer format", [](json& d) { d["format_version"] = 2; }, "format version 2 is not supported"},
      {"no format", [](json& d) { d.erase("format_version"); }, "no format_version"},
      {"format as text", [](json& d) { d["format_version"] = "1"; }, "no format_version"},
      {"not an object", [](json& d) { d = json::array({d}); }, "not a JSON object"},
      {"no models", [](json& d) { d.erase("models"); }, "no 'models' array"},
      {"empty models", [](json& d) { d["models"] = json::array(); }, "lists no models"},
      {"entry not an object", [](json& d) { d["models"].push_back("x"); }, "model 3 is not an object"},
      {"id twice", [entry](json& d) { entry(d, 1)["id"] = "tiny-1"; }, "id 'tiny-1' appears twice"},
      {"id with capitals", [entry](json& d) { entry(d, 0)["id"] = "Tiny"; }, "not a short slug"},
      {"id with a slash", [entry](json& d) { entry(d, 0)["id"] = "a/b"; }, "not a short slug"},
      {"id too long", [entry](json& d) { entry(d, 0)["id"] = std::string(65, 'a'); }, "not a short slug"},
      {"empty name", [entry](json& d) { entry(d, 0)["name"] = ""; }, "'name' is empty"},
      {"name as number", [entry](json& d) { entry(d, 0)["name"] = 5; }, "'name' is not a string"},
      {"two-line description", [entry](json& d) { entry(d, 1)["description"] = "a\nb"; }, "not one line"},
      {"long description", [entry](json& d) { entry(d, 1)["description"] = std::string(401, 'x'); }, "longer than"},
      {"repo without owner", [entry](json& d) { entry(d, 0)["repo"] = "tiny"; }, "is not OWNER/NAME"},
      {"repo too deep", [entry](json& d) { entry(d, 0)["repo"] = "a/b/c"; }, "is not OWNER/NAME"},
      {"repo with a file", [entry](json& d) { entry(d, 0)["repo"] = "a/b:x.gguf"; }, "is not OWNER/NAME"},
      {"repo with a revision", [entry](json& d) { entry(d, 0)["repo"] = "a/b@v1"; }, "is not OWNER/NAME"},
      {"repo parent", [entry](json& d) { entry(d, 0)["repo"] = "../b"; }, "is not OWNER/NAME"},
      {"repo as URL", [entry](json& d) { entry(d, 0)["repo"] = "https://h/a/b"; }, "is not OWNER/NAME"},
      {"file with ..", [entry](json& d) { entry(d, 0)["file"] = "../x.gguf"; }, "not a .gguf path"},
      {"file with inner ..", [entry](json& d) { entry(d, 0)["file"] = "a/../../x.gguf"; }, "not a .gguf path"},
      {"absolute file", [entry](json& d) { entry(d, 0)["file"] = "/etc/x.gguf"; }, "not a .gguf path"},
      {"not a GGUF", [entry](json& d) { entry(d, 0)["file"] = "model.bin"; }, "not a .gguf path"},
      {"only an extension", [entry](json& d) { entry(d, 0)["file"] = "dir/.gguf"; }, "not a .gguf path"},
      {"file with @", [entry](json& d) { entry(d, 0)["file"] = "x@main.gguf"; }, "not a .gguf path"},
      {"file with backslash", [entry](json& d) { entry(d, 0)["file"] = "a\\x.gguf"; }, "not a .gguf path"},
      {"file with a query", [entry](json& d) { entry(d, 0)["file"] = "x.gguf?y.gguf"; }, "not a .gguf path"},
      {"size as text", [entry](json& d) { entry(d, 0)["size_bytes"] = "1000"; }, "'size_bytes' is not a whole number"},
      {"negative size", [entry](json& d) { entry(d, 0)["size_bytes"] = -1; }, "'size_bytes' is not a whole number"},
      {"fractional size", [entry](json& d) { entry(d, 0)["size_bytes"] = 1.5; }, "'size_bytes' is not a whole number"},
      {"zero size", [entry](json& d) { entry(d, 0)["size_bytes"] = 0; }, "size_bytes 0 is outside"},
      {"absurd size", [entry](json& d) { entry(d, 0)["size_bytes"] = uint64_t{1} << 41; }, "is outside"},
      {"zero parameters", [entry](json& d) { entry(d, 0)["parameters"] = 0; }, "parameters 0 is outside"},
      {"zero context", [entry](json& d) { entry(d, 0)["context_length"] = 0; }, "context_length 0 is outside"},
      {"absurd context", [entry](json& d) { entry(d, 0)["context_length"] = 1 << 25; }, "is outside"},
      {"kv as text", [entry](json& d) { entry(d, 0)["kv_bytes_per_token"] = "x"; }, "not a whole number"},
      {"zero kv", [entry](json& d) { entry(d, 0)["kv_bytes_per_token"] = 0; }, "kv_bytes_per_token 0 is outside"},
  };
  for (const Case& c : cases) {
    json doc = valid_catalog_doc();
    c.mutate(doc);
    auto r = dl::parse_catalog(doc.dump());
    QVERIFY2(!r.ok(), c.what);
    QVERIFY2(r.error().message.find(c.reason) != std::string::npos, (std::string(c.what) + ": " + r.error().message).c_str());
  }
  // Every required field, missing: named, with its entry.
  for (const char* key : {"id", "name", "repo", "file", "size_bytes", "weight_type", "architecture", "parameters",
                          "context_length", "license", "description"}) {
    json doc = valid_catalog_doc();
    entry(doc, 1).erase(key);
    auto r = dl::parse_catalog(doc.dump());
    QVERIFY2(!r.ok(), key);
    QVERIFY2(r.error().message.find(std::string("missing field '") + key + "'") != std::string::npos &&
                 r.error().message.find("model 2") != std::string::npos,
             r.error().message.c_str());
  }
  for (const char* text : {"", "not json", "{", "[]", "null", "{\"format_version\":1,\"models\":{}}"})
    QVERIFY2(!dl::parse_catalog(text).ok(), text);
}

GB_TEST(unknown_catalog_fields_are_ignored_and_kv_is_optional) {
  json doc = valid_catalog_doc();
  doc["published"] = "2027-01-01";
  doc["models"][0]["sha256"] = "whatever a later catalog adds";
  doc["models"][0]["tags"] = json::array({"chat"});
  auto c = dl::parse_catalog(doc.dump());
  QVERIFY2(c.ok(), c.ok() ? "" : c.error().message.c_str());
  QCOMPARE(c->entries.size(), size_t{2});
  const dl::CatalogEntry& a = c->entries[0];
  QCOMPARE(a.id, std::string("tiny-1"));
  QCOMPARE(a.size_bytes, uint64_t{1000000});
  QCOMPARE(a.parameters, uint64_t{1000});
  QCOMPARE(a.context_length, int64_t{8192});
  QCOMPARE(a.kv_bytes_per_token, uint64_t{100});
  QCOMPARE(c->entries[1].kv_bytes_per_token, uint64_t{0});
  QCOMPARE(c->entries[1].file, std::string("sub/dir/tiny2-Q8_0.gguf"));
}

GB_TEST(the_user_catalog_is_used_only_while_it_is_valid) {
  const fs::path d = catalog_test_dir("catalog-lookup");
  json user_doc = valid_catalog_doc();
  user_doc["models"][0]["name"] = "From the user copy";
  const fs::path user = d / "user" / "catalog.json";
  const fs::path missing = d / "nowhere" / "catalog.json";
  const fs::path broken = d / "broken" / "catalog.json";
  const fs::path shipped = d / "shipped" / "catalog.json";
  write_catalog_file(broken, "{\"format_version\": 1, \"models\": [}");
  write_catalog_file(shipped, valid_catalog_doc().dump());

  // No user copy: the first shipped catalog there is and valid.
  auto a = dl::load_catalog(user, {missing, broken, shipped});
  QVERIFY2(a.ok(), a.ok() ? "" : a.error().message.c_str());
  QCOMPARE(a->path, shipped);
  QVERIFY(!a->user_copy && a->note.empty());
  QCOMPARE(a->catalog.entries[0].name, std::string("Tiny One"));

  // A valid user copy wins.
  write_catalog_file(user, user_doc.dump());
  auto b = dl::load_catalog(user, {shipped});
  QVERIFY(b.ok() && b->user_copy);
  QCOMPARE(b->catalog.entries[0].name, std::string("From the user copy"));

  // An invalid one is passed over, and the note says why.
  write_catalog_file(user, "{\"format_version\": 9, \"models\": []}");
  auto c = dl::load_catalog(user, {shipped});
  QVERIFY(c.ok() && !c->user_copy);
  QVERIFY2(c->note.find("format version 9") != std::string::npos, c->note.c_str());

  // Nothing valid anywhere: an error naming what was tried.
  auto none = dl::load_catalog(user, {missing, broken});
  QVERIFY(!none.ok());
  QVERIFY2(none.error().message.find(missing.string()) != std::string::npos &&
               none.error().message.find(broken.string()) != std::string::npos,
           none.error().message.c_str());
}

GB_TEST(a_program_in_the_build_tree_finds_the_shipped_catalog_above_it) {
  // This test runs from build/tests/engine/download: the build's copy of the
  // catalog in build/share/glassbox is the first shipped catalog there is.
  ::setenv("XDG_DATA_DIRS", "/nonexistent-a::/nonexistent-b/", 1);
  const std::vector<fs::path> shipped = dl::shipped_catalog_paths();
  ::unsetenv("XDG_DATA_DIRS");
  QVERIFY(shipped.size() >= 2);
  QCOMPARE(shipped[shipped.size() - 2], fs::path("/nonexistent-a/glassbox/catalog.json"));
  QCOMPARE(shipped.back(), fs::path("/nonexistent-b/glassbox/catalog.json"));
  const fs::path d = catalog_test_dir("catalog-build-tree");
  auto loaded = dl::load_catalog(d / "no-user-copy.json", shipped);
  QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
  QVERIFY(!loaded->user_copy);
  QCOMPARE(read_file_text(loaded->path), read_file_text(GLASSBOX_SOURCE_CATALOG));
  QVERIFY2(loaded->path.string().rfind("/usr/", 0) != 0, loaded->path.c_str());
}

GB_TEST(catalog_update_replaces_the_user_copy_only_with_a_valid_catalog) {
  const fs::path d = catalog_test_dir("catalog-update");
  const fs::path user = d / "data" / "glassbox" / "catalog.json";
  const std::string good = valid_catalog_doc().dump(2);
  const std::string source = write_catalog_file(d / "good.json", good);
  auto updated = dl::update_catalog("file://" + source, user);
  QVERIFY2(updated.ok(), updated.ok() ? "" : updated.error().message.c_str());
  QCOMPARE(updated->entries.size(), size_t{2});
  QCOMPARE(read_file_text(user), good);  // the document as published, unknown fields and all

  // A bad download, a bad document, another scheme: the user copy stays.
  const std::string bad = write_catalog_file(d / "bad.json", "{\"format_version\": 1, \"models\": []}");
  for (const std::string& url : {"file://" + bad, "file://" + (d / "absent.json").string(),
                                 std::string("ftp://example.org/catalog.json")}) {
    auto r = dl::update_catalog(url, user);
    QVERIFY2(!r.ok(), url.c_str());
    QCOMPARE(read_file_text(user), good);
  }
  auto r = dl::update_catalog("file://" + bad, user);
  QVERIFY2(!r.ok() && r.error().message.find("lists no models") != std::string::npos &&
               r.error().message.find("left as it was") != std::string::npos,
           r.error().message.c_str());
  // No temporary file is left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(user.parent_path())) ++files;
  QCOMPARE(files, 1);
}

GB_TEST(catalog_states_say_downloaded_and_fit_by_the_rule_of_models_list) {
  const fs::path models = catalog_test_dir("catalog-models");
  auto c = dl::parse_catalog(valid_catalog_doc().dump());
  QVERIFY(c.ok());
  std::ofstream(models / "tiny2-Q8_0.gguf") << "GGUF";  // a file in a repository folder lands under its own name
  std::ofstream(models / "tiny-Q4_K_M.gguf.part") << "GG";  // a part is not a download
  // tiny-1: 1000000 + 100 x min(8192, 4096); tiny-2: no KV stated, 2000000.
  const uint64_t needed1 = 1000000 + 100 * 4096;
  auto fits_both = dl::catalog_states(*c, models, 10000000);
  QCOMPARE(fits_both.size(), size_t{2});
  QVERIFY(!fits_both[0].downloaded);
  QVERIFY(fits_both[1].downloaded);
  QCOMPARE(fits_both[1].local_path, models / "tiny2-Q8_0.gguf");
  QCOMPARE(fits_both[0].fit.needed_bytes, needed1);
  QCOMPARE(fits_both[0].fit.kv_bytes, uint64_t{409600});
  QCOMPARE(fits_both[1].fit.needed_bytes, uint64_t{2000000});
  QVERIFY(fits_both[0].fit.fits && fits_both[1].fit.fits);
  auto tight = dl::catalog_states(*c, models, needed1);  // exactly enough for tiny-1, not for tiny-2
  QVERIFY(tight[0].fit.fits);
  QVERIFY(!tight[1].fit.fits);
  auto too_small = dl::catalog_states(*c, models, needed1 - 1);
  QVERIFY(!too_small[0].fit.fits);
}

GB_TEST(the_fit_rule_counts_kv_at_the_context_up_to_4096_tokens) {
  QCOMPARE(dl::estimate_fit(10, 2, 100, 0).needed_bytes, uint64_t{210});
  QCOMPARE(dl::estimate_fit(10, 2, 0, 0).kv_bytes, uint64_t{8192});      // unknown context: 4096 tokens
  QCOMPARE(dl::estimate_fit(10, 2, 1 << 20, 0).kv_bytes, uint64_t{8192});  // capped at 4096
  QVERIFY(dl::estimate_fit(10, 2, 100, 0).fits);                            // memory unknown
  QVERIFY(dl::estimate_fit(10, 2, 100, 210).fits);
  QVERIFY(!dl::estimate_fit(10, 2, 100, 209).fits);
}
