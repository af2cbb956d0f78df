// The GPU executor's all_reduce step: the operands packed into one device buffer, reduced over
// the replica group and unpacked into the results. An NCCL communicator on the executor's GPU
// reduces the device buffer itself; a host one (threads, MPI) a host copy of it.
#pragma once

#include "runtime/CollectiveSteps.h"
#include "runtime/cuda/CudaDevice.h"

namespace smelt::rt::cuda {

/// Runs `spec` on `gpu`'s stream: `operands` and `results` are device buffers, `flat` a device
/// buffer of spec.count elements for a bucket of several (unused for one, which is reduced in
/// its result). Over one replica a sum or mean is the operand itself, and `communicator` may be
/// null.
///
/// An NCCL communicator on this GPU (not in deterministic mode) enqueues the reduction on the
/// executor's stream, after the kernels that computed the gradients and before those that read
/// the result, with no host wait: the backward pass's later kernels queue behind it while it
/// runs. Its ticket goes into `started`, and the run must wait for it (Communicator::wait,
/// which gives up after the group's timeout and aborts the communicator) before it reads
/// anything back or gives the buffers up. `started` null: the stream is capturing a CUDA
/// graph, and the reduction is recorded into it (Communicator::captureOnStream) with no
/// ticket; the run fences the graph's launch instead. Every other communicator (threads, MPI,
/// or NCCL in deterministic mode) reduces before this returns: the host waits for the GPU,
/// then for the group (which no capture can hold: refused).
Status allReduceOnGpu(const CudaDevice &gpu, const AllReduceSpec &spec, void *const *operands,
                      void *const *results, void *flat, Communicator *communicator,
                      std::vector<int64_t> *started);

} // namespace smelt::rt::cuda
