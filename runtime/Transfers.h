// What one run moved between host and device memory and how often the host waited for a device
// (issue 31): the cost that keeping values on the device removes, counted by the runtime on any
// driver; and how many calls queued its GPU work. The GPU executor counts its own runs;
// rt::Executor sums its segments'; a run on the CPU alone moves nothing.
#pragma once

#include <cstdint>
#include <string>

namespace smelt::rt {

struct TransferStats {
  /// Bytes copied host -> device and device -> host.
  uint64_t toDevice = 0, toHost = 0;
  /// Times the host blocked until a device finished queued work: stream, context and event
  /// synchronizes, copies that return only once the device has done them, and waits for a
  /// collective.
  uint64_t hostSyncs = 0;
  /// How the host queued a GPU run's steps: one call per step (kernel, library call, copy), or
  /// one CUDA graph per run whose steps it replays (GpuExecutor).
  uint64_t stepLaunches = 0, graphLaunches = 0;

  bool any() const { return toDevice || toHost || hostSyncs || stepLaunches || graphLaunches; }
  TransferStats &operator+=(const TransferStats &other) {
    toDevice += other.toDevice;
    toHost += other.toHost;
    hostSyncs += other.hostSyncs;
    stepLaunches += other.stepLaunches;
    graphLaunches += other.graphLaunches;
    return *this;
  }
  /// The counts between two readings of a running total (`later - earlier`).
  TransferStats operator-(const TransferStats &earlier) const {
    return {toDevice - earlier.toDevice, toHost - earlier.toHost, hostSyncs - earlier.hostSyncs,
            stepLaunches - earlier.stepLaunches, graphLaunches - earlier.graphLaunches};
  }
  bool operator==(const TransferStats &) const = default;
  /// "11.4 MiB up, 7.8 MiB down, 4 host syncs": what the tools print per step.
  std::string str() const;
  /// "1 CUDA graph, 0 single launches": how the steps were queued, printed beside str().
  std::string launchStr() const;
};

/// What the calling thread copied between host and device and how often it waited for a device
/// (through CudaDevice, device arrays, the GPU all-reduce and NCCL) since it began: a run's
/// counts are the difference of two readings. Per thread, so replicas that run on threads of
/// their own each count only their own work; every host-device copy and wait of a run is made
/// on its thread. Inline, so that the runtime and the CUDA libraries built apart share one.
inline TransferStats &threadTransferCounts() {
  thread_local TransferStats counts;
  return counts;
}
inline TransferStats threadTransfers() { return threadTransferCounts(); }
/// Adds to the calling thread's counts: for the driver calls made without CudaDevice's methods.
inline void countTransfers(const TransferStats &more) { threadTransferCounts() += more; }

} // namespace smelt::rt
