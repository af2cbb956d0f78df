// The process's allocators and their configuration (DeviceMemory.h), and host memory as a
// MemorySource for cpu:0.
#include "runtime/DeviceMemory.h"

#if SMELT_HAVE_CUDA
#include "runtime/cuda/CudaMemory.h"
#endif

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <numeric>
#include <unistd.h>

namespace smelt::rt {

namespace {

/// cpu:0's regions: aligned host memory. Pages are committed as they are first touched, so a
/// preallocated region costs address space, not RAM, until buffers use it.
class HostMemorySource : public MemorySource {
public:
  Expected<void *> take(uint64_t bytes) override {
    void *region = std::aligned_alloc(Allocator::kAlignment, bytes);
    if (!region)
      return Status::error(fmt::format("the host could not give {}", formatBytes(bytes)));
    return region;
  }
  void give(void *region, uint64_t) override { std::free(region); }
  uint64_t capacity() const override {
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    return pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : ~uint64_t(0) >> 1;
  }
};

struct Registry {
  std::mutex mutex;
  MemoryConfig config;
  std::map<std::string, std::unique_ptr<Allocator>> allocators;
};

Registry &registry() {
  static Registry *instance = new Registry(); // never destroyed: executors may outlive main
  return *instance;
}

Expected<MemoryPolicy> parseGrowth(const std::string &text) {
  MemoryPolicy policy;
  if (text.empty() || text == "grow")
    return policy;
  if (text.rfind("preallocate", 0) == 0) {
    policy.preallocate = true;
    std::string rest = text.substr(11);
    if (rest.empty())
      return policy;
    char *end = nullptr;
    policy.fraction = rest[0] == '=' ? std::strtod(rest.c_str() + 1, &end) : 0;
    if (rest[0] == '=' && end && *end == 0 && policy.fraction > 0 && policy.fraction <= 1)
      return policy;
  }
  return Status::error(fmt::format("--memory={}: write 'grow' or 'preallocate[=FRACTION]' with "
                                   "FRACTION in (0, 1], e.g. preallocate=0.75",
                                   text));
}

std::vector<std::string> splitCommas(const std::string &text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos)
      comma = text.size();
    parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

/// The policy of logical GPU `device` on a physical GPU it shares: the smaller of its own
/// limit and the configured one.
MemoryPolicy splitPolicy(const MemoryConfig &config, const std::string &device,
                         uint64_t logicalLimitBytes) {
  MemoryPolicy policy = config.policyFor(device);
  if (logicalLimitBytes && (!policy.limitBytes || policy.limitBytes > logicalLimitBytes))
    policy.limitBytes = logicalLimitBytes;
  return policy;
}

Expected<std::unique_ptr<Allocator>> makeAllocator(const std::string &device,
                                                   const MemoryConfig &config) {
  if (device == "cpu:0")
    return Allocator::create(device, std::make_unique<HostMemorySource>(),
                             config.policyFor(device));
  if (gpuIndex(device) < 0)
    return Status::error(fmt::format("'{}' is not a device: write cpu:0 or gpu:N", device));
#if SMELT_HAVE_CUDA
  Expected<LogicalGpu> logical = resolveGpu(device);
  if (!logical)
    return Status::error(fmt::format("{} has no memory: {}", device, logical.message()));
  Expected<std::shared_ptr<cuda::CudaDevice>> gpu = cuda::CudaDevice::open(logical->physical);
  if (!gpu)
    return Status::error(fmt::format("{} has no memory: {}", device, gpu.message()));
  if (logical->limitBytes) {
    uint64_t total = std::accumulate(config.logicalGpuLimits.begin(),
                                     config.logicalGpuLimits.end(), uint64_t(0));
    if (total > (*gpu)->totalMemory())
      return Status::error(fmt::format("the logical GPUs' limits add up to {}, more than "
                                       "physical GPU {} ({}) has: {}",
                                       formatBytes(total), logical->physical, (*gpu)->name(),
                                       formatBytes((*gpu)->totalMemory())));
  }
  return Allocator::create(device, std::make_unique<cuda::CudaMemorySource>(*gpu),
                           splitPolicy(config, device, logical->limitBytes));
#else
  return Status::error(fmt::format("{} has no memory: Smelt was built without CUDA", device));
#endif
}

} // namespace

MemoryPolicy MemoryConfig::policyFor(const std::string &device) const {
  auto it = devices.find(device);
  return it == devices.end() ? defaults : it->second;
}

Expected<MemoryConfig> parseMemoryFlags(const std::string &memory, const std::string &limit,
                                        const std::string &logicalGpus) {
  MemoryConfig config;
  SMELT_ASSIGN_OR_RETURN(config.defaults, parseGrowth(memory));
  if (!limit.empty()) {
    for (const std::string &part : splitCommas(limit)) {
      size_t equals = part.find('=');
      std::string device = equals == std::string::npos ? "" : part.substr(0, equals);
      std::string size = equals == std::string::npos ? part : part.substr(equals + 1);
      if (equals != std::string::npos && !isDeviceName(device))
        return Status::error(fmt::format("--memory-limit={}: '{}' is not a device (cpu:0, "
                                         "gpu:N)",
                                         limit, device));
      Expected<uint64_t> bytes = parseBytes(size);
      if (!bytes || *bytes == 0)
        return Status::error(fmt::format("--memory-limit={}: {}", limit,
                                         bytes ? "a limit of 0 bytes leaves no memory"
                                               : bytes.message()));
      if (device.empty())
        config.defaults.limitBytes = *bytes;
      else
        config.devices[device].limitBytes = *bytes;
    }
    for (auto &[device, policy] : config.devices) {
      policy.preallocate = config.defaults.preallocate;
      policy.fraction = config.defaults.fraction;
    }
  }
  if (!logicalGpus.empty()) {
    for (const std::string &part : splitCommas(logicalGpus)) {
      Expected<uint64_t> bytes = parseBytes(part);
      if (!bytes || *bytes == 0)
        return Status::error(fmt::format("--logical-gpus={}: give each logical GPU's memory "
                                         "limit, e.g. 4GiB,4GiB ({})",
                                         logicalGpus,
                                         bytes ? "0 bytes leaves no memory" : bytes.message()));
      config.logicalGpuLimits.push_back(*bytes);
    }
  }
  return config;
}

Status configureMemory(const MemoryConfig &config) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto &[device, allocator] : r.allocators) {
    bool sameLogical = config.logicalGpuLimits == r.config.logicalGpuLimits ||
                       device.rfind("gpu:", 0) != 0;
    if (!(allocator->policy() == config.policyFor(device)) || !sameLogical)
      return Status::error(fmt::format("{}'s memory is already in use under policy '{}'; set "
                                       "memory policies before the first executable runs",
                                       device, allocator->policy().str()));
  }
  r.config = config;
  return Status();
}

const MemoryConfig &memoryConfig() { return registry().config; }

int logicalGpuCount(int physicalGpus) {
  const MemoryConfig &config = memoryConfig();
  if (physicalGpus <= 0)
    return 0;
  return config.logicalGpuLimits.empty() ? physicalGpus
                                         : int(config.logicalGpuLimits.size()) + physicalGpus - 1;
}

Expected<LogicalGpu> resolveGpu(const std::string &device) {
  int index = gpuIndex(device);
  if (index < 0)
    return Status::error(fmt::format("'{}' is not a GPU: write gpu:N", device));
#if SMELT_HAVE_CUDA
  // How many physical GPUs there are decides the logical numbering; opening gpu:0 first tells.
  SMELT_ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaDevice> first, cuda::CudaDevice::open(0));
  int physicalCount = 0;
  SMELT_RETURN_IF_ERROR(
      first->check(first->driver().deviceGetCount(&physicalCount), "cuDeviceGetCount"));
  return logicalGpu(index, physicalCount);
#else
  return Status::error("Smelt was built without CUDA");
#endif
}

Expected<LogicalGpu> logicalGpu(int index, int physicalGpus) {
  const MemoryConfig &config = memoryConfig();
  int count = logicalGpuCount(physicalGpus);
  if (index < 0 || index >= count)
    return Status::error(fmt::format("gpu:{} does not exist: there {} {} GPU{}{}", index,
                                     count == 1 ? "is" : "are", count, count == 1 ? "" : "s",
                                     config.logicalGpuLimits.empty()
                                         ? ""
                                         : fmt::format(" ({} logical on physical GPU 0)",
                                                       config.logicalGpuLimits.size())));
  int split = int(config.logicalGpuLimits.size());
  if (split == 0)
    return LogicalGpu{index, 0};
  if (index < split)
    return LogicalGpu{0, config.logicalGpuLimits[index]};
  return LogicalGpu{index - split + 1, 0};
}

std::vector<LogicalDevice> logicalDevices(const std::vector<DeviceInfo> &physical) {
  const MemoryConfig &config = memoryConfig();
  std::vector<LogicalDevice> devices;
  std::vector<const DeviceInfo *> gpus;
  for (const DeviceInfo &device : physical) {
    if (gpuIndex(device.name) >= 0)
      gpus.push_back(&device);
    else
      devices.push_back({device, device.name, config.policyFor(device.name)});
  }
  for (int index = 0, count = logicalGpuCount(int(gpus.size())); index < count; ++index) {
    Expected<LogicalGpu> logical = logicalGpu(index, int(gpus.size()));
    LogicalDevice device{*gpus.at(logical->physical), gpus[logical->physical]->name, {}};
    device.info.name = fmt::format("gpu:{}", index);
    device.policy = splitPolicy(config, device.info.name, logical->limitBytes);
    devices.push_back(device);
  }
  return devices;
}

std::string logicalDeviceTable(const std::vector<LogicalDevice> &devices) {
  std::string table;
  for (const LogicalDevice &device : devices)
    table += gpuIndex(device.info.name) < 0
                 ? fmt::format("{}  {}, memory: {}\n", device.info.name,
                               device.info.description, device.policy.str())
                 : fmt::format("{}  on {} ({}), memory: {}\n", device.info.name,
                               device.physical, device.info.description, device.policy.str());
  return table;
}

Expected<Allocator *> deviceAllocator(const std::string &device) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (auto it = r.allocators.find(device); it != r.allocators.end())
    return it->second.get();
  SMELT_ASSIGN_OR_RETURN(std::unique_ptr<Allocator> made, makeAllocator(device, r.config));
  return r.allocators.emplace(device, std::move(made)).first->second.get();
}

std::string memoryReport() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string report;
  for (const auto &[device, allocator] : r.allocators)
    report += fmt::format("{} ({}): {}\n", device,
                          allocator->policy().growth(),
                          allocator->stats().str());
  return report;
}

} // namespace smelt::rt
