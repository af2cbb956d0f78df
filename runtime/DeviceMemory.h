// The process's allocators, one per device, made on first use with the configured policies:
// what TensorFlow's memory growth, per-process fraction, memory limits and logical (virtual)
// GPUs set, and what XLA_PYTHON_CLIENT_PREALLOCATE / _MEM_FRACTION set for JAX. The tools'
// flags (--memory, --memory-limit, --logical-gpus) and the C++ API both come here.
#pragma once

#include "runtime/Allocator.h"
#include "runtime/Devices.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace smelt::rt {

struct MemoryConfig {
  /// Every device's policy unless `devices` names it.
  MemoryPolicy defaults;
  std::map<std::string, MemoryPolicy> devices; // "cpu:0", "gpu:1"
  /// Logical GPUs that split physical GPU 0, each with its memory limit (TensorFlow's
  /// LogicalDeviceConfiguration(memory_limit)): gpu:0 .. gpu:K-1 share it, and the other
  /// physical GPUs follow as gpu:K, gpu:K+1 ... Empty: one logical GPU per physical one.
  std::vector<uint64_t> logicalGpuLimits;

  MemoryPolicy policyFor(const std::string &device) const;
};

/// The tools' flags, each optional (empty: the default):
///   --memory=grow | preallocate[=FRACTION]     (FRACTION in (0, 1], default 0.9)
///   --memory-limit=SIZE | DEVICE=SIZE[,DEVICE=SIZE...]   (SIZE: 512MiB, 2GiB ...)
///   --logical-gpus=SIZE,SIZE[,...]             (split gpu:0; one limit per logical GPU)
/// Errors quote the flag and the part that is wrong.
Expected<MemoryConfig> parseMemoryFlags(const std::string &memory, const std::string &limit,
                                        const std::string &logicalGpus);

/// Sets the policies of the allocators this process has not made yet; an allocator already
/// made under another policy is an error naming it (policies are fixed at first use, as in
/// TensorFlow).
Status configureMemory(const MemoryConfig &config);
const MemoryConfig &memoryConfig();

/// A logical GPU: the physical ordinal it runs on and its own limit (0: the policy's).
struct LogicalGpu {
  int physical = 0;
  uint64_t limitBytes = 0;
};
/// Logical GPU `index` under the configuration, given `physicalGpus` physical ones; the error
/// says how many logical GPUs there are.
Expected<LogicalGpu> logicalGpu(int index, int physicalGpus);
/// How many logical GPUs `physicalGpus` physical ones make under the configuration.
int logicalGpuCount(int physicalGpus);
/// Logical GPU `device` ("gpu:N") on this machine, whose physical GPUs the CUDA driver counts;
/// the error says why there is none (not a GPU's name, no driver, no such logical GPU).
Expected<LogicalGpu> resolveGpu(const std::string &device);

/// A device as programs see it under the configuration: cpu:0 or a logical GPU.
struct LogicalDevice {
  /// The logical name ("gpu:1"); the rest is the physical device's description.
  DeviceInfo info;
  /// The physical device it runs on ("gpu:0").
  std::string physical;
  /// The policy its allocator is made with: a split GPU's own limit when that is the smaller.
  MemoryPolicy policy;
};
/// The devices programs see (TensorFlow's list_logical_devices): cpu:0, then the logical GPUs
/// that `physical` (discoverDevices' list) makes, numbered as logicalGpu numbers them. What
/// placement may place ops on.
std::vector<LogicalDevice> logicalDevices(const std::vector<DeviceInfo> &physical);
/// One line per logical device: "gpu:1  on gpu:0 (NVIDIA H100 ...), memory: grow, limit 4 GiB"
/// (a GPU says which physical GPU it is on).
std::string logicalDeviceTable(const std::vector<LogicalDevice> &devices);

/// The allocator of `device` ("cpu:0", "gpu:N"), made on first use: host memory for cpu:0,
/// the GPU's memory (CUDA driver) for gpu:N. The error says why the device has none (no such
/// device, no GPU, a preallocation that does not fit, logical limits past the GPU's memory).
Expected<Allocator *> deviceAllocator(const std::string &device);

/// One line per allocator made so far: "cpu:0 (grow): peak 3.1 MiB, in use ...".
std::string memoryReport();

} // namespace smelt::rt
