// The JIT cache folder's size bound (CacheFolder.h).
#include "codegen/CacheFolder.h"

#include "runtime/Allocator.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Process.h"

#include <algorithm>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace smelt::codegen {

namespace {

/// The stem of `name` when it is an entry file, "<function>-<32 hex digits>.key" or ".smelt"
/// (JitCache::pathOf); else empty: a file that is not the cache's own is never removed.
llvm::StringRef entryStem(llvm::StringRef name, bool &isKey) {
  isKey = name.consume_back(".key");
  if (!isKey && !name.consume_back(".smelt"))
    return {};
  constexpr size_t kHashDigits = 32;
  if (name.size() < kHashDigits + 2 || name[name.size() - kHashDigits - 1] != '-' ||
      !llvm::all_of(name.take_back(kHashDigits), llvm::isHexDigit))
    return {};
  return name;
}

struct Entry {
  uint64_t keyBytes = 0, artifactBytes = 0;
  /// The .key's modification time, else (an artifact whose .key is gone) the artifact's.
  timespec lastUse{};
  bool hasKey = false, hasArtifact = false;
};

bool before(const timespec &a, const timespec &b) {
  return std::tie(a.tv_sec, a.tv_nsec) < std::tie(b.tv_sec, b.tv_nsec);
}

} // namespace

rt::Expected<uint64_t> cacheBoundFromEnvironment() {
  std::optional<std::string> text = llvm::sys::Process::GetEnv("SMELT_CACHE_MAX_SIZE");
  if (!text || text->empty())
    return kDefaultCacheBytes;
  rt::Expected<uint64_t> bytes = rt::parseBytes(*text);
  if (!bytes)
    return rt::Status::error("SMELT_CACHE_MAX_SIZE: " + bytes.message());
  return bytes;
}

CacheTrim trimCacheFolder(const std::string &dir, uint64_t maxBytes, const std::string &keep) {
  CacheTrim trimmed;
  DIR *folder = ::opendir(dir.c_str());
  if (!folder)
    return trimmed;
  std::map<std::string, Entry> entries;
  uint64_t total = 0;
  while (const dirent *file = ::readdir(folder)) {
    bool isKey = false;
    llvm::StringRef stem = entryStem(file->d_name, isKey);
    struct stat st;
    if (stem.empty() || ::fstatat(::dirfd(folder), file->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    Entry &entry = entries[stem.str()];
    (isKey ? entry.keyBytes : entry.artifactBytes) = uint64_t(st.st_size);
    total += uint64_t(st.st_size);
    if (isKey || !entry.hasKey)
      entry.lastUse = st.st_mtim;
    entry.hasKey |= isKey;
    entry.hasArtifact |= !isKey;
  }
  std::vector<std::pair<std::string, Entry>> byAge(entries.begin(), entries.end());
  std::stable_sort(byAge.begin(), byAge.end(), [](const auto &a, const auto &b) {
    return before(a.second.lastUse, b.second.lastUse);
  });
  for (const auto &[stem, entry] : byAge) {
    if (total <= maxBytes)
      break;
    if (stem == keep)
      continue;
    // The .key first: without it the artifact is no entry, whatever happens next.
    bool keyGone = entry.hasKey && ::unlinkat(::dirfd(folder), (stem + ".key").c_str(), 0) == 0;
    bool artifactGone =
        entry.hasArtifact && ::unlinkat(::dirfd(folder), (stem + ".smelt").c_str(), 0) == 0;
    uint64_t removed = (keyGone ? entry.keyBytes : 0) + (artifactGone ? entry.artifactBytes : 0);
    total -= removed;
    trimmed.entries += keyGone || artifactGone;
    trimmed.bytes += removed;
  }
  ::closedir(folder);
  return trimmed;
}

void markCacheEntryUsed(const std::string &keyPath) {
  ::utimensat(AT_FDCWD, keyPath.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

} // namespace smelt::codegen
