// Shared-library bytes to callable kernels: memfd_create, dlopen, dlsym.
#include "runtime/CpuObject.h"

#include "runtime/ElfImage.h"
#include "runtime/FileIO.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace smelt::rt {

namespace {

/// A path to descriptor `fd` that no earlier load in this process used. The loader knows a
/// library by the path it was opened with and hands back the loaded one for a path it has seen,
/// and a library may stay loaded after dlclose (one linked with -z nodelete, as LLVM's CMake
/// links shared libraries, or one with unique symbols). The descriptor number of a released
/// library is reused, so "/proc/self/fd/N" alone could return the old code. The path spells
/// a process-wide load counter in no-op components, one per bit from the lowest: "/." for 0,
/// "/../fd" for 1 (the first load gets /proc/self/fd/N, the next /proc/self/fd/../fd/N ...).
std::string uniquePath(int fd) {
  static std::atomic<uint64_t> loads{0};
  std::string path = "/proc/self/fd";
  for (uint64_t n = loads++; n != 0; n >>= 1)
    path += (n & 1) ? "/../fd" : "/.";
  return path + "/" + std::to_string(fd);
}

/// dlerror()'s message, or `fallback` when it has none.
std::string dlReason(const char *fallback) {
  const char *reason = dlerror();
  return reason ? reason : fallback;
}

} // namespace

Expected<std::shared_ptr<const CpuCode>> loadCpuObject(const std::vector<uint8_t> &sharedLibrary,
                                                       const std::vector<std::string> &symbols) {
  if (sharedLibrary.empty())
    return Status::error("the CPU code is empty: there is no shared library to load");
  if (Status s = checkElfImage(sharedLibrary); !s.ok())
    return Status::error(fmt::format("cannot load the CPU code ({} bytes): {}",
                                     sharedLibrary.size(), s.message()));
  int fd = ::memfd_create("smelt-cpu-code", MFD_CLOEXEC);
  if (fd < 0)
    return Status::error(
        fmt::format("cannot create an in-memory file for the CPU code: {}", std::strerror(errno)));
  if (Status s = writeAll(fd, sharedLibrary, "the in-memory file of the CPU code"); !s.ok()) {
    ::close(fd);
    return s;
  }
  std::string path = uniquePath(fd);
  dlerror();
  void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = handle ? "" : dlReason("unknown reason");
  // The mapping keeps the file's pages; the descriptor is no longer needed.
  ::close(fd);
  if (!handle)
    return Status::error(fmt::format("cannot load the CPU code ({} bytes) as a shared "
                                     "library: {}",
                                     sharedLibrary.size(), why));
  auto code = std::make_shared<CpuCode>();
  code->owner = std::shared_ptr<void>(handle, [](void *h) { ::dlclose(h); });
  for (size_t i = 0; i < symbols.size(); ++i) {
    // A kernel only a GPU runs has no CPU code: the executor says so if asked to run it.
    if (symbols[i].empty()) {
      code->entries.push_back(nullptr);
      continue;
    }
    dlerror();
    void *entry = ::dlsym(handle, symbols[i].c_str());
    if (!entry)
      return Status::error(fmt::format("the CPU code has no symbol '{}' (kernel #{}): {}",
                                       symbols[i], i, dlReason("it resolves to null")));
    code->entries.push_back(reinterpret_cast<CpuKernelFn>(entry));
  }
  return std::shared_ptr<const CpuCode>(std::move(code));
}

} // namespace smelt::rt
