// GPU memory through the allocator: blocks that hold data, a limit that fails a request naming
// the buffer and leaves the allocator usable, preallocation the driver sees, and logical GPUs
// that split gpu:0 with their own limits. Skips without a GPU.
#include "GpuTestUtil.h"

#include "runtime/DeviceMemory.h"
#include "runtime/cuda/CudaMemory.h"

#include "RuntimeTestUtil.h"

namespace smelt::rt::test {
namespace {

constexpr uint64_t kMiB = 1 << 20;

std::unique_ptr<Allocator> gpuAllocator(const MemoryPolicy &policy) {
  Expected<std::unique_ptr<Allocator>> made = Allocator::create(
      "gpu:0", std::make_unique<cuda::CudaMemorySource>(*testGpu()), policy);
  EXPECT_TRUE(made.ok()) << made.message();
  return made.ok() ? std::move(*made) : nullptr;
}

TEST(GpuMemory, BlocksHoldDataAndALimitFailsCleanly) {
  SMELT_REQUIRE_GPU();
  const cuda::CudaDevice &gpu = **testGpu();
  std::unique_ptr<Allocator> allocator = gpuAllocator({.limitBytes = 64 * kMiB});
  ASSERT_TRUE(allocator);
  Expected<void *> block = allocator->allocate(40 * kMiB, "buffer b1 (big)");
  ASSERT_TRUE(block.ok()) << block.message();
  HostTensor values = randomTensor(DType::f32, {1024, 1024});
  CUdeviceptr at = reinterpret_cast<CUdeviceptr>(*block);
  SMELT_ASSERT_OK(gpu.check(gpu.driver().memcpyHtoD(at, values.raw(), values.byteSize()),
                            "cuMemcpyHtoD"));
  HostTensor back = HostTensor::zeros(values.type());
  SMELT_ASSERT_OK(
      gpu.check(gpu.driver().memcpyDtoH(back.raw(), at, back.byteSize()), "cuMemcpyDtoH"));
  EXPECT_EQ(back.toDoubles(), values.toDoubles());

  Expected<void *> over = allocator->allocate(30 * kMiB, "buffer b2 (too much)");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("gpu:0: out of memory for buffer b2 (too much): it needs 30.0 "
                                "MiB"),
            std::string::npos)
      << over.message();
  EXPECT_NE(over.message().find("40.0 MiB buffer b1 (big)"), std::string::npos)
      << over.message();
  allocator->free(*block);
  Expected<void *> fits = allocator->allocate(30 * kMiB, "buffer b2");
  EXPECT_TRUE(fits.ok()) << fits.message();
}

TEST(GpuMemory, PreallocationIsTakenFromTheDeviceAtOnce) {
  SMELT_REQUIRE_GPU();
  Expected<std::pair<uint64_t, uint64_t>> before = (*testGpu())->memoryInfo();
  ASSERT_TRUE(before.ok()) << before.message();
  std::unique_ptr<Allocator> allocator =
      gpuAllocator({.preallocate = true, .fraction = 0.5, .limitBytes = 1024 * kMiB});
  ASSERT_TRUE(allocator);
  Expected<std::pair<uint64_t, uint64_t>> after = (*testGpu())->memoryInfo();
  ASSERT_TRUE(after.ok()) << after.message();
  EXPECT_GE(before->first - after->first, 512 * kMiB) << "the driver's free memory";
  EXPECT_EQ(allocator->stats().reservedBytes, 512 * kMiB);
  EXPECT_FALSE(allocator->allocate(600 * kMiB, "past the preallocation").ok());
}

TEST(GpuMemory, LogicalGpusSplitGpu0WithTheirOwnLimits) {
  SMELT_REQUIRE_GPU();
  MemoryConfig config;
  config.logicalGpuLimits = {256 * kMiB, 512 * kMiB};
  SMELT_ASSERT_OK(configureMemory(config));
  Expected<Allocator *> first = deviceAllocator("gpu:0"), second = deviceAllocator("gpu:1");
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ((*first)->stats().limitBytes, 256 * kMiB);
  EXPECT_EQ((*second)->stats().limitBytes, 512 * kMiB);
  Expected<void *> onSecond = (*second)->allocate(300 * kMiB, "fits gpu:1");
  EXPECT_TRUE(onSecond.ok()) << onSecond.message();
  Expected<void *> onFirst = (*first)->allocate(300 * kMiB, "does not fit gpu:0");
  ASSERT_FALSE(onFirst.ok());
  EXPECT_NE(onFirst.message().find("gpu:0: out of memory"), std::string::npos)
      << onFirst.message();
  (*second)->free(*onSecond);
  // gpu:2 is the next physical GPU, if the machine has one; else it does not exist.
  int physical = 0;
  (*testGpu())->driver().deviceGetCount(&physical);
  EXPECT_EQ(logicalGpuCount(physical), physical + 1);
  if (physical == 1) {
    Expected<Allocator *> none = deviceAllocator("gpu:2");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.message().find("gpu:2 does not exist: there are 2 GPUs"), std::string::npos)
        << none.message();
  }
}

} // namespace
} // namespace smelt::rt::test
