// The GPU's part in rt::Executor (runtime/Executor.h): a segment placed on gpu:N runs on a
// GpuExecutor on the physical GPU that logical device N is (DeviceMemory.h), with that logical
// device's allocator. Tools and tests put gpuSegmentRunner into ExecutorOptions::gpuRunner.
#pragma once

#include "runtime/Executor.h"

namespace smelt::rt::cuda {

/// A SegmentRunnerFactory: the error says why `device` cannot run it (no GPU, no such logical
/// GPU, a step the GPU executor has no kernel for).
Expected<std::unique_ptr<SegmentRunner>> gpuSegmentRunner(const Executable &segment,
                                                         const std::string &device,
                                                         const ExecutorOptions &options);

} // namespace smelt::rt::cuda
