// Getting models: Hugging Face repositories and plain HTTPS URLs, downloaded
// with progress, cancel and resume, verified before they take their name, into
// a models folder that is scanned for what fits this machine (issue #43).
//
// The hub's conventions: HF_ENDPOINT (a mirror; default https://huggingface.co),
// HF_TOKEN (gated repositories), GET {endpoint}/api/models/{repo}/tree/{revision}
// lists files with their sizes and, for LFS files, their sha256;
// GET {endpoint}/{repo}/resolve/{revision}/{file} serves a file (redirects
// followed). HTTP through libcurl (Debian's libcurl4: TLS, redirects, Range
// and progress in one well-kept library).
//
// A download goes to NAME.part beside its destination (NAME.part.lock held
// while it runs, so a second download of the same file is refused), resumes an
// existing part with a Range request, checks the free disk space first, and is
// renamed to NAME only after its size, its sha256 (when the source states one)
// and the GGUF magic were checked: nothing half-written ever has a real
// model's name. A mismatch deletes the part and says so.
// Threads: any; a download blocks its caller (run it on a worker thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gb::download {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing slash
  std::string token;                                // "" = anonymous
};
// HF_ENDPOINT and HF_TOKEN from the environment, the defaults otherwise.
HubOptions hub_options_from_env();

// What `models pull` accepts: an http(s) URL, or REPO[:FILE][@REVISION] with
// REPO = owner/name (FILE: a path in the repository; "" = choose from the list).
struct ModelSpec {
  bool is_url = false;
  std::string url;
  std::string repo, file, revision = "main";
};
Result<ModelSpec> parse_model_spec(std::string_view text);

struct RemoteFile {
  std::string path;    // in the repository
  uint64_t size = 0;
  std::string sha256;  // lower-case hex, "" when the hub states none (not an LFS file)
};
// The hub's tree listing (a JSON array of {type, path, size, lfs: {oid, size}});
// files only. Pure, for tests and the fuzz harness.
Result<std::vector<RemoteFile>> parse_repo_tree(std::string_view json);
Result<std::vector<RemoteFile>> list_repo_files(const HubOptions& hub, const std::string& repo,
                                                const std::string& revision);
std::string resolve_url(const HubOptions& hub, const ModelSpec& spec, const std::string& file);
// GET of a small document (the tree listing, a catalog) into memory: an error
// unless it answers 200 within max_bytes.
Result<std::string> fetch_text(const std::string& url, const std::string& bearer_token = {},
                               size_t max_bytes = size_t{64} << 20);

struct Progress {
  uint64_t done = 0;   // bytes in the destination's part, resumed ones included
  uint64_t total = 0;  // 0 when unknown
  double bytes_per_s = 0.0;
};

struct DownloadOptions {
  std::string url;
  std::filesystem::path destination;  // the final file name
  uint64_t expected_size = 0;         // 0: not known beforehand
  std::string expected_sha256;        // "": not checked
  std::string bearer_token;           // sent as Authorization (HF_TOKEN)
  bool require_gguf = true;           // the file must start with the GGUF magic
  // Called from the downloading thread; return false to cancel (the part stays
  // for a later resume).
  std::function<bool(const Progress&)> progress;
  const std::atomic<bool>* cancel = nullptr;
};
// The destination on success. Errors name what happened: not found (404), a
// gated repository without a token (401/403), the disk too full, a wrong
// sha256 or size, not a GGUF file, another download of it running, cancelled,
// the connection lost (the part is kept; run it again to resume).
Result<std::filesystem::path> download_file(const DownloadOptions& options);

// What `models pull SPEC` downloads into `dir`: for a repository, the named
// file (or its only GGUF) from the hub's listing, with the size and sha256 the
// hub states and the token; for a URL, the URL. An error lists the
// repository's GGUF files when the choice is not clear, or says the
// destination exists. progress and cancel are left to the caller.
Result<DownloadOptions> plan_pull(const ModelSpec& spec, const HubOptions& hub, const std::filesystem::path& dir);

// The models folder: GLASSBOX_MODELS_DIR, else $XDG_DATA_HOME/glassbox/models,
// else ~/.local/share/glassbox/models.
std::filesystem::path default_models_dir();

// The fit rule of `models list` and `models catalog`: the weights plus F16 K/V
// at min(context, 4096) tokens (4096 when the context is unknown) within the
// memory available now (`available` 0: unknown, which counts as fitting).
struct FitEstimate {
  uint64_t kv_bytes = 0;      // F16 K/V at those tokens
  uint64_t needed_bytes = 0;  // weights + that KV
  bool fits = false;
};
FitEstimate estimate_fit(uint64_t weight_bytes, uint64_t kv_bytes_per_token, int64_t context_length,
                         uint64_t available);

struct LocalModel {
  std::filesystem::path path;
  uint64_t file_bytes = 0;
  std::string architecture;  // "llama", "gemma3", ...; "" when unreadable
  std::string weights;       // the weight mix, "Q4_K_M, 4.9 bpw"-like; or the read error
  int64_t context_length = 0;
  uint64_t kv_bytes = 0;       // F16 K/V at min(context, 4096) tokens
  uint64_t needed_bytes = 0;   // weights + that KV
  bool fits = false;           // needed_bytes within the memory available now
  bool readable = false;
};
// Every *.gguf in `dir` (not its .part files), name order. `available` 0: this
// machine's available memory.
std::vector<LocalModel> scan_models(const std::filesystem::path& dir, uint64_t available = 0);

}  // namespace gb::download
