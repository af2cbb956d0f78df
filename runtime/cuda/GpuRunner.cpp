// GpuExecutor as an Executor segment runner (GpuRunner.h).
#include "runtime/cuda/GpuRunner.h"

#include "runtime/DeviceMemory.h"
#include "runtime/cuda/GpuExecutor.h"

namespace smelt::rt::cuda {

Expected<std::unique_ptr<SegmentRunner>> gpuSegmentRunner(const Executable &segment,
                                                         const std::string &device,
                                                         const ExecutorOptions &options) {
  // Logical GPUs split physical ones: find which physical GPU this one is.
  SMELT_ASSIGN_OR_RETURN(LogicalGpu logical, resolveGpu(device));
  Expected<std::shared_ptr<CudaDevice>> gpu = CudaDevice::open(logical.physical);
  if (!gpu)
    return Status::error(device + ": " + gpu.message());
  SMELT_ASSIGN_OR_RETURN(Allocator * allocator, deviceAllocator(device));
  SMELT_ASSIGN_OR_RETURN(
      GpuExecutor executor,
      GpuExecutor::create(segment, *gpu, allocator, options.allowTf32, options.cudaGraphs));
  executor.setCommunicator(options.communicator);
  return std::unique_ptr<SegmentRunner>(std::make_unique<GpuExecutor>(std::move(executor)));
}

} // namespace smelt::rt::cuda
