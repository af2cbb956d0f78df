// all_reduce on GPU buffers (GpuAllReduce.h).
#include "runtime/cuda/GpuAllReduce.h"

#include <fmt/format.h>

namespace smelt::rt::cuda {

Status allReduceOnGpu(const CudaDevice &gpu, const AllReduceSpec &spec, void *const *operands,
                      void *const *results, void *flat, Communicator *communicator,
                      std::vector<int64_t> *started) {
  const CudaDriver &cu = gpu.driver();
  std::string what = "all_reduce '" + spec.what + "'";
  auto check = [&](CUresult result, const char *call) {
    Status s = gpu.check(result, call);
    return s.ok() ? s : Status::error(what + ": " + s.message());
  };
  auto copy = [&](void *to, const void *from, uint64_t bytes) {
    if (bytes == 0)
      return Status();
    return check(cu.memcpyDtoDAsync(devicePointer(to), devicePointer(from), bytes, gpu.stream()),
                 "cuMemcpyDtoDAsync");
  };
  size_t n = spec.operandBytes.size();
  if (spec.replicas == 1) {
    for (size_t i = 0; i < n; ++i)
      SMELT_RETURN_IF_ERROR(copy(results[i], operands[i], spec.operandBytes[i]));
    return Status();
  }
  SMELT_RETURN_IF_ERROR(spec.checkGroup(communicator));
  auto *data = static_cast<uint8_t *>(n == 1 ? results[0] : flat);
  uint64_t total = 0;
  for (size_t i = 0; i < n; total += spec.operandBytes[i++])
    SMELT_RETURN_IF_ERROR(copy(data + total, operands[i], spec.operandBytes[i]));
  int home = communicator->cudaDevice();
  if (home >= 0 && home != gpu.ordinal())
    return Status::error(fmt::format("{}: {} reduces gpu:{}'s memory, this step runs on gpu:{}",
                                     what, communicator->describe(), home, gpu.ordinal()));
  if (!started) {
    // Capturing a graph: the communicator records the reduction into it (NCCL), or refuses.
    SMELT_RETURN_IF_ERROR(communicator->captureOnStream(gpu.stream(), data, spec.count, spec.dtype,
                                                        spec.kind, spec.what));
  } else if (home >= 0 && communicator->reducesOnStreams()) {
    // On the executor's stream, behind the packing copies: ordered with the kernels both ways.
    SMELT_ASSIGN_OR_RETURN(int64_t ticket,
                           communicator->startOnStream(gpu.stream(), data, spec.count, spec.dtype,
                                                       spec.kind, spec.what));
    started->push_back(ticket);
  } else if (home >= 0) {
    // The collective runs on NCCL's own stream and wait() reduces on the host: the packing
    // comes first, and the result is there once wait() returned.
    SMELT_RETURN_IF_ERROR(gpu.synchronize(what));
    SMELT_RETURN_IF_ERROR(
        communicator->allReduce(data, spec.count, spec.dtype, spec.kind, spec.what));
  } else {
    // The host copy reads the buffer: the packing comes first.
    SMELT_RETURN_IF_ERROR(gpu.synchronize(what));
    std::vector<uint8_t> host(total);
    // Synchronous: the host waits for the copy.
    countTransfers({.toHost = total, .hostSyncs = total ? 1u : 0u});
    SMELT_RETURN_IF_ERROR(
        check(cu.memcpyDtoH(host.data(), devicePointer(data), total), "cuMemcpyDtoH"));
    SMELT_RETURN_IF_ERROR(
        communicator->allReduce(host.data(), spec.count, spec.dtype, spec.kind, spec.what));
    // On the executor's stream, not the legacy one: the stream is non-blocking, so a copy on
    // the legacy stream is not ordered before the next kernel, which could read stale data.
    // `host` is pageable and dies here: wait for the copy.
    if (Status s = gpu.copyToDevice(data, host.data(), total); !s.ok())
      return Status::error(what + ": " + s.message());
    SMELT_RETURN_IF_ERROR(gpu.synchronize(what));
  }
  if (n > 1)
    for (size_t i = 0, offset = 0; i < n; offset += spec.operandBytes[i++])
      SMELT_RETURN_IF_ERROR(copy(results[i], data + offset, spec.operandBytes[i]));
  return Status();
}

} // namespace smelt::rt::cuda
