// GPU memory for the runtime's allocator (runtime/Allocator.h): regions from cuMemAlloc on one
// device's context. Several sources may share a device: logical GPUs that split it.
#pragma once

#include "runtime/Allocator.h"
#include "runtime/cuda/CudaDevice.h"

#include <memory>

namespace smelt::rt::cuda {

class CudaMemorySource : public MemorySource {
public:
  explicit CudaMemorySource(std::shared_ptr<CudaDevice> device) : device_(std::move(device)) {}
  /// cuMemAlloc's blocks are 256-byte aligned at least (the CUDA programming guide); the
  /// error is the driver's, naming the device.
  Expected<void *> take(uint64_t bytes) override;
  void give(void *region, uint64_t bytes) override;
  uint64_t capacity() const override { return device_->totalMemory(); }

private:
  std::shared_ptr<CudaDevice> device_;
};

} // namespace smelt::rt::cuda
