// parse_model_spec and parse_repo_tree: what `models pull` accepts, and what it
// takes from the hub's listing (sizes and LFS sha256), against hand-written cases.
#include <string>

#include "download/model_download.h"
#include "gb_test.h"

using gb::download::parse_model_spec;
using gb::download::parse_repo_tree;

GB_TEST(model_specs_name_a_repository_file_and_revision_or_a_url) {
  auto a = parse_model_spec("owner/name");
  QVERIFY(a.ok() && !a->is_url);
  QCOMPARE(a->repo, std::string("owner/name"));
  QVERIFY(a->file.empty());
  QCOMPARE(a->revision, std::string("main"));
  auto b = parse_model_spec("Org-1/My.Model_GGUF:sub/dir/m-Q4_K_M.gguf@v1.2");
  QVERIFY(b.ok());
  QCOMPARE(b->repo, std::string("Org-1/My.Model_GGUF"));
  QCOMPARE(b->file, std::string("sub/dir/m-Q4_K_M.gguf"));
  QCOMPARE(b->revision, std::string("v1.2"));
  auto u = parse_model_spec("https://example.org/files/x.gguf?download=true#frag");
  QVERIFY(u.ok() && u->is_url);
  QCOMPARE(u->file, std::string("x.gguf"));
  for (const char* bad : {"owner", "a/b/c", "/name", "owner/", "owner/name:../x.gguf", "owner/name:/etc/passwd",
                          "owner/name@", "ow ner/name", "file:///etc/passwd", "ftp://h/x.gguf", "https://h/",
                          "owner/..", "../name"}) {
    auto r = parse_model_spec(bad);
    QVERIFY2(!r.ok(), bad);
  }
  gb::download::HubOptions hub;
  hub.endpoint = "http://mirror.local";
  QCOMPARE(gb::download::resolve_url(hub, *b, b->file),
           std::string("http://mirror.local/Org-1/My.Model_GGUF/resolve/v1.2/sub/dir/m-Q4_K_M.gguf"));
  QCOMPARE(gb::download::resolve_url(hub, *u, u->file), u->url);
}

GB_TEST(repo_tree_lists_files_with_sizes_and_lfs_hashes) {
  const std::string hash(64, 'a');
  auto files = parse_repo_tree(R"([{"type":"directory","path":"docs"},
    {"type":"file","path":"README.md","size":12},
    {"type":"file","path":"m.gguf","size":100,"lfs":{"oid":"sha256:)" + hash + R"(","size":4096}},
    {"type":"file","path":"n.gguf","size":5,"lfs":{"oid":"not-a-hash","size":5}},
    {"type":"file","path":7},{"type":"file"},"junk",{"type":"file","path":"z","size":-3},
    {"type":"file","path":""},{"type":"file","path":"../x.gguf"},{"type":"file","path":"/abs.gguf"}])");
  QVERIFY(files.ok());
  QCOMPARE(files->size(), size_t{4});
  QCOMPARE((*files)[0].path, std::string("README.md"));
  QCOMPARE((*files)[0].size, uint64_t{12});
  QVERIFY((*files)[0].sha256.empty());
  QCOMPARE((*files)[1].size, uint64_t{4096});  // the LFS object's size, not the pointer's
  QCOMPARE((*files)[1].sha256, hash);
  QVERIFY((*files)[2].sha256.empty());  // an oid that is no sha256 is not trusted
  QCOMPARE((*files)[3].size, uint64_t{0});
  QVERIFY(!parse_repo_tree("{\"error\":\"Repository not found\"}").ok());
  QVERIFY(!parse_repo_tree("not json").ok());
}
