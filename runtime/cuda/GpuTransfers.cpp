// The GPU executor's traffic with the host: the pinned staging buffer, the run's uploads of
// host inputs (arrays on its GPU are read in place or taken over), its downloads of outputs,
// and the outputs a caller keeps on the device.
#include "runtime/cuda/GpuExecutor.h"

#include "runtime/DeviceMemory.h"
#include "runtime/RunBuffers.h"
#include "runtime/cuda/CudaArray.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace smelt::rt::cuda {

Status GpuExecutor::reserveStaging(uint64_t bytes) {
  if (bytes <= stagingBytes_)
    return Status();
  // The old buffer may still feed queued copies: wait for them before giving it back.
  SMELT_RETURN_IF_ERROR(device_->synchronize("copies through the staging buffer"));
  stagingIdle_ = true;
  staging_.reset();
  stagingBytes_ = 0;
  void *pinned = nullptr;
  if (Status s = device_->check(device_->driver().memAllocHost(&pinned, bytes), "cuMemAllocHost");
      !s.ok())
    return Status::error(fmt::format("@{}: pinned staging of {}: {}", executable_->name,
                                     formatBytes(bytes), s.message()));
  staging_ = std::unique_ptr<void, FreeHost>(pinned, FreeHost{device_});
  stagingBytes_ = bytes;
  return Status();
}

Status GpuExecutor::upload(const std::vector<Input> &inputs) {
  const Executable &exe = *executable_;
  // An array on another device comes through the host: copied here, staged below.
  std::vector<HostTensor> fromElsewhere;
  std::vector<const HostTensor *> staged(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].array) {
      staged[i] = inputs[i].host;
    } else if (&inputs[i].array->allocator() != allocator_) {
      Expected<HostTensor> copy = inputs[i].array->toHost();
      if (!copy)
        return Status::error(
            fmt::format("input #{} ({}): {}", i, exe.buffers[exe.inputs[i]].name, copy.message()));
      fromElsewhere.reserve(inputs.size());
      staged[i] = &fromElsewhere.emplace_back(std::move(*copy));
    }
  }
  uint64_t total = 0;
  for (const HostTensor *t : staged)
    total += t ? Allocator::alignUp(t->byteSize()) : 0;
  // The host writes the staging buffer: nothing queued before may still read it. After a run
  // that waited for its outputs nothing does, so a training loop waits once a step (for its
  // loss); after one that kept every output on the GPU, or failed, the host waits here. A run
  // whose inputs are all on this GPU already stages nothing and waits for nothing.
  if (total && !stagingIdle_)
    SMELT_RETURN_IF_ERROR(device_->synchronize("the previous run"));
  SMELT_RETURN_IF_ERROR(reserveStaging(total));
  stagingIdle_ = stagingIdle_ && total == 0;
  char *staging = static_cast<char *>(staging_.get());
  for (size_t i = 0; i < inputs.size(); ++i) {
    BufferId id = exe.inputs[i];
    if (!staged[i]) {
      // On this GPU: read in place, or taken over when donated. An input the executable also
      // returns keeps its block through the run either way.
      DeviceArray &array = *inputs[i].array;
      if (inputs[i].donated)
        buffers_.adopt(id, array.release());
      else
        SMELT_RETURN_IF_ERROR(buffers_.take(id, array.address()));
      continue;
    }
    SMELT_RETURN_IF_ERROR(buffers_.take(id));
    if (size_t bytes = staged[i]->byteSize()) {
      std::memcpy(staging, staged[i]->raw(), bytes);
      if (Status s = device_->copyToDevice(buffers_[id], staging, bytes); !s.ok())
        return Status::error(
            fmt::format("input #{} ({}): {}", i, exe.buffers[id].name, s.message()));
      staging += Allocator::alignUp(bytes);
    }
  }
  return Status();
}

Status GpuExecutor::download(const std::vector<HostTensor *> &reusable,
                             std::vector<HostTensor> &outputs, const RunValues &residency) {
  const Executable &exe = *executable_;
  uint64_t total = 0;
  for (size_t i = 0; i < exe.outputs.size(); ++i)
    if (!residency.keeps(i))
      total += Allocator::alignUp(exe.buffers[exe.outputs[i]].type.byteSize());
  SMELT_RETURN_IF_ERROR(reserveStaging(total));
  // Queued after this run's uploads on the same stream, so they overwrite nothing still read.
  char *staging = static_cast<char *>(staging_.get());
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    if (residency.keeps(i))
      continue;
    BufferId id = exe.outputs[i];
    uint64_t bytes = exe.buffers[id].type.byteSize();
    if (bytes)
      if (Status s = device_->copyToHost(staging, buffers_[id], bytes); !s.ok())
        return Status::error(fmt::format("output {}: {}", bufferLabel(exe, id), s.message()));
    staging += Allocator::alignUp(bytes);
  }
  stagingIdle_ = stagingIdle_ && total == 0;
  // A run that keeps every output on the device returns without waiting for it.
  if (!residency.keepsAll(exe.outputs.size())) {
    SMELT_RETURN_IF_ERROR(device_->synchronize("the run of @" + exe.name));
    stagingIdle_ = true;
  }
  // A fresh vector, assigned last: `outputs` may hold the tensors the inputs point at. The
  // caller's tensors that no input shares are filled in place of fresh ones.
  std::vector<HostTensor> results(exe.outputs.size());
  staging = static_cast<char *>(staging_.get());
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    if (residency.keeps(i))
      continue;
    BufferId id = exe.outputs[i];
    if (reusable[i]) {
      results[i] = std::move(*reusable[i]);
    } else {
      SMELT_ASSIGN_OR_RETURN(
          results[i], HostTensor::allocate(exe.buffers[id].type, fmt::format("output #{}", i)));
    }
    if (results[i].byteSize())
      std::memcpy(results[i].raw(), staging, results[i].byteSize());
    staging += Allocator::alignUp(results[i].byteSize());
  }
  outputs = std::move(results);
  return Status();
}

Expected<std::vector<DeviceArray>> GpuExecutor::keptOutputs(const RunValues &residency) {
  const Executable &exe = *executable_;
  std::vector<DeviceArray> kept(exe.outputs.size());
  // Copies first: an output's block handed over below would leave a second reader without it.
  std::vector<void *> blocks(exe.outputs.size(), nullptr);
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    if (!residency.keeps(i))
      continue;
    BufferId id = exe.outputs[i];
    if (std::count(exe.outputs.begin(), exe.outputs.end(), id) == 1)
      blocks[i] = buffers_.release(id);
  }
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    if (!residency.keeps(i))
      continue;
    BufferId id = exe.outputs[i];
    const TensorType &type = exe.buffers[id].type;
    void *block = blocks[i];
    if (!block) {
      // An arena's buffer, a constant, a lent input or one returned twice: the run cannot
      // give its block away, so the array is a device copy.
      SMELT_ASSIGN_OR_RETURN(
          block,
          allocator_->allocate(type.byteSize(), fmt::format("output #{} kept on the device", i)));
      if (type.byteSize())
        if (Status s = device_->check(
                device_->driver().memcpyDtoDAsync(devicePointer(block), devicePointer(buffers_[id]),
                                                  type.byteSize(), device_->stream()),
                "cuMemcpyDtoDAsync");
            !s.ok()) {
          allocator_->free(block);
          return Status::error(fmt::format("output {}: {}", bufferLabel(exe, id), s.message()));
        }
    }
    kept[i] = cudaArray(type, device_, *allocator_, block);
  }
  return kept;
}

} // namespace smelt::rt::cuda
