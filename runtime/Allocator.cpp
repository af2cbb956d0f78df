// The caching best-fit allocator (Allocator.h), byte-size formatting and parsing.
#include "runtime/Allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

namespace smelt::rt {

namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
/// The first region of a growing allocator; later ones double, so a step that needs N bytes
/// takes O(log N) regions from the device and the cache rarely fragments across them.
constexpr uint64_t kFirstRegionBytes = 2 * kMiB;
constexpr uint64_t kLargestRegionStep = 1 * kGiB;

} // namespace

uint64_t Allocator::blockBytes(uint64_t bytes) {
  return std::max<uint64_t>(kAlignment, alignUp(bytes));
}

std::string formatBytes(uint64_t bytes) {
  if (bytes < kKiB)
    return fmt::format("{} B", bytes);
  if (bytes < kMiB)
    return fmt::format("{:.1f} KiB", double(bytes) / double(kKiB));
  if (bytes < kGiB)
    return fmt::format("{:.1f} MiB", double(bytes) / double(kMiB));
  if (bytes < kGiB * 1024)
    return fmt::format("{:.2f} GiB", double(bytes) / double(kGiB));
  return fmt::format("{:.2f} TiB", double(bytes) / double(kGiB * 1024));
}

Expected<uint64_t> parseBytes(const std::string &text) {
  size_t end = 0;
  double number = 0;
  try {
    number = std::stod(text, &end);
  } catch (...) {
    end = 0;
  }
  std::string unit;
  for (char c : text.substr(end))
    if (!std::isspace(static_cast<unsigned char>(c)))
      unit += char(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, uint64_t> units = {
      {"", 1},         {"b", 1},         {"k", kKiB},      {"kb", kKiB}, {"kib", kKiB},
      {"m", kMiB},     {"mb", kMiB},     {"mib", kMiB},    {"g", kGiB},  {"gb", kGiB},
      {"gib", kGiB},   {"t", kGiB * 1024}, {"tib", kGiB * 1024}};
  auto scale = units.find(unit);
  if (end == 0 || scale == units.end() || !std::isfinite(number) || number < 0 ||
      number * double(scale->second) > 1.8e19)
    return Status::error(fmt::format("'{}' is not a size: write bytes or a number with KiB, "
                                     "MiB, GiB or TiB (e.g. 512MiB, 1.5GiB)",
                                     text));
  return uint64_t(std::llround(number * double(scale->second)));
}

std::string MemoryPolicy::growth() const {
  return preallocate ? fmt::format("preallocate {:.0f}%", fraction * 100) : "grow";
}

uint64_t MemoryPolicy::heldBytes(uint64_t capacity) const {
  uint64_t limit = limitBytes ? limitBytes : capacity;
  if (!preallocate)
    return limit;
  return uint64_t(double(limit) * fraction) / Allocator::kAlignment * Allocator::kAlignment;
}

std::string MemoryPolicy::str() const {
  std::string text = growth();
  if (limitBytes)
    text += ", limit " + formatBytes(limitBytes);
  return text;
}

std::string MemoryStats::str() const {
  return fmt::format("peak {}, in use {} in {} buffer{}, {} held (limit {})",
                     formatBytes(peakBytes), formatBytes(inUseBytes), liveBuffers,
                     liveBuffers == 1 ? "" : "s", formatBytes(reservedBytes),
                     formatBytes(limitBytes));
}

Expected<std::unique_ptr<Allocator>> Allocator::create(std::string device,
                                                       std::unique_ptr<MemorySource> source,
                                                       const MemoryPolicy &policy) {
  uint64_t capacity = source->capacity();
  if (policy.limitBytes > capacity)
    return Status::error(fmt::format("{}: the memory limit {} is more than the device has ({})",
                                     device, formatBytes(policy.limitBytes),
                                     formatBytes(capacity)));
  if (policy.preallocate && !(policy.fraction > 0 && policy.fraction <= 1))
    return Status::error(fmt::format("{}: the fraction to preallocate must be in (0, 1], not {}",
                                     device, policy.fraction));
  std::unique_ptr<Allocator> allocator(new Allocator());
  allocator->device_ = std::move(device);
  allocator->source_ = std::move(source);
  allocator->policy_ = policy;
  allocator->limit_ = policy.heldBytes(capacity);
  allocator->nextRegionBytes_ = kFirstRegionBytes;
  if (policy.preallocate) {
    // What is taken now is all there will be: the limit is the region.
    uint64_t bytes = allocator->limit_;
    std::lock_guard<std::mutex> lock(allocator->mutex_);
    if (Status grown = allocator->grow(bytes); !grown.ok())
      return Status::error(fmt::format("{}: cannot preallocate {} ({:.0f}% of {}): {}",
                                       allocator->device_, formatBytes(bytes),
                                       policy.fraction * 100,
                                       formatBytes(policy.limitBytes ? policy.limitBytes
                                                                     : capacity),
                                       grown.message()));
  }
  allocator->stats_.limitBytes = allocator->limit_;
  return allocator;
}

Allocator::~Allocator() {
  // Buffers still in use die with the allocator: the executor that held them is gone too.
  for (auto &[index, region] : regions_)
    source_->give(region.base, region.size);
}

Status Allocator::grow(uint64_t bytes) {
  uint64_t room = limit_ - stats_.reservedBytes;
  if (bytes > room)
    return Status::error(fmt::format("no free piece fits it, and taking {} more from the "
                                     "device would pass the limit",
                                     formatBytes(bytes)));
  // Prefer the next size in the doubling series; settle for exactly what is needed near the
  // limit. A preallocating allocator asks once, for everything.
  uint64_t want = policy_.preallocate ? bytes : std::min(std::max(bytes, nextRegionBytes_), room);
  Expected<void *> taken = source_->take(want);
  if (!taken && want > bytes) {
    want = bytes;
    taken = source_->take(want);
  }
  if (!taken) {
    // The device itself is full (other processes, fragmentation): give back what the cache
    // holds idle, then try once more.
    releaseCachedLocked();
    taken = source_->take(want);
    if (!taken)
      return taken.status();
  }
  if (!policy_.preallocate)
    nextRegionBytes_ = std::min(std::max(nextRegionBytes_, want) * 2,
                                std::max(nextRegionBytes_, kLargestRegionStep));
  uint64_t index = regionCounter_++;
  char *base = static_cast<char *>(*taken);
  regions_[index] = {base, want};
  chunks_[base] = Chunk{want, false, nullptr, nullptr, index, {}};
  free_.insert({want, base});
  stats_.reservedBytes += want;
  stats_.regions = int64_t(regions_.size());
  return Status();
}

char *Allocator::carve(char *at, uint64_t bytes, const std::string &what) {
  Chunk &chunk = chunks_.at(at);
  free_.erase({chunk.size, at});
  if (chunk.size - bytes >= kAlignment) {
    // Split: the rest stays free, between this chunk and its old next neighbour.
    char *rest = at + bytes;
    Chunk tail{chunk.size - bytes, false, at, chunk.next, chunk.region, {}};
    if (chunk.next)
      chunks_.at(chunk.next).prev = rest;
    chunk.next = rest;
    chunk.size = bytes;
    free_.insert({tail.size, rest});
    chunks_[rest] = std::move(tail);
  }
  Chunk &used = chunks_.at(at);
  used.inUse = true;
  used.what = what;
  stats_.inUseBytes += used.size;
  stats_.peakBytes = std::max(stats_.peakBytes, stats_.inUseBytes);
  stats_.liveBuffers += 1;
  return at;
}

Expected<void *> Allocator::allocate(uint64_t bytes, const std::string &what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > limit_ || blockBytes(bytes) > limit_)
    return Status::error(outOfMemory(bytes, what, "more than the limit"));
  uint64_t size = blockBytes(bytes);
  auto fit = free_.lower_bound({size, nullptr});
  if (fit == free_.end()) {
    if (Status grown = grow(size); !grown.ok())
      return Status::error(outOfMemory(bytes, what, grown.message()));
    fit = free_.lower_bound({size, nullptr});
  }
  return static_cast<void *>(carve(fit->second, size, what));
}

Expected<Allocator::Block> Allocator::allocateBlock(uint64_t bytes, const std::string &what) {
  SMELT_ASSIGN_OR_RETURN(void *block, allocate(bytes, what));
  return Block(block, Release{this});
}

void Allocator::free(void *block) {
  if (!block)
    return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = chunks_.find(static_cast<char *>(block));
  if (it == chunks_.end() || !it->second.inUse)
    return; // not ours, or freed twice: nothing safe to do but ignore it
  Chunk *chunk = &it->second;
  char *at = it->first;
  chunk->inUse = false;
  chunk->what.clear();
  stats_.inUseBytes -= chunk->size;
  stats_.liveBuffers -= 1;
  // Coalesce with free neighbours, so the cache holds few large pieces.
  if (chunk->next) {
    Chunk &next = chunks_.at(chunk->next);
    if (!next.inUse) {
      free_.erase({next.size, chunk->next});
      chunk->size += next.size;
      char *after = next.next;
      chunks_.erase(chunk->next);
      chunk->next = after;
      if (after)
        chunks_.at(after).prev = at;
    }
  }
  if (chunk->prev) {
    Chunk &prev = chunks_.at(chunk->prev);
    if (!prev.inUse) {
      free_.erase({prev.size, chunk->prev});
      prev.size += chunk->size;
      prev.next = chunk->next;
      if (chunk->next)
        chunks_.at(chunk->next).prev = chunk->prev;
      char *merged = chunk->prev;
      chunks_.erase(at);
      at = merged;
      chunk = &chunks_.at(at);
    }
  }
  free_.insert({chunk->size, at});
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Allocator::releaseCached() {
  std::lock_guard<std::mutex> lock(mutex_);
  releaseCachedLocked();
}

void Allocator::releaseCachedLocked() {
  // A preallocated region is the policy's promise: it stays.
  if (policy_.preallocate)
    return;
  for (auto it = regions_.begin(); it != regions_.end();) {
    auto chunk = chunks_.find(it->second.base);
    if (chunk != chunks_.end() && !chunk->second.inUse && chunk->second.size == it->second.size) {
      free_.erase({chunk->second.size, chunk->first});
      chunks_.erase(chunk);
      source_->give(it->second.base, it->second.size);
      stats_.reservedBytes -= it->second.size;
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
  stats_.regions = int64_t(regions_.size());
}

std::string Allocator::outOfMemory(uint64_t bytes, const std::string &what,
                                   const std::string &why) const {
  // Called with the lock held.
  std::vector<const Chunk *> live;
  uint64_t freeBytes = 0, largestFree = 0;
  size_t freePieces = 0;
  for (const auto &[address, chunk] : chunks_) {
    if (chunk.inUse) {
      live.push_back(&chunk);
    } else {
      freeBytes += chunk.size;
      largestFree = std::max(largestFree, chunk.size);
      ++freePieces;
    }
  }
  std::sort(live.begin(), live.end(),
            [](const Chunk *a, const Chunk *b) { return a->size > b->size; });
  std::string largest;
  for (size_t i = 0; i < std::min<size_t>(live.size(), 3); ++i)
    largest += fmt::format("{}{} {}", i ? "; " : "", formatBytes(live[i]->size), live[i]->what);
  return fmt::format("{}: out of memory for {}: it needs {} ({}). The limit is {} ({}); {} "
                     "is in use by {} buffer{}{}{}, {} held free in {} piece{} (largest {})",
                     device_, what, formatBytes(bytes), why, formatBytes(limit_),
                     policy_.growth(), formatBytes(stats_.inUseBytes), live.size(),
                     live.size() == 1 ? "" : "s", largest.empty() ? "" : ", the largest: ",
                     largest, formatBytes(freeBytes), freePieces, freePieces == 1 ? "" : "s",
                     formatBytes(largestFree));
}

} // namespace smelt::rt
