// cuMemAlloc regions for the allocator (CudaMemory.h).
#include "runtime/cuda/CudaMemory.h"

namespace smelt::rt::cuda {

Expected<void *> CudaMemorySource::take(uint64_t bytes) {
  SMELT_RETURN_IF_ERROR(device_->makeCurrent());
  CUdeviceptr region = 0;
  SMELT_RETURN_IF_ERROR(device_->check(device_->driver().memAlloc(&region, bytes), "cuMemAlloc"));
  return reinterpret_cast<void *>(region);
}

void CudaMemorySource::give(void *region, uint64_t) {
  // Pending work may still read the region: the stream finishes it first. A failure here
  // (a sticky context error) has been reported by the call that caused it.
  (void)device_->makeCurrent();
  (void)device_->synchronize("freeing a region");
  device_->driver().memFree(devicePointer(region));
}

} // namespace smelt::rt::cuda
