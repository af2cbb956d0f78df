// One GPU as the runtime uses it: the device's primary context, made current on whichever thread
// calls, and the one stream on which the executor, cuBLASLt, cuDNN and copies run in order.
// Opening it is the check that there is a GPU: without a driver or device the error says why.
#pragma once

#include "runtime/Status.h"
#include "runtime/Transfers.h"
#include "runtime/cuda/CudaDriver.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace smelt::rt::cuda {

/// What `open()` gave for device `ordinal` the first time, kept for the life of the process (an
/// error too: a device that failed is not tried again). One table per `Open` type, so per call
/// site when it is a lambda.
template <typename T, typename Open> Expected<T> openOncePerDevice(int ordinal, Open open) {
  static std::mutex mutex;
  static std::map<int, Expected<T>> opened;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened.find(ordinal); it != opened.end())
    return it->second;
  return opened.emplace(ordinal, open()).first->second;
}

class CudaDevice {
public:
  /// Physical GPU `ordinal` (the driver's numbering), its primary context retained and current
  /// on the calling thread, and a fresh non-blocking stream. Opened once per ordinal per
  /// process; every caller shares it.
  static Expected<std::shared_ptr<CudaDevice>> open(int ordinal = 0);
  ~CudaDevice();
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;

  const CudaDriver &driver() const { return *cu_; }
  /// `cu.check(...)` with this device named: "gpu:0: cuLaunchKernel failed: ...".
  Status check(CUresult result, const char *call) const;
  /// Makes the context current on the calling thread (cheap; call before driver calls on a
  /// thread that did not open the device).
  Status makeCurrent() const;
  /// Waits for everything queued on the stream, a host sync (threadTransfers); the error names
  /// `what` was waited for.
  Status synchronize(const std::string &what) const;
  /// Queues a copy of `bytes` on the stream, host -> device or device -> host, counted
  /// (threadTransfers). With pinned host memory it runs later, so the host leaves that memory
  /// alone until a synchronize.
  Status copyToDevice(void *to, const void *from, uint64_t bytes) const;
  Status copyToHost(void *to, const void *from, uint64_t bytes) const;

  int ordinal() const { return ordinal_; }
  CUstream stream() const { return stream_; }
  /// "sm_90": what NVRTC compiled for when CUBIN loads directly.
  const std::string &arch() const { return arch_; }
  const std::string &name() const { return name_; }
  uint64_t totalMemory() const { return totalMemory_; }
  /// Free and total bytes as the driver sees them now (other processes included).
  Expected<std::pair<uint64_t, uint64_t>> memoryInfo() const;

private:
  CudaDevice() = default;
  const CudaDriver *cu_ = nullptr;
  int ordinal_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::string arch_, name_;
  uint64_t totalMemory_ = 0;
};

/// The driver's name for a device address the allocator handed out as a pointer.
inline CUdeviceptr devicePointer(const void *address) {
  return CUdeviceptr(reinterpret_cast<uintptr_t>(address));
}

} // namespace smelt::rt::cuda
