// GpuExecutor as an Executor segment runner (GpuRunner.h).
#include "runtime/cuda/GpuRunner.h"

#include "runtime/DeviceMemory.h"
#include "runtime/cuda/GpuExecutor.h"

namespace smelt::rt::cuda {

Expected<std::unique_ptr<SegmentRunner>> gpuSegmentRunner(const Executable &segment,
                                                         const std::string &device,
                                                         const ExecutorOptions &options) {
  // Logical GPUs split physical ones: find which physical GPU this one is.
  Expected<LogicalGpu> logical = resolveGpu(device);
  if (!logical)
    return logical.status();
  Expected<std::shared_ptr<CudaDevice>> gpu = CudaDevice::open(logical->physical);
  if (!gpu)
    return Status::error(device + ": " + gpu.message());
  Expected<Allocator *> allocator = deviceAllocator(device);
  if (!allocator)
    return allocator.status();
  Expected<GpuExecutor> executor =
      GpuExecutor::create(segment, *gpu, *allocator, options.allowTf32, options.cudaGraphs);
  if (!executor)
    return executor.status();
  executor->setCommunicator(options.communicator);
  return std::unique_ptr<SegmentRunner>(std::make_unique<GpuExecutor>(std::move(*executor)));
}

} // namespace smelt::rt::cuda
