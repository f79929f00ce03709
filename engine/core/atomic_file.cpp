// POSIX implementation of the atomic replace (open O_EXCL temp, write, fsync,
// rename, fsync directory). mkstemp gives a unique temporary name so concurrent
// writers never share one.
#include "core/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace gb {
namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool stage_ok(const AtomicWriteFailHook& hook, AtomicWriteStage stage) {
  if (hook && !hook(stage)) {
    errno = EIO;  // the simulated failure reads like an I/O error
    return false;
  }
  return true;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

Status write_file_atomically(const std::string& path, std::string_view bytes, const AtomicWriteFailHook& hook) {
  if (path.empty()) return make_error("cannot write a file with an empty path");
  const std::string dir = directory_of(path);
  std::string tmpl = path + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');

  const int fd = stage_ok(hook, AtomicWriteStage::Open) ? ::mkstemp(name.data()) : -1;
  if (fd < 0) return make_error(path + ": cannot create temporary file in " + dir + ": " + errno_text());
  const std::string tmp_path(name.data());
  auto fail = [&](const std::string& what) -> Status {
    const std::string message = path + ": " + what + ": " + errno_text();
    ::close(fd);
    ::unlink(tmp_path.c_str());
    return make_error(message);
  };

  // mkstemp creates 0600; keep the mode of the file being replaced, else make an
  // ordinary readable document (0644). umask() is avoided: it is process-global.
  struct stat existing {};
  const mode_t mode = ::stat(path.c_str(), &existing) == 0 ? (existing.st_mode & 07777) : 0644;
  if (::fchmod(fd, mode) != 0) return fail("cannot set file mode");

  size_t done = 0;
  while (done < bytes.size()) {
    if (!stage_ok(hook, AtomicWriteStage::Write)) return fail("write failed");
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write failed");
    done += static_cast<size_t>(n);
  }
  if (!stage_ok(hook, AtomicWriteStage::Sync) || ::fsync(fd) != 0) return fail("fsync failed");
  if (::close(fd) != 0) {
    const std::string message = path + ": close failed: " + errno_text();
    ::unlink(tmp_path.c_str());
    return make_error(message);
  }
  if (!stage_ok(hook, AtomicWriteStage::Rename) || ::rename(tmp_path.c_str(), path.c_str()) != 0) {
    const std::string message = path + ": cannot rename temporary file into place: " + errno_text();
    ::unlink(tmp_path.c_str());
    return make_error(message);
  }
  // Make the rename itself durable. Failure here leaves a complete file either
  // way, so it is not reported.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return Status::success();
}

Result<std::string> read_whole_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return make_error(path + ": cannot open: " + errno_text());
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return make_error(path + ": read error");
  return out;
}

}  // namespace gb
