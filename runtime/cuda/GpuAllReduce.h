// The GPU executor's all_reduce step: the operands packed into one device buffer, reduced over
// the replica group and unpacked into the results. An NCCL communicator on the executor's GPU
// reduces the device buffer itself; a host one (threads, MPI) a host copy of it.
#pragma once

#include "runtime/CollectiveSteps.h"
#include "runtime/cuda/CudaDevice.h"

namespace smelt::rt::cuda {

/// Runs `spec` to completion on `gpu`'s stream: `operands` and `results` are device buffers,
/// `flat` a device buffer of spec.count elements for a bucket of several (unused for one, which
/// is reduced in its result). Over one replica a sum or mean is the operand itself, and
/// `communicator` may be null. Synchronous: the host waits for the reduction, so nothing
/// overlaps it yet.
Status allReduceOnGpu(const CudaDevice &gpu, const AllReduceSpec &spec, void *const *operands,
                      void *const *results, void *flat, Communicator *communicator);

} // namespace smelt::rt::cuda
