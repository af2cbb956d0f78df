// The JIT cache folder's size bound (JitOptions::maxDiskBytes): the entries a folder holds, by
// when each was last used, and the removal of the least recently used ones until the rest fit,
// as ccache bounds its folder. Every rebuilt Smelt and every new shape or weight writes entries
// no later run may ask for again, and an imported model's entry holds its weights: without a
// bound the folder only grows.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <string>

namespace smelt::codegen {

/// 5 GiB, ccache's default bound (which is 5 GB).
constexpr uint64_t kDefaultCacheBytes = uint64_t(5) << 30;

/// The bound a cache without one set uses: $SMELT_CACHE_MAX_SIZE ("512MiB", "20G"; "0" for none),
/// else kDefaultCacheBytes; an error naming the variable when its value is not a size.
rt::Expected<uint64_t> cacheBoundFromEnvironment();

/// What trimCacheFolder removed.
struct CacheTrim {
  int entries = 0;
  uint64_t bytes = 0;
};

/// Removes entries of the cache folder `dir` (each <stem>.key and <stem>.smelt, whichever is
/// there), least recently used first, until what the entries hold fits in `maxBytes`: an
/// entry's last use is its .key's modification time, which a write and every disk hit set.
/// The entry `keep` (the stem just written) is never removed. The .key goes first, so a reader
/// that comes between finds no entry rather than a .key without its artifact; a process that
/// has an evicted artifact mapped keeps its pages. Best effort: a file that cannot be read or
/// removed is passed over.
CacheTrim trimCacheFolder(const std::string &dir, uint64_t maxBytes, const std::string &keep);

/// Marks the entry whose .key is `keyPath` as used now (its modification time), for
/// trimCacheFolder's order.
void markCacheEntryUsed(const std::string &keyPath);

} // namespace smelt::codegen
