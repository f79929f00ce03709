#include "download/model_download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <utility>
#include <nlohmann/json.hpp>

#include "backend/kv_pool_sizing.h"
#include "core/environment.h"
#include "core/sha256.h"
#include "model/gguf_file.h"
#include "model/weight_report.h"

namespace gb::download {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int64_t kFitContext = 4096;       // the context "fits" is judged at
constexpr uint64_t kDiskMargin = 64 << 20;  // left free on the disk after a download

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool is_http_url(std::string_view s) { return s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0; }

// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct Transfer {
  FILE* out = nullptr;
  Sha256 hash;
  uint64_t done = 0;  // bytes in the part, resumed ones included
  uint64_t total = 0;
  uint64_t started_at = 0;  // bytes already there when this transfer began
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  const DownloadOptions* options = nullptr;
  bool cancelled = false;
  bool write_failed = false;
  long status = 0;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (std::fwrite(data, 1, n, t->out) != n) {
    t->write_failed = true;
    return 0;  // aborts the transfer
  }
  t->hash.update(std::as_bytes(std::span(data, n)));
  t->done += n;
  return n;
}

int on_progress(void* user, curl_off_t dltotal, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->options->cancel && t->options->cancel->load()) return t->cancelled = true, 1;
  if (!t->options->progress) return 0;
  Progress p;
  p.done = t->done;
  p.total = t->total ? t->total : (dltotal > 0 ? t->started_at + static_cast<uint64_t>(dltotal) : 0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t->start).count();
  p.bytes_per_s = s > 0 ? static_cast<double>(t->done - t->started_at) / s : 0.0;
  if (!t->options->progress(p)) return t->cancelled = true, 1;
  return 0;
}

// Hashes the bytes of `path` already downloaded (a resumed part).
Status hash_existing(const fs::path& path, Sha256& hash, uint64_t& size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read " + path.string());
  std::vector<char> buf(1 << 20);
  size = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    hash.update(std::as_bytes(std::span(buf.data(), n)));
    size += n;
  }
  return {};
}

std::string http_error(long status, const std::string& url, bool has_token) {
  if (status == 404) return url + ": not found (404): no such repository, revision or file";
  if (status == 401 || status == 403)
    return url + ": access denied (" + std::to_string(status) + ")" +
           (has_token ? ": the token in HF_TOKEN is not allowed this repository"
                      : ": a gated or private repository; set HF_TOKEN to a token that may read it");
  return url + ": the server answered HTTP " + std::to_string(status);
}

// A libcurl handle for a GET of `url`: redirects followed (http and https
// only), the bearer token sent, a connection that stalls for a minute ended.
// The caller frees `headers` and the handle.
CURL* new_get(const std::string& url, const std::string& token, curl_slist*& headers) {
  curl_init_once();
  CURL* curl = curl_easy_init();
  if (!curl) return nullptr;
  headers = nullptr;
  if (!token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "glassbox");
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  return curl;
}

// Runs the transfer and frees the handle and its headers: libcurl's code and
// the last HTTP status.
std::pair<CURLcode, long> perform_and_free(CURL* curl, curl_slist* headers) {
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return {rc, status};
}

}  // namespace

HubOptions hub_options_from_env() {
  HubOptions h;
  if (std::string e = env_or_empty("HF_ENDPOINT"); !e.empty()) {
    while (!e.empty() && e.back() == '/') e.pop_back();
    h.endpoint = e;
  }
  h.token = env_or_empty("HF_TOKEN");
  return h;
}

Result<ModelSpec> parse_model_spec(std::string_view text) {
  ModelSpec s;
  if (text.find("://") != std::string_view::npos) {
    if (!is_http_url(text)) return make_error(std::string(text) + ": only http:// and https:// URLs can be downloaded");
    s.is_url = true;
    s.url = std::string(text);
    const size_t slash = s.url.find_last_of('/');
    s.file = s.url.substr(slash + 1);
    if (const size_t q = s.file.find_first_of("?#"); q != std::string::npos) s.file.resize(q);
    if (s.file.empty()) return make_error(s.url + ": the URL names no file");
    return s;
  }
  std::string t(text);
  if (const size_t at = t.rfind('@'); at != std::string::npos) {
    s.revision = t.substr(at + 1);
    t.resize(at);
  }
  if (const size_t colon = t.find(':'); colon != std::string::npos) {
    s.file = t.substr(colon + 1);
    t.resize(colon);
  }
  s.repo = t;
  const auto valid = [](const std::string& part) {
    return !part.empty() && part != "." && part != ".." &&
           std::all_of(part.begin(), part.end(), [](char c) {
             return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
           });
  };
  const size_t slash = s.repo.find('/');
  if (slash == std::string::npos || s.repo.find('/', slash + 1) != std::string::npos || !valid(s.repo.substr(0, slash)) ||
      !valid(s.repo.substr(slash + 1)))
    return make_error(std::string(text) + ": expected an http(s) URL or a repository OWNER/NAME[:FILE][@REVISION]");
  if (s.revision.empty() || !valid(s.revision)) return make_error(std::string(text) + ": the revision after @ is not valid");
  if (s.file.find("..") != std::string::npos || (!s.file.empty() && s.file.front() == '/'))
    return make_error(std::string(text) + ": the file must be a path inside the repository");
  return s;
}

Result<std::vector<RemoteFile>> parse_repo_tree(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return make_error("the hub's file list is not a JSON array");
  std::vector<RemoteFile> out;
  for (const json& e : j) {
    if (!e.is_object()) continue;
    const auto type = e.find("type");
    const auto path = e.find("path");
    if (type == e.end() || !type->is_string() || *type != "file" || path == e.end() || !path->is_string()) continue;
    RemoteFile f;
    f.path = path->get<std::string>();
    // A path the downloader could not name a file after is not listed.
    if (f.path.empty() || f.path.back() == '/' || f.path.front() == '/' || f.path.find("..") != std::string::npos) continue;
    if (const auto size = e.find("size"); size != e.end() && size->is_number_unsigned()) f.size = size->get<uint64_t>();
    if (const auto lfs = e.find("lfs"); lfs != e.end() && lfs->is_object()) {
      if (const auto oid = lfs->find("oid"); oid != lfs->end() && oid->is_string()) {
        std::string h = oid->get<std::string>();
        if (h.rfind("sha256:", 0) == 0) h = h.substr(7);
        const bool hex64 = h.size() == 64 && std::all_of(h.begin(), h.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        });
        if (hex64) f.sha256 = h;
      }
      if (const auto size = lfs->find("size"); size != lfs->end() && size->is_number_unsigned())
        f.size = size->get<uint64_t>();
    }
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<RemoteFile>> list_repo_files(const HubOptions& hub, const std::string& repo,
                                                const std::string& revision) {
  auto text = fetch_text(hub.endpoint + "/api/models/" + repo + "/tree/" + revision + "?recursive=true", hub.token);
  if (!text) return text.error();
  return parse_repo_tree(*text);
}

Result<std::string> fetch_text(const std::string& url, const std::string& token, size_t max_bytes) {
  curl_slist* headers = nullptr;
  CURL* curl = new_get(url, token, headers);
  if (!curl) return make_error("cannot start an HTTP client (libcurl)");
  struct Body {
    std::string text;
    size_t max_bytes;
    bool too_large = false;
  } body{{}, max_bytes};
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) -> size_t {
    auto* b = static_cast<Body*>(u);
    if (b->text.size() + s * n > b->max_bytes) {
      b->too_large = true;
      return 0;  // aborts the transfer
    }
    b->text.append(d, s * n);
    return s * n;
  });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  const auto [rc, status] = perform_and_free(curl, headers);
  if (body.too_large)
    return make_error(url + ": more than " + std::to_string(max_bytes) + " bytes, too large for what was asked");
  if (rc != CURLE_OK) return make_error(url + ": " + curl_easy_strerror(rc));
  if (status != 200) return make_error(http_error(status, url, !token.empty()));
  return std::move(body.text);
}

std::string resolve_url(const HubOptions& hub, const ModelSpec& spec, const std::string& file) {
  if (spec.is_url) return spec.url;
  return hub.endpoint + "/" + spec.repo + "/resolve/" + spec.revision + "/" + file;
}

namespace {

// A server that ignores the Range answers 200 with the whole file: the part
// starts again.
size_t on_header(char* d, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(d, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    const size_t sp = line.find(' ');
    t->status = sp == std::string_view::npos ? 0 : std::atol(std::string(line.substr(sp + 1, 3)).c_str());
    if (t->status == 200 && t->started_at > 0) {
      std::fflush(t->out);
      if (::ftruncate(::fileno(t->out), 0) != 0) return 0;
      std::fseek(t->out, 0, SEEK_SET);
      t->hash.reset();
      t->done = t->started_at = 0;
    }
  }
  return size * count;
}

// Opens the part for `t`: resumed (hashing what is there) unless it cannot be
// this file, after checking the disk has room for the rest.
Status open_part(const DownloadOptions& o, const fs::path& part, Transfer& t) {
  std::error_code ec;
  uint64_t resumed = 0;
  if (fs::exists(part)) {
    if (Status st = hash_existing(part, t.hash, resumed); !st) return st;
    if (o.expected_size && resumed > o.expected_size) {  // not this file: start again
      fs::remove(part, ec);
      t.hash.reset();
      resumed = 0;
    }
  }
  struct statvfs vfs{};
  if (o.expected_size && ::statvfs(o.destination.parent_path().c_str(), &vfs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < o.expected_size - resumed + kDiskMargin)
      return make_error("not enough disk space in " + o.destination.parent_path().string() + ": " +
                        std::to_string((o.expected_size - resumed) >> 20) + " MiB to download, " +
                        std::to_string(free_bytes >> 20) + " MiB free");
  }
  t.done = t.started_at = resumed;
  t.out = std::fopen(part.c_str(), resumed ? "ab" : "wb");
  if (!t.out) return make_error("cannot write " + part.string());
  return {};
}

// The transfer's outcome: an error (the part removed where it cannot be
// resumed), or the part checked (size, sha256, GGUF magic) and renamed.
Result<fs::path> finish_download(const DownloadOptions& o, const fs::path& part, Transfer& t, CURLcode rc,
                                 long status, bool resumed, bool flushed) {
  std::error_code ec;
  const auto drop_part = [&] { fs::remove(part, ec); };
  const std::string kept = std::to_string(t.done >> 20) + " MiB kept in " + part.string();
  if (t.cancelled) return make_error("cancelled: " + kept + " (run the download again to resume)");
  if (rc == CURLE_RANGE_ERROR || (status == 416 && resumed)) {  // the part was already whole, or not this file
    drop_part();
    return make_error(o.url + ": the server refused to resume; the part was removed, run the download again");
  }
  if (rc == CURLE_HTTP_RETURNED_ERROR || status >= 400) {
    if (!resumed) drop_part();
    return make_error(http_error(status, o.url, !o.bearer_token.empty()));
  }
  if (t.write_failed || !flushed) return make_error("cannot write " + part.string() + " (disk full?)");
  if (rc != CURLE_OK) return make_error(o.url + ": " + curl_easy_strerror(rc) + "; " + kept + " (run the download again to resume)");
  const std::string name = o.destination.filename().string();
  if (o.expected_size && t.done != o.expected_size) {
    drop_part();
    return make_error(name + ": " + std::to_string(t.done) + " bytes arrived, the source states " +
                      std::to_string(o.expected_size) + "; the part was removed");
  }
  if (!o.expected_sha256.empty()) {
    if (const std::string got = Sha256::hex(t.hash.finish()); got != o.expected_sha256) {
      drop_part();
      return make_error(name + ": sha256 " + got + " but the source states " + o.expected_sha256 +
                        "; the download was removed");
    }
  }
  if (o.require_gguf) {
    char magic[4] = {};
    std::ifstream in(part, std::ios::binary);
    in.read(magic, 4);
    if (in.gcount() != 4 || std::string_view(magic, 4) != "GGUF") {
      drop_part();
      return make_error(name + ": not a GGUF file (no GGUF magic); the download was removed");
    }
  }
  fs::rename(part, o.destination, ec);
  if (ec) return make_error("cannot rename " + part.string() + " to " + o.destination.string() + ": " + ec.message());
  return o.destination;
}

}  // namespace

Result<fs::path> download_file(const DownloadOptions& o) {
  if (!is_http_url(o.url)) return make_error(o.url + ": only http:// and https:// URLs can be downloaded");
  const fs::path part = o.destination.string() + ".part";
  std::error_code ec;
  fs::create_directories(o.destination.parent_path(), ec);
  if (ec) return make_error("cannot create " + o.destination.parent_path().string() + ": " + ec.message());
  if (::access(o.destination.parent_path().c_str(), W_OK) != 0)
    return make_error(o.destination.parent_path().string() + " is not writable");
  // One download of a file at a time: the lock is held until we return.
  Fd lock{::open((part.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)};
  if (lock.fd < 0) return make_error("cannot create " + part.string() + ".lock");
  if (::flock(lock.fd, LOCK_EX | LOCK_NB) != 0)
    return make_error(o.destination.filename().string() + " is being downloaded already (another download holds " +
                      part.string() + ".lock)");
  struct Unlink {
    fs::path p;
    ~Unlink() {
      std::error_code e;
      fs::remove(p, e);
    }
  } remove_lock{part.string() + ".lock"};

  Transfer t;
  t.options = &o;
  t.total = o.expected_size;
  if (Status st = open_part(o, part, t); !st) return st.error();
  const bool resumed = t.started_at > 0;
  curl_slist* headers = nullptr;
  CURL* curl = new_get(o.url, o.bearer_token, headers);
  if (!curl) {
    std::fclose(t.out);
    return make_error("cannot start an HTTP client (libcurl)");
  }
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  if (resumed) curl_easy_setopt(curl, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(t.started_at));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  const auto [rc, status] = perform_and_free(curl, headers);
  const bool flushed = std::fclose(t.out) == 0;
  return finish_download(o, part, t, rc, status, resumed, flushed);
}

Result<DownloadOptions> plan_pull(const ModelSpec& spec, const HubOptions& hub, const fs::path& dir) {
  DownloadOptions o;
  std::string file = spec.file;
  if (!spec.is_url) {
    auto files = list_repo_files(hub, spec.repo, spec.revision);
    if (!files) return files.error();
    const RemoteFile* chosen = nullptr;
    std::string list;
    int num_gguf = 0;
    for (const RemoteFile& f : *files) {
      const bool gguf = f.path.size() > 5 && f.path.compare(f.path.size() - 5, 5, ".gguf") == 0;
      if (gguf) {
        ++num_gguf;
        list += "\n  " + spec.repo + ":" + f.path + "  (" + std::to_string(f.size >> 20) + " MiB)";
      }
      if ((!file.empty() && f.path == file) || (file.empty() && gguf)) chosen = &f;
    }
    if (file.empty() && num_gguf > 1) chosen = nullptr;
    if (!chosen)
      return make_error(file.empty() ? spec.repo + " has " + std::to_string(num_gguf) + " GGUF files; name one:" + list
                                     : spec.repo + "@" + spec.revision + " has no file " + file +
                                           (num_gguf ? "; its GGUF files:" + list : std::string()));
    file = chosen->path;
    o.expected_size = chosen->size;
    o.expected_sha256 = chosen->sha256;
    o.bearer_token = hub.token;
  }
  o.url = resolve_url(hub, spec, file);
  o.destination = dir / fs::path(file).filename();
  if (fs::exists(o.destination)) return make_error(o.destination.string() + " exists already (models rm it first)");
  return o;
}

fs::path default_models_dir() {
  if (std::string d = env_or_empty("GLASSBOX_MODELS_DIR"); !d.empty()) return d;
  if (std::string d = env_or_empty("XDG_DATA_HOME"); !d.empty()) return fs::path(d) / "glassbox" / "models";
  return fs::path(env_or_empty("HOME")) / ".local" / "share" / "glassbox" / "models";
}

FitEstimate estimate_fit(uint64_t weight_bytes, uint64_t kv_bytes_per_token, int64_t context_length,
                         uint64_t available) {
  FitEstimate f;
  const int64_t tokens = std::min(context_length > 0 ? context_length : kFitContext, kFitContext);
  f.kv_bytes = kv_bytes_per_token * static_cast<uint64_t>(tokens);
  f.needed_bytes = weight_bytes + f.kv_bytes;
  f.fits = available == 0 || f.needed_bytes <= available;
  return f;
}

std::vector<LocalModel> scan_models(const fs::path& dir, uint64_t available) {
  std::vector<LocalModel> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  if (available == 0) available = available_host_memory();
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec) || e.path().extension() != ".gguf") continue;
    LocalModel m;
    m.path = e.path();
    m.file_bytes = e.file_size(ec);
    auto summary = read_weight_summary(m.path.string());
    auto file = GgufFile::open(m.path.string(), GgufReadOptions{true});
    if (!summary || !file) {
      m.weights = !summary ? summary.error().message : file.error().message;
      out.push_back(std::move(m));
      continue;
    }
    m.readable = true;
    m.weights = summary->label;
    const auto str = [&](const std::string& key) {
      const GgufValue* v = file->find(key);
      return v && v->as_string() ? std::string(*v->as_string()) : std::string();
    };
    const auto num = [&](const std::string& key) -> int64_t {
      const GgufValue* v = file->find(key);
      return v && v->as_int() ? *v->as_int() : 0;
    };
    m.architecture = str("general.architecture");
    const std::string a = m.architecture;
    m.context_length = num(a + ".context_length");
    const int64_t layers = num(a + ".block_count"), heads = num(a + ".attention.head_count");
    const int64_t kv_heads = num(a + ".attention.head_count_kv") > 0 ? num(a + ".attention.head_count_kv") : heads;
    int64_t head_dim = num(a + ".attention.key_length");
    if (head_dim <= 0 && heads > 0) head_dim = num(a + ".embedding_length") / heads;
    const auto kv_per_token = static_cast<uint64_t>(std::max<int64_t>(0, 2 * layers * kv_heads * head_dim * 2));
    const FitEstimate fit = estimate_fit(summary->num_bytes, kv_per_token, m.context_length, available);
    m.kv_bytes = fit.kv_bytes;
    m.needed_bytes = fit.needed_bytes;
    m.fits = fit.fits;
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const LocalModel& x, const LocalModel& y) { return x.path < y.path; });
  return out;
}

}  // namespace gb::download
