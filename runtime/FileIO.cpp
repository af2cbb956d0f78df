// Byte-exact file I/O on POSIX descriptors (FileIO.h).
#include "runtime/FileIO.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

namespace smelt::rt {

namespace {

/// Calls `io` (one read or write from byte `done` on) until `size` bytes have moved, retrying
/// on EINTR. Returns why it stopped early, or "" when all bytes moved.
std::string transfer(size_t size, size_t &done, const std::function<ssize_t(size_t)> &io) {
  for (done = 0; done < size;) {
    ssize_t n = io(done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::strerror(errno);
    if (n == 0)
      return "no progress (the file changed size?)";
    done += size_t(n);
  }
  return "";
}

Status syncDirectoryOf(const std::string &path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(
        fmt::format("{}: cannot open its directory to sync: {}", path, std::strerror(errno)));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    return Status::error(
        fmt::format("{}: fsync of its directory failed: {}", path, std::strerror(errno)));
  return Status();
}

} // namespace

Status writeAll(int fd, const void *data, size_t size, const std::string &what) {
  const char *bytes = static_cast<const char *>(data);
  size_t done = 0;
  std::string why =
      transfer(size, done, [&](size_t at) { return ::write(fd, bytes + at, size - at); });
  if (why.empty())
    return Status();
  return Status::error(fmt::format("{}: cannot write byte {} of {}: {}", what, done, size, why));
}

Status writeAll(int fd, const std::vector<uint8_t> &bytes, const std::string &what) {
  return writeAll(fd, bytes.data(), bytes.size(), what);
}

Expected<std::vector<uint8_t>> readFileBytes(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::vector<uint8_t> bytes;
  std::string why;
  size_t done = 0;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else {
    try {
      bytes.resize(size_t(st.st_size));
      why = transfer(bytes.size(), done,
                     [&](size_t at) { return ::read(fd, bytes.data() + at, bytes.size() - at); });
      if (!why.empty())
        why = fmt::format("cannot read byte {} of {}: {}", done, bytes.size(), why);
    } catch (const std::exception &e) {
      why = fmt::format("cannot hold its {} bytes: {}", st.st_size, e.what());
    }
  }
  ::close(fd);
  if (!why.empty())
    return Status::error(path + ": " + why);
  return bytes;
}

Status writeFileAtomically(const std::string &path, const FileWriter &writeContents) {
  // A name no other writer uses, in the same directory so that rename() is atomic.
  static std::atomic<uint64_t> serial{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), serial++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    return Status::error(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  Status status = writeContents(fd, tmp);
  if (status.ok() && ::fsync(fd) != 0)
    status = Status::error(fmt::format("{}: cannot flush to disk: {}", tmp, std::strerror(errno)));
  if (::close(fd) != 0 && status.ok())
    status = Status::error(fmt::format("{}: cannot close: {}", tmp, std::strerror(errno)));
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    status = Status::error(
        fmt::format("{}: cannot rename {} into place: {}", path, tmp, std::strerror(errno)));
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return syncDirectoryOf(path);
}

Status writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes) {
  return writeFileAtomically(
      path, [&](int fd, const std::string &tmp) { return writeAll(fd, bytes, tmp); });
}

} // namespace smelt::rt
