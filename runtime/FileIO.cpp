// Byte-exact file I/O on POSIX descriptors (FileIO.h).
#include "runtime/FileIO.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <mutex>
#include <sys/mman.h>
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

/// What a non-regular file is, for messages: "a directory", "a FIFO" ...
const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

std::string notRegular(const std::string &path, mode_t mode) {
  return fmt::format("{}: is {}, not a regular file", path, kindOf(mode));
}

/// Whether `rest` is "<pid>.<n>" (the tail writeFileAtomically gives its temporaries) of a
/// process that no longer exists. A live process's file may be mid-write: it is kept.
bool isDeadWritersTail(const std::string &rest) {
  size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || dot > 9 || dot + 1 == rest.size() ||
      rest.find_first_not_of("0123456789", dot + 1) != std::string::npos ||
      rest.find_first_not_of("0123456789") != dot)
    return false;
  pid_t pid = pid_t(std::stol(rest.substr(0, dot)));
  return pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

/// Removes the temporaries of `path` that killed writers left behind. Best effort: a file
/// that cannot be listed or removed stays, and the write that called this still succeeded.
void removeStaleTemporaries(const std::string &path) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string prefix = target.filename().string() + ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) == 0 &&
        isDeadWritersTail(name.substr(prefix.size()))) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

/// The temporaries being written now, for the SIGINT/SIGTERM handler to remove: an interrupted
/// save leaves no <file>.tmp.<pid>.<n> behind. Fixed slots that the handler reads with
/// async-signal-safe calls only (an atomic flag, unlink, sigaction, raise).
constexpr int kTemporarySlots = 32;
char gTemporaryPaths[kTemporarySlots][4096];
/// Each slot's state: free, claimed by a writer (its path being copied in), or holding a path.
enum SlotState : int { kFree, kClaimed, kHolding };
std::atomic<int> gTemporaryState[kTemporarySlots];
constexpr int kInterrupts[2] = {SIGINT, SIGTERM};
struct sigaction gPreviousAction[2];

/// Removes the temporaries, then does what the signal did before: the previous handler (LLVM's,
/// in the tools, which removes its own files and dies), or the default action.
void removeTemporariesOnInterrupt(int signal, siginfo_t *info, void *context) {
  for (int i = 0; i < kTemporarySlots; ++i)
    if (gTemporaryState[i].load() == kHolding)
      ::unlink(gTemporaryPaths[i]);
  const struct sigaction &previous = gPreviousAction[signal == SIGINT ? 0 : 1];
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(signal, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(signal);
  } else {
    ::sigaction(signal, &previous, nullptr);
    ::raise(signal);
  }
}

/// Installs the handler once, before whatever handled SIGINT and SIGTERM (not where they are
/// ignored: a program run under nohup keeps running).
void handleInterruptsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int k = 0; k < 2; ++k) {
      if (::sigaction(kInterrupts[k], nullptr, &gPreviousAction[k]) != 0 ||
          (!(gPreviousAction[k].sa_flags & SA_SIGINFO) &&
           gPreviousAction[k].sa_handler == SIG_IGN))
        continue;
      struct sigaction action = {};
      action.sa_sigaction = removeTemporariesOnInterrupt;
      action.sa_flags = SA_SIGINFO;
      sigemptyset(&action.sa_mask);
      ::sigaction(kInterrupts[k], &action, nullptr);
    }
  });
}

/// Holds `tmp` in a slot while it is written (none when all are taken or the path is too long:
/// it is then only removed by the next save, as before).
class TemporarySlot {
public:
  explicit TemporarySlot(const std::string &tmp) {
    handleInterruptsOnce();
    if (tmp.size() >= sizeof gTemporaryPaths[0])
      return;
    for (int i = 0; i < kTemporarySlots && slot_ < 0; ++i) {
      int expected = kFree;
      if (gTemporaryState[i].compare_exchange_strong(expected, kClaimed)) {
        std::memcpy(gTemporaryPaths[i], tmp.c_str(), tmp.size() + 1);
        gTemporaryState[i].store(kHolding);
        slot_ = i;
      }
    }
  }
  ~TemporarySlot() {
    if (slot_ >= 0)
      gTemporaryState[slot_].store(kFree);
  }
  TemporarySlot(const TemporarySlot &) = delete;
  TemporarySlot &operator=(const TemporarySlot &) = delete;

private:
  int slot_ = -1;
};

} // namespace

Status checkRegularFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return Status::error(notRegular(path, st.st_mode));
  return Status();
}

Status checkReplaceable(const std::string &path) {
  // rename() would put a regular file where a device node or a FIFO was (and the bytes meant
  // for /dev/full would "succeed"); a user who names one made a mistake.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return Status::error(notRegular(path, st.st_mode) + "; refusing to replace it");
  return Status();
}

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

Status readAll(int fd, void *data, size_t size, uint64_t offset, const std::string &what) {
  char *bytes = static_cast<char *>(data);
  size_t done = 0;
  std::string why = transfer(size, done, [&](size_t at) {
    return ::pread(fd, bytes + at, size - at, off_t(offset + at));
  });
  if (why.empty())
    return Status();
  return Status::error(
      fmt::format("{}: cannot read byte {} of the file: {}", what, offset + done, why));
}

/// What makes two paths the same file: its device and inode where it exists, else the real
/// path of its folder and its name.
static std::string fileIdentity(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0)
    return fmt::format("inode {}:{}", st.st_dev, st.st_ino);
  std::filesystem::path p(path);
  std::error_code error;
  std::filesystem::path folder = std::filesystem::canonical(
      p.has_parent_path() ? p.parent_path() : std::filesystem::path("."), error);
  return error ? "path " + path : "path " + (folder / p.filename()).string();
}

Status checkDistinctFiles(const std::vector<NamedFile> &files) {
  std::vector<std::string> identities;
  for (const NamedFile &f : files)
    identities.push_back(f.path.empty() ? "" : fileIdentity(f.path));
  for (size_t i = 0; i < files.size(); ++i)
    for (size_t j = i + 1; j < files.size(); ++j)
      if (!identities[i].empty() && identities[i] == identities[j])
        return Status::error(fmt::format(
            "{} ({}) and {} ({}) are the same file: writing one would destroy the other",
            files[i].what, files[i].path, files[j].what, files[j].path));
  return Status();
}

Expected<int> openRegularFile(const std::string &path, uint64_t *size) {
  // O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting; fstat
  // then refuses it (regular files ignore the flag).
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status::error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Status::error(fmt::format("{}: cannot stat: {}", path, why));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(notRegular(path, st.st_mode));
  }
  if (size)
    *size = uint64_t(st.st_size);
  return fd;
}

Expected<std::vector<uint8_t>> readFileBytes(const std::string &path) {
  uint64_t size = 0;
  SMELT_ASSIGN_OR_RETURN(int fd, openRegularFile(path, &size));
  std::vector<uint8_t> bytes;
  std::string why;
  size_t done = 0;
  try {
    bytes.resize(size_t(size));
    why = transfer(bytes.size(), done,
                   [&](size_t at) { return ::read(fd, bytes.data() + at, bytes.size() - at); });
    if (!why.empty())
      why = fmt::format("cannot read byte {} of {}: {}", done, bytes.size(), why);
  } catch (const std::exception &e) {
    why = fmt::format("cannot hold its {} bytes: {}", size, e.what());
  }
  ::close(fd);
  if (!why.empty())
    return Status::error(path + ": " + why);
  return bytes;
}

Expected<MappedBytes> mapDescriptor(int fd, size_t size, const std::string &what) {
  if (size == 0)
    return MappedBytes();
  void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED)
    return Status::error(
        fmt::format("{}: cannot map its {} bytes: {}", what, size, std::strerror(errno)));
  MappedBytes out;
  out.owner = std::shared_ptr<const void>(
      mapped, [size](const void *p) { ::munmap(const_cast<void *>(p), size); });
  out.bytes = {static_cast<const uint8_t *>(mapped), size};
  return out;
}

Expected<MappedBytes> mapFile(const std::string &path) {
  uint64_t size = 0;
  SMELT_ASSIGN_OR_RETURN(int fd, openRegularFile(path, &size));
  Expected<MappedBytes> mapped = mapDescriptor(fd, size_t(size), path);
  ::close(fd);
  return mapped;
}

Status writeFileAtomically(const std::string &path, const FileWriter &writeContents) {
  if (path.empty()) // `-o ""`: said so, not as a temporary ".tmp.N.0" that cannot be renamed
    return Status::error("an empty output path: name the file to write");
  SMELT_RETURN_IF_ERROR(checkReplaceable(path));
  // A name no other writer uses, in the same directory so that rename() is atomic.
  static std::atomic<uint64_t> serial{0};
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), serial++);
  TemporarySlot slot(tmp); // before the file exists, until it is renamed or removed
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
  removeStaleTemporaries(path);
  return syncDirectoryOf(path);
}

Status writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes) {
  return writeFileAtomically(
      path, [&](int fd, const std::string &tmp) { return writeAll(fd, bytes, tmp); });
}

} // namespace smelt::rt
