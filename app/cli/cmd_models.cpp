// `glassbox-cli models list|pull|rm|catalog` (engine/download/model_download.h, catalog.h):
//   models list [--dir D] [--json]          every GGUF in the models folder: architecture,
//                                           weights, context, whether it fits this machine
//   models pull SPEC [--dir D] [--json]     SPEC: OWNER/NAME[:FILE][@REVISION] on the hub
//                                           (HF_ENDPOINT, HF_TOKEN), an http(s) URL, or the
//                                           id of a catalog entry; progress on stderr,
//                                           resume, sha256 verified
//   models rm NAME [--dir D]                deletes a model of the folder (and its part)
//   models catalog [--dir D] [--json]       the catalog of well-known models: whether each
//                                           is downloaded and whether it fits this machine
//   models catalog --update [URL]           replaces the user copy of the catalog with the
//                                           one at URL (default: default_catalog_url()),
//                                           validated first
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command_registry.h"
#include "download/catalog.h"
#include "download/model_download.h"

namespace gb::cli {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct ModelsArgs {
  std::string dir;
  bool json = false;
  std::string spec;
  std::string name;
  bool update = false;      // models catalog --update
  std::string update_url;   // "" = download::default_catalog_url()
};

fs::path models_dir(const ModelsArgs& a) { return a.dir.empty() ? download::default_models_dir() : fs::path(a.dir); }

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

int run_list(const ModelsArgs& a) {
  const fs::path dir = models_dir(a);
  const auto models = download::scan_models(dir);
  if (a.json) {
    json out = json::array();
    for (const auto& m : models)
      out.push_back({{"path", m.path.string()}, {"file_bytes", m.file_bytes}, {"readable", m.readable},
                     {"architecture", m.architecture}, {"weights", m.weights}, {"context_length", m.context_length},
                     {"kv_bytes", m.kv_bytes}, {"needed_bytes", m.needed_bytes}, {"fits", m.fits}});
    std::printf("%s\n", json{{"dir", dir.string()}, {"models", out}}.dump(2).c_str());
    return 0;
  }
  if (models.empty()) {
    std::printf("no models in %s (glassbox-cli models pull OWNER/NAME:FILE.gguf)\n", dir.string().c_str());
    return 0;
  }
  std::printf("%s\n", dir.string().c_str());
  for (const auto& m : models) {
    if (!m.readable) {
      std::printf("  %-40s  cannot read: %s\n", m.path.filename().string().c_str(), m.weights.c_str());
      continue;
    }
    std::printf("  %-40s  %-8s %-24s ctx %-7lld %s  %s\n", m.path.filename().string().c_str(), m.architecture.c_str(),
                m.weights.c_str(), static_cast<long long>(m.context_length), mib(m.file_bytes).c_str(),
                m.fits ? "fits" : ("does not fit (" + mib(m.needed_bytes) + " needed)").c_str());
  }
  return 0;
}

std::atomic<bool> g_cancel{false};

int run_pull(const ModelsArgs& a) {
  auto spec = download::resolve_pull_spec(a.spec);
  if (!spec) return fail(spec.error().message);
  auto planned = download::plan_pull(*spec, download::hub_options_from_env(), models_dir(a));
  if (!planned) return fail(planned.error().message);
  download::DownloadOptions& o = *planned;
  std::signal(SIGINT, [](int) { g_cancel = true; });
  o.cancel = &g_cancel;
  auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  o.progress = [&](const download::Progress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(250)) return true;
    last = now;
    if (p.total) {
      const double left = p.bytes_per_s > 0 ? static_cast<double>(p.total - std::min(p.done, p.total)) / p.bytes_per_s : 0;
      std::fprintf(stderr, "\r%s of %s (%.0f%%), %s/s, %.0f s left   ", mib(p.done).c_str(), mib(p.total).c_str(),
                   100.0 * static_cast<double>(p.done) / static_cast<double>(p.total),
                   mib(static_cast<uint64_t>(p.bytes_per_s)).c_str(), left);
    } else {
      std::fprintf(stderr, "\r%s, %s/s   ", mib(p.done).c_str(), mib(static_cast<uint64_t>(p.bytes_per_s)).c_str());
    }
    return true;
  };
  auto done = download::download_file(o);
  std::fprintf(stderr, "\n");
  if (!done) return fail(done.error().message);
  if (a.json) {
    std::printf("%s\n", json{{"path", done->string()}, {"url", o.url}, {"sha256", o.expected_sha256},
                             {"bytes", fs::file_size(*done)}}
                            .dump(2)
                            .c_str());
  } else {
    std::printf("downloaded %s%s\n", done->string().c_str(), o.expected_sha256.empty() ? "" : " (sha256 verified)");
  }
  return 0;
}

int run_rm(const ModelsArgs& a) {
  const fs::path dir = models_dir(a);
  const fs::path name = fs::path(a.name).filename();
  if (name.empty() || name != fs::path(a.name) || name.extension() != ".gguf")
    return fail(a.name + ": give the file name of a .gguf model in " + dir.string());
  const fs::path path = dir / name;
  std::error_code ec;
  const bool removed = fs::remove(path, ec);
  fs::remove(path.string() + ".part", ec);
  if (!removed) return fail(path.string() + ": no such model");
  std::printf("removed %s\n", path.string().c_str());
  return 0;
}

int run_catalog_update(const ModelsArgs& a) {
  const std::string url = a.update_url.empty() ? download::default_catalog_url() : a.update_url;
  const fs::path path = download::user_catalog_path();
  auto updated = download::update_catalog(url, path);
  if (!updated) return fail(updated.error().message);
  if (a.json) {
    std::printf("%s\n", json{{"path", path.string()}, {"url", url}, {"num_models", updated->entries.size()}}.dump(2).c_str());
  } else {
    std::printf("updated %s from %s: %zu models (glassbox-cli models catalog lists them)\n", path.string().c_str(),
                url.c_str(), updated->entries.size());
  }
  return 0;
}

int run_catalog(const ModelsArgs& a) {
  if (a.update) return run_catalog_update(a);
  auto loaded = download::load_catalog();
  if (!loaded) return fail(loaded.error().message);
  if (!loaded->note.empty()) std::fprintf(stderr, "glassbox-cli: %s\n", loaded->note.c_str());
  const fs::path dir = models_dir(a);
  const download::Catalog& c = loaded->catalog;
  const auto states = download::catalog_states(c, dir);
  if (a.json) {
    json out = json::array();
    for (size_t i = 0; i < c.entries.size(); ++i) {
      const download::CatalogEntry& e = c.entries[i];
      const download::CatalogEntryState& s = states[i];
      out.push_back({{"id", e.id}, {"name", e.name}, {"repo", e.repo}, {"file", e.file},
                     {"spec", e.repo + ":" + e.file}, {"size_bytes", e.size_bytes}, {"weight_type", e.weight_type},
                     {"architecture", e.architecture}, {"parameters", e.parameters},
                     {"context_length", e.context_length}, {"license", e.license}, {"description", e.description},
                     {"kv_bytes_per_token", e.kv_bytes_per_token}, {"downloaded", s.downloaded},
                     {"path", s.local_path.string()}, {"needed_bytes", s.fit.needed_bytes}, {"fits", s.fit.fits}});
    }
    std::printf("%s\n", json{{"catalog", loaded->path.string()}, {"user_copy", loaded->user_copy},
                             {"dir", dir.string()}, {"models", out}}
                            .dump(2)
                            .c_str());
    return 0;
  }
  std::printf("%s (%s); models folder %s\n", loaded->path.string().c_str(),
              loaded->user_copy ? "user copy" : "shipped", dir.string().c_str());
  std::printf("  %-24s %-26s %11s  %-7s %-8s %-9s %s\n", "ID", "NAME", "SIZE", "TYPE", "ARCH", "FITS", "DOWNLOADED");
  for (size_t i = 0; i < c.entries.size(); ++i) {
    const download::CatalogEntry& e = c.entries[i];
    const download::CatalogEntryState& s = states[i];
    std::printf("  %-24s %-26s %11s  %-7s %-8s %-9s %s\n", e.id.c_str(), e.name.c_str(), mib(e.size_bytes).c_str(),
                e.weight_type.c_str(), e.architecture.c_str(), s.fit.fits ? "yes" : "no",
                s.downloaded ? "yes" : "no");
  }
  std::printf("glassbox-cli models pull ID downloads one (the hub's size and sha256 are checked)\n");
  return 0;
}

const CommandRegistrar models_command("models", "List, download (pull) and remove models; the catalog of well-known models",
                                      [](CLI::App& sub) -> CommandRunner {
  auto a = std::make_shared<ModelsArgs>();
  auto which = std::make_shared<std::string>();
  sub.require_subcommand(1);
  const auto dir_opt = [&](CLI::App& s) {
    s.add_option("--dir", a->dir, "Models folder (default: GLASSBOX_MODELS_DIR or ~/.local/share/glassbox/models)");
  };
  CLI::App* list = sub.add_subcommand("list", "Every GGUF in the models folder and whether it fits this machine");
  dir_opt(*list);
  list->add_flag("--json", a->json, "JSON output");
  list->callback([which] { *which = "list"; });
  CLI::App* pull = sub.add_subcommand("pull", "Download a catalog id, OWNER/NAME[:FILE][@REVISION] (HF_ENDPOINT, HF_TOKEN) or an http(s) URL");
  pull->add_option("spec", a->spec, "Catalog id, OWNER/NAME[:FILE][@REVISION] or URL")->required();
  dir_opt(*pull);
  pull->add_flag("--json", a->json, "JSON output");
  pull->callback([which] { *which = "pull"; });
  CLI::App* rm = sub.add_subcommand("rm", "Delete a model of the models folder");
  rm->add_option("name", a->name, "File name, e.g. model-Q4_K_M.gguf")->required();
  dir_opt(*rm);
  rm->callback([which] { *which = "rm"; });
  CLI::App* catalog = sub.add_subcommand("catalog", "The catalog of well-known models: downloaded? fits here? (--update [URL] replaces it)");
  dir_opt(*catalog);
  catalog->add_flag("--json", a->json, "JSON output");
  CLI::Option* update = catalog->add_option("--update", a->update_url,
                                            "Download a catalog from URL (http, https or file; default: " +
                                                download::default_catalog_url() + "), validate it, replace the user copy")
                            ->expected(0, 1);
  catalog->callback([which, a, update] {
    *which = "catalog";
    a->update = update->count() > 0;
  });
  return [a, which] {
    if (*which == "list") return run_list(*a);
    if (*which == "pull") return run_pull(*a);
    if (*which == "catalog") return run_catalog(*a);
    return run_rm(*a);
  };
});

}  // namespace
}  // namespace gb::cli
