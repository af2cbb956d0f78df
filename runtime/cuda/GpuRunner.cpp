// GpuExecutor as an Executor segment runner (GpuRunner.h).
#include "runtime/cuda/GpuRunner.h"

#include "runtime/DeviceMemory.h"
#include "runtime/Devices.h"
#include "runtime/cuda/GpuExecutor.h"

namespace smelt::rt::cuda {

namespace {

class GpuRunner final : public SegmentRunner {
public:
  explicit GpuRunner(GpuExecutor executor) : executor_(std::move(executor)) {}
  Status run(const std::vector<const HostTensor *> &inputs,
             std::vector<HostTensor> &outputs) override {
    return executor_.run(inputs, outputs);
  }
  uint64_t lastRunPeakBytes() const override { return executor_.lastRunPeakBytes(); }

private:
  GpuExecutor executor_;
};

} // namespace

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
      GpuExecutor::create(segment, *gpu, *allocator, options.allowTf32);
  if (!executor)
    return executor.status();
  executor->setCommunicator(options.communicator);
  return std::unique_ptr<SegmentRunner>(std::make_unique<GpuRunner>(std::move(*executor)));
}

} // namespace smelt::rt::cuda
