// Opening a GPU: driver, device, primary context and stream (CudaDevice.h).
#include "runtime/cuda/CudaDevice.h"

#include <fmt/format.h>

namespace smelt::rt::cuda {

Expected<std::shared_ptr<CudaDevice>> CudaDevice::open(int ordinal) {
  auto attempt = [&]() -> Expected<std::shared_ptr<CudaDevice>> {
    SMELT_ASSIGN_OR_RETURN(const CudaDriver *driver, CudaDriver::get());
    const CudaDriver &cu = *driver;
    int count = 0;
    SMELT_RETURN_IF_ERROR(cu.check(cu.deviceGetCount(&count), "cuDeviceGetCount"));
    if (ordinal < 0 || ordinal >= count)
      return Status::error(fmt::format("gpu:{}: the CUDA driver sees {} GPU{}", ordinal, count,
                                       count == 1 ? "" : "s"));
    std::shared_ptr<CudaDevice> gpu(new CudaDevice());
    gpu->cu_ = &cu;
    gpu->ordinal_ = ordinal;
    int major = 0, minor = 0;
    char name[256] = {};
    size_t total = 0;
    SMELT_RETURN_IF_ERROR(firstError(
        {gpu->check(cu.deviceGet(&gpu->device_, ordinal), "cuDeviceGet"),
         gpu->check(cu.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                          gpu->device_),
                    "cuDeviceGetAttribute(major)"),
         gpu->check(cu.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                          gpu->device_),
                    "cuDeviceGetAttribute(minor)"),
         gpu->check(cu.deviceGetName(name, sizeof name - 1, gpu->device_), "cuDeviceGetName"),
         gpu->check(cu.deviceTotalMem(&total, gpu->device_), "cuDeviceTotalMem")}));
    SMELT_RETURN_IF_ERROR(
        gpu->check(cu.primaryCtxRetain(&gpu->context_, gpu->device_), "cuDevicePrimaryCtxRetain"));
    SMELT_RETURN_IF_ERROR(gpu->makeCurrent());
    SMELT_RETURN_IF_ERROR(
        gpu->check(cu.streamCreate(&gpu->stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    gpu->arch_ = fmt::format("sm_{}{}", major, minor);
    gpu->name_ = name;
    gpu->totalMemory_ = total;
    return gpu;
  };
  auto device = openOncePerDevice<std::shared_ptr<CudaDevice>>(ordinal, attempt);
  if (device.ok())
    SMELT_RETURN_IF_ERROR((*device)->makeCurrent());
  return device;
}

CudaDevice::~CudaDevice() {
  // Only reached at process exit (open() keeps every device); the driver may already be
  // shutting down, so results are ignored.
  if (stream_)
    cu_->streamDestroy(stream_);
  if (context_)
    cu_->primaryCtxRelease(device_);
}

Status CudaDevice::check(CUresult result, const char *call) const {
  if (result == CUDA_SUCCESS)
    return {};
  return Status::error(fmt::format("gpu:{}: {}", ordinal_, cu_->check(result, call).message()));
}

Status CudaDevice::makeCurrent() const {
  return check(cu_->ctxSetCurrent(context_), "cuCtxSetCurrent");
}

Status CudaDevice::synchronize(const std::string &what) const {
  ++threadTransferCounts().hostSyncs;
  if (CUresult result = cu_->streamSynchronize(stream_); result != CUDA_SUCCESS)
    return Status::error(fmt::format("{} (waiting for {}): the error may come from any work "
                                     "queued before it",
                                     check(result, "cuStreamSynchronize").message(), what));
  return {};
}

Status CudaDevice::copyToDevice(void *to, const void *from, uint64_t bytes) const {
  threadTransferCounts().toDevice += bytes;
  return check(cu_->memcpyHtoDAsync(devicePointer(to), from, bytes, stream_), "cuMemcpyHtoDAsync");
}

Status CudaDevice::copyToHost(void *to, const void *from, uint64_t bytes) const {
  threadTransferCounts().toHost += bytes;
  return check(cu_->memcpyDtoHAsync(to, devicePointer(from), bytes, stream_), "cuMemcpyDtoHAsync");
}

Expected<std::pair<uint64_t, uint64_t>> CudaDevice::memoryInfo() const {
  size_t free = 0, total = 0;
  SMELT_RETURN_IF_ERROR(check(cu_->memGetInfo(&free, &total), "cuMemGetInfo"));
  return std::pair<uint64_t, uint64_t>{free, total};
}

} // namespace smelt::rt::cuda
