// A device's memory as the executor sees it: a caching best-fit allocator with coalescing
// (TensorFlow's BFC) over large regions taken from a MemorySource (host pages, cuMemAlloc).
// Freed blocks return to the cache, not the device, so a training loop allocates from the
// device only in its first step. On a GPU, frees are stream-ordered for free: every kernel,
// library call and copy of a device runs on its one stream, so a block freed after its last
// reader is queued can be handed to a later writer, which the stream runs after that reader.
//
// Policies (MemoryPolicy): grow on demand (the default) or preallocate a fraction of the
// device at creation, and an optional limit on what is held. Running out is a Status naming the
// buffer, its size, the limit and the largest buffers in use; the allocator stays usable.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace smelt::rt {

/// "1.5 MiB", "512 B": sizes in messages and tool output.
std::string formatBytes(uint64_t bytes);
/// "4GiB", "512 MiB", "1.5G", "100000" (bytes) -> bytes; the error quotes the text.
Expected<uint64_t> parseBytes(const std::string &text);

struct MemoryPolicy {
  /// Grow: take memory from the device as buffers need it. Preallocate: take `fraction` of the
  /// device (of the limit, when there is one) at once and never more.
  bool preallocate = false;
  double fraction = 0.9;
  /// The most bytes the allocator may hold from the device; 0: the device's size.
  uint64_t limitBytes = 0;

  /// The most bytes an allocator under this policy holds from a device of `capacity`: the
  /// limit (or the capacity), of which preallocation takes `fraction` (rounded down to the
  /// allocator's alignment) and never more.
  uint64_t heldBytes(uint64_t capacity) const;
  /// "grow", "preallocate 90%, limit 2 GiB".
  std::string str() const;
  /// "grow", "preallocate 90%": str() without the limit.
  std::string growth() const;
  bool operator==(const MemoryPolicy &) const = default;
};

/// Where an allocator's regions come from. Implementations: host memory (DeviceMemory.cpp) and
/// GPU memory (runtime/cuda/CudaMemory.h). Calls come under the allocator's lock.
class MemorySource {
public:
  virtual ~MemorySource() = default;
  /// `bytes` (a multiple of 256) aligned to at least 256 bytes, or why not (the device's
  /// own out-of-memory message).
  virtual Expected<void *> take(uint64_t bytes) = 0;
  virtual void give(void *region, uint64_t bytes) = 0;
  /// The device's memory, the base of `fraction` and of a limit's check.
  virtual uint64_t capacity() const = 0;
};

struct MemoryStats {
  uint64_t inUseBytes = 0;    // held by live buffers (rounded to the allocator's granule)
  uint64_t peakBytes = 0;     // the most ever in use
  uint64_t reservedBytes = 0; // taken from the device: in use plus cached
  uint64_t limitBytes = 0;    // the most it may take
  int64_t liveBuffers = 0;
  int64_t regions = 0; // blocks taken from the device

  /// "peak 12.0 MiB, in use 1.5 MiB in 3 buffers, 16.0 MiB held (limit 2.0 GiB)".
  std::string str() const;
};

class Allocator {
public:
  /// The allocator of `device` ("cpu:0", "gpu:1") over `source`. A preallocating policy takes
  /// its region now, so a fraction the device cannot give fails here. `limit` defaults to
  /// the source's capacity and may not exceed it.
  static Expected<std::unique_ptr<Allocator>> create(std::string device,
                                                     std::unique_ptr<MemorySource> source,
                                                     const MemoryPolicy &policy);
  ~Allocator();
  Allocator(const Allocator &) = delete;
  Allocator &operator=(const Allocator &) = delete;

  /// A block of at least `bytes` (0 gives a distinct granule), aligned to kAlignment. Failing,
  /// the error names `what` (the buffer: "buffer b7 (matmul at m.mlir:3:8, f32[64,128])"),
  /// the size, the limit and the largest buffers in use. Thread-safe.
  Expected<void *> allocate(uint64_t bytes, const std::string &what);
  /// Returns a block from allocate() to the cache; null is ignored. Thread-safe.
  void free(void *block);

  MemoryStats stats() const;
  /// Gives cached regions that hold no buffer back to the device.
  void releaseCached();
  const std::string &device() const { return device_; }
  const MemoryPolicy &policy() const { return policy_; }

  /// Block addresses and sizes are multiples of this: what cuBLASLt, cuDNN and vector loads
  /// want.
  static constexpr uint64_t kAlignment = 256;
  /// `bytes` rounded up to kAlignment (0 stays 0): where the next part of a block may start.
  static constexpr uint64_t alignUp(uint64_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  /// The bytes of the block allocate(`bytes`) carves: `bytes` rounded up to kAlignment, at
  /// least one granule. Blocks of the same count are interchangeable.
  static uint64_t blockBytes(uint64_t bytes);

  /// Frees a block when its owner goes: for blocks that live as long as an object.
  struct Release {
    Allocator *allocator = nullptr;
    void operator()(void *block) const { allocator->free(block); }
  };
  using Block = std::unique_ptr<void, Release>;
  Expected<Block> allocateBlock(uint64_t bytes, const std::string &what);

private:
  Allocator() = default;
  /// A piece of a region: in use, or free in `free_`; neighbours by address within the region.
  struct Chunk {
    uint64_t size = 0;
    bool inUse = false;
    char *prev = nullptr, *next = nullptr; // neighbouring chunks' addresses
    uint64_t region = 0;                   // the region's index in regions_
    std::string what;                      // in use: for out-of-memory messages
  };
  struct Region {
    char *base = nullptr;
    uint64_t size = 0;
  };
  std::string device_;
  std::unique_ptr<MemorySource> source_;
  MemoryPolicy policy_;
  uint64_t limit_ = 0;
  uint64_t nextRegionBytes_ = 0;
  mutable std::mutex mutex_;
  std::map<char *, Chunk> chunks_;             // every chunk, by address
  std::set<std::pair<uint64_t, char *>> free_; // free chunks by (size, address): best fit
  std::map<uint64_t, Region> regions_;         // by index; erased when given back
  uint64_t regionCounter_ = 0;
  MemoryStats stats_;

  /// Takes a region that fits `bytes` within the limit, or says why there is none.
  Status grow(uint64_t bytes);
  char *carve(char *chunk, uint64_t bytes, const std::string &what);
  void releaseCachedLocked();
  std::string outOfMemory(uint64_t bytes, const std::string &what, const std::string &why) const;
};

} // namespace smelt::rt
