// Device discovery's checks that need no GPU: device names, and whether a CUDA driver can run
// kernels built with a toolkit (CUDA's minor version compatibility) with a message naming both.
#include "runtime/Devices.h"

#include <gtest/gtest.h>

namespace smelt::rt::test {
namespace {

TEST(Devices, DriverOlderThanTheToolkitsMajorVersionIsRefusedNamingBoth) {
  std::string old = cudaDriverTooOld(12040, 13000);
  EXPECT_NE(old.find("supports CUDA 12.4"), std::string::npos) << old;
  EXPECT_NE(old.find("CUDA 13.0 toolkit"), std::string::npos) << old;
  EXPECT_NE(old.find("update the NVIDIA driver"), std::string::npos) << old;
  // Same major version, older or newer minor: minor version compatibility.
  EXPECT_EQ(cudaDriverTooOld(13000, 13000), "");
  EXPECT_EQ(cudaDriverTooOld(13000, 13020), "");
  EXPECT_EQ(cudaDriverTooOld(13020, 13000), "");
  EXPECT_EQ(cudaDriverTooOld(14000, 13000), "");
  EXPECT_NE(cudaDriverTooOld(12090, 13000), "");
}

// Mixed GPUs get one build for the oldest: its CUBIN there, its PTX JIT-compiled on the rest.
TEST(Devices, KernelsAreBuiltForTheLowestComputeCapability) {
  std::vector<DeviceInfo> devices = {{"cpu:0", "x86_64", 0, 0, 16, 0},
                                     {"gpu:0", "H100", 9, 0, 132, 0},
                                     {"gpu:1", "A100", 8, 0, 108, 0},
                                     {"gpu:2", "L4", 8, 9, 58, 0}};
  EXPECT_EQ(lowestGpuArch(devices), "sm_80");
  devices.erase(devices.begin() + 2);
  EXPECT_EQ(lowestGpuArch(devices), "sm_89");
  EXPECT_EQ(lowestGpuArch({devices.front()}), "");
}

TEST(Devices, NamesAreCpuOrGpuWithAnIndex) {
  EXPECT_TRUE(isDeviceName("cpu:0"));
  EXPECT_TRUE(isDeviceName("gpu:12"));
  EXPECT_FALSE(isDeviceName("gpu:"));
  EXPECT_FALSE(isDeviceName("tpu:0"));
  EXPECT_FALSE(isDeviceName("gpu:x"));
  EXPECT_EQ(gpuIndex("gpu:3"), 3);
  EXPECT_EQ(gpuIndex("cpu:0"), -1);
}

} // namespace
} // namespace smelt::rt::test
