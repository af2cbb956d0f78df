// Shared by the runtime's GPU tests: gpu:0 opened once (or why not, to skip with), and device
// memory that frees itself, filled from and read back into HostTensors.
#pragma once

#include "GpuSkip.h"
#include "runtime/HostTensor.h"
#include "runtime/cuda/CudaDevice.h"

#include <gtest/gtest.h>

namespace smelt::rt::test {

/// gpu:0, or the reason there is none.
const Expected<std::shared_ptr<cuda::CudaDevice>> &testGpu();

/// Skips the test, saying why, when there is no GPU; else makes its context current.
#define SMELT_REQUIRE_GPU()                                                                        \
  do {                                                                                             \
    if (!::smelt::rt::test::testGpu().ok())                                                        \
      SMELT_SKIP_WITHOUT_GPU(::smelt::rt::test::testGpu().message());                              \
    ::smelt::rt::Status current_ = (*::smelt::rt::test::testGpu())->makeCurrent();                 \
    ASSERT_TRUE(current_.ok()) << current_.message();                                              \
  } while (0)

/// Fails the test with the CUDA error when a Status is not ok.
#define SMELT_ASSERT_OK(expr)                                                                      \
  do {                                                                                             \
    ::smelt::rt::Status status_ = (expr);                                                          \
    ASSERT_TRUE(status_.ok()) << status_.message();                                                \
  } while (0)

/// Copies `bytes` from pageable host memory to `destination` and waits until they are there.
/// A plain cuMemcpyHtoD is not enough: from pageable memory it may return before its DMA ends,
/// on the legacy stream, which the device's non-blocking stream does not wait for. This copy
/// goes on the device's stream, which then is synchronized.
Status uploadAndWait(CUdeviceptr destination, const void *source, size_t bytes);

/// `bytes` of device memory on gpu:0 (at least 1), freed on destruction.
class DeviceMemory {
public:
  explicit DeviceMemory(size_t bytes);
  /// Device memory holding a copy of `tensor`.
  explicit DeviceMemory(const HostTensor &tensor);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory &) = delete;
  DeviceMemory &operator=(const DeviceMemory &) = delete;
  CUdeviceptr ptr() const { return ptr_; }
  void *pointer() const { return reinterpret_cast<void *>(ptr_); }
  /// The first type.byteSize() bytes as a tensor of `type` (after the stream is idle).
  HostTensor download(const TensorType &type) const;

private:
  CUdeviceptr ptr_ = 0;
};

} // namespace smelt::rt::test
