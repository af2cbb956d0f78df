// The GPU's DeviceArray storage (runtime/DeviceArray.h): a block of a GPU allocator holding an
// output a run kept on the device, freed to that allocator when the array goes. Every executor
// on one GPU queues on the device's one stream, so a block freed here goes only to work queued
// after what still reads it (Allocator.h), and a copy to the host waits for that work.
#pragma once

#include "runtime/DeviceArray.h"
#include "runtime/cuda/CudaDevice.h"

#include <memory>

namespace smelt::rt::cuda {

/// An array of `type` in `block`, a block of `allocator` on `device`, which it now owns.
DeviceArray cudaArray(TensorType type, std::shared_ptr<CudaDevice> device, Allocator &allocator,
                      void *block);

} // namespace smelt::rt::cuda
