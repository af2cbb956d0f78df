// gpu:0 for the runtime's GPU tests, and their device memory (GpuTestUtil.h).
#include "GpuTestUtil.h"

#include <stdexcept>

namespace smelt::rt::test {

const Expected<std::shared_ptr<cuda::CudaDevice>> &testGpu() {
  static const Expected<std::shared_ptr<cuda::CudaDevice>> gpu = cuda::CudaDevice::open(0);
  return gpu;
}

namespace {
// Device memory in tests fails loudly: the test's own ASSERTs cannot reach into constructors.
void require(const Status &status) {
  if (!status.ok())
    throw std::runtime_error(status.message());
}
const cuda::CudaDevice &gpu() { return **testGpu(); }
} // namespace

DeviceMemory::DeviceMemory(size_t bytes) {
  require(gpu().check(gpu().driver().memAlloc(&ptr_, std::max<size_t>(bytes, 1)), "cuMemAlloc"));
}

Status uploadAndWait(CUdeviceptr destination, const void *source, size_t bytes) {
  if (Status s = gpu().check(gpu().driver().memcpyHtoDAsync(destination, source, bytes,
                                                            gpu().stream()),
                             "cuMemcpyHtoDAsync");
      !s.ok())
    return s;
  return gpu().synchronize("a test's upload");
}

DeviceMemory::DeviceMemory(const HostTensor &tensor) : DeviceMemory(tensor.byteSize()) {
  require(uploadAndWait(ptr_, tensor.raw(), tensor.byteSize()));
}

DeviceMemory::~DeviceMemory() {
  if (ptr_)
    gpu().driver().memFree(ptr_);
}

HostTensor DeviceMemory::download(const TensorType &type) const {
  require(gpu().synchronize("a test's download"));
  HostTensor tensor = HostTensor::zeros(type);
  require(gpu().check(gpu().driver().memcpyDtoH(tensor.raw(), ptr_, tensor.byteSize()),
                      "cuMemcpyDtoH"));
  return tensor;
}

} // namespace smelt::rt::test
