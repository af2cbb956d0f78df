// Device discovery through the dlopen'ed CUDA driver, and the versions of the CUDA libraries
// (each dlopen'ed and asked for its version, never linked).
#include "runtime/Devices.h"

#if SMELT_HAVE_CUDA
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/DynamicLibrary.h"
#endif

#include <fmt/format.h>

#include <dlfcn.h>
#include <thread>
#include <unistd.h>

namespace smelt::rt {

namespace {

std::string cudaVersionText(int version) {
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

/// dlopens `file` and calls `ask` with the handle; the library stays loaded (it is a process
/// that will use it anyway), which also keeps version strings valid. The libraries are
/// searched for as the runtime and the CUDA back end search (cuda::cudaLibraryCandidates), and
/// the listing names the file found.
template <typename Ask> LibraryInfo probe(const char *name, const char *file, Ask ask) {
  LibraryInfo info{name, file, "", ""};
  void *handle = nullptr;
#if SMELT_HAVE_CUDA
  Expected<void *> opened = cuda::openCudaLibrary(name, file);
  if (!opened) {
    info.problem = opened.message();
    return info;
  }
  handle = *opened;
  if (std::string path = cuda::loadedLibraryPath(handle); !path.empty())
    info.file = path;
#endif
  if (!handle && !(handle = dlopen(file, RTLD_NOW | RTLD_LOCAL))) {
    const char *why = dlerror();
    info.problem = why ? why : "cannot be loaded";
    return info;
  }
  info.version = ask(handle);
  if (info.version.empty())
    info.problem = "loaded, but its version function is missing";
  return info;
}

template <typename Fn> Fn symbol(void *handle, const char *name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

std::vector<LibraryInfo> probeLibraries() {
  std::vector<LibraryInfo> libraries;
  libraries.push_back(probe("NVRTC", "libnvrtc.so.13", [](void *h) -> std::string {
    auto version = symbol<int (*)(int *, int *)>(h, "nvrtcVersion");
    int major = 0, minor = 0;
    return version && version(&major, &minor) == 0 ? fmt::format("{}.{}", major, minor) : "";
  }));
  // cuBLASLt, cuDNN (since 9) and NCCL number versions as major * 10000 + minor * 100 + patch.
  auto numbered = [](size_t v) {
    return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
  };
  libraries.push_back(probe("cuBLASLt", "libcublasLt.so.13", [&](void *h) -> std::string {
    auto version = symbol<size_t (*)()>(h, "cublasLtGetVersion");
    return version ? numbered(version()) : "";
  }));
  libraries.push_back(probe("cuDNN", "libcudnn.so.9", [&](void *h) -> std::string {
    auto version = symbol<size_t (*)()>(h, "cudnnGetVersion");
    return version ? numbered(version()) : "";
  }));
  libraries.push_back(probe("NCCL", "libnccl.so.2", [&](void *h) -> std::string {
    auto version = symbol<int (*)(int *)>(h, "ncclGetVersion");
    int v = 0;
    return version && version(&v) == 0 ? numbered(size_t(v)) : "";
  }));
  return libraries;
}

DeviceInfo hostDevice() {
  DeviceInfo cpu;
  cpu.name = "cpu:0";
  cpu.multiprocessors = int(std::thread::hardware_concurrency());
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  cpu.memoryBytes = pages > 0 && pageSize > 0 ? uint64_t(pages) * uint64_t(pageSize) : 0;
  cpu.description = fmt::format("host, {} hardware threads", cpu.multiprocessors);
  return cpu;
}

#if SMELT_HAVE_CUDA
void discoverGpus(DeviceReport &report) {
  Expected<const cuda::CudaDriver *> opened = cuda::CudaDriver::get();
  if (!opened) {
    report.noGpuReason = opened.message();
    return;
  }
  const cuda::CudaDriver &driver = **opened;
  driver.driverGetVersion(&report.driverCudaVersion);
  // Said up front, as the reason there is no GPU: loading the kernels would fail later with a
  // code that names neither version.
  if (std::string old = cudaDriverTooOld(report.driverCudaVersion, CUDA_VERSION); !old.empty()) {
    report.noGpuReason = old;
    return;
  }
  int count = 0;
  if (Status s = driver.check(driver.deviceGetCount(&count), "cuDeviceGetCount"); !s.ok()) {
    report.noGpuReason = s.message();
    return;
  }
  if (count == 0) {
    report.noGpuReason = "the CUDA driver sees no device";
    return;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice device;
    if (!driver.check(driver.deviceGet(&device, i), "cuDeviceGet").ok())
      continue;
    DeviceInfo gpu;
    gpu.name = fmt::format("gpu:{}", i);
    char name[256] = {};
    driver.deviceGetName(name, sizeof name - 1, device);
    gpu.description = name;
    driver.deviceGetAttribute(&gpu.computeMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                              device);
    driver.deviceGetAttribute(&gpu.computeMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                              device);
    driver.deviceGetAttribute(&gpu.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                              device);
    size_t bytes = 0;
    driver.deviceTotalMem(&bytes, device);
    gpu.memoryBytes = bytes;
    report.devices.push_back(gpu);
  }
}
#endif

} // namespace

std::string DeviceReport::str() const {
  std::string out;
  for (const DeviceInfo &d : devices) {
    if (d.name.rfind("gpu:", 0) == 0)
      out += fmt::format("{}  {}, compute capability {}.{}, {} SMs, {:.1f} GiB\n", d.name,
                         d.description, d.computeMajor, d.computeMinor, d.multiprocessors,
                         double(d.memoryBytes) / (1 << 30));
    else
      out += fmt::format("{}  {}, {:.1f} GiB\n", d.name, d.description,
                         double(d.memoryBytes) / (1 << 30));
  }
  if (!noGpuReason.empty())
    out += fmt::format("no GPU: {}\n", noGpuReason);
  out += driverCudaVersion ? fmt::format("CUDA driver: supports CUDA {}\n",
                                         cudaVersionText(driverCudaVersion))
                           : "CUDA driver: none\n";
  for (const LibraryInfo &lib : libraries)
    out += lib.version.empty() ? fmt::format("{}: not available ({})\n", lib.name, lib.problem)
                               : fmt::format("{}: {} ({})\n", lib.name, lib.version, lib.file);
  for (const std::string &w : warnings)
    out += fmt::format("warning: {}\n", w);
  return out;
}

DeviceReport discoverDevices(bool libraryVersions) {
  DeviceReport report;
  report.devices.push_back(hostDevice());
#if SMELT_HAVE_CUDA
  discoverGpus(report);
#else
  report.noGpuReason = "Smelt was built without the CUDA toolkit";
#endif
  if (!libraryVersions)
    return report;
  report.libraries = probeLibraries();
  // Kernels are compiled by NVRTC for its CUDA version; a driver older than that cannot load
  // the PTX it writes (CUBIN of an older architecture still loads).
  for (const LibraryInfo &lib : report.libraries) {
    if (lib.name != "NVRTC" || lib.version.empty() || !report.driverCudaVersion)
      continue;
    int major = std::stoi(lib.version), minor = std::stoi(lib.version.substr(lib.version.find('.') + 1));
    if (report.driverCudaVersion < major * 1000 + minor * 10)
      report.warnings.push_back(fmt::format(
          "the driver supports CUDA {} but NVRTC is {}: update the driver to {} or newer, or "
          "the GPU cannot load the kernels' PTX",
          cudaVersionText(report.driverCudaVersion), lib.version, lib.version));
  }
  if (report.hasGpu())
    for (const LibraryInfo &lib : report.libraries)
      if (lib.version.empty() && lib.name != "NCCL")
        report.warnings.push_back(fmt::format("{} is missing ({}): GPU {} will not work",
                                              lib.name, lib.problem,
                                              lib.name == "NVRTC" ? "kernels" : "library calls"));
  return report;
}

std::string cudaDriverTooOld(int driverVersion, int toolkitVersion) {
  if (driverVersion / 1000 >= toolkitVersion / 1000)
    return "";
  return fmt::format("the CUDA driver supports CUDA {}, but this Smelt's kernels are built with "
                     "the CUDA {} toolkit and need a driver for CUDA {}.0 or newer: update the "
                     "NVIDIA driver",
                     cudaVersionText(driverVersion), cudaVersionText(toolkitVersion),
                     toolkitVersion / 1000);
}

std::string lowestGpuArch(const std::vector<DeviceInfo> &devices) {
  const DeviceInfo *lowest = nullptr;
  for (const DeviceInfo &device : devices)
    if (gpuIndex(device.name) >= 0 &&
        (!lowest || std::pair(device.computeMajor, device.computeMinor) <
                        std::pair(lowest->computeMajor, lowest->computeMinor)))
      lowest = &device;
  return lowest ? "sm_" + std::to_string(lowest->computeMajor) +
                      std::to_string(lowest->computeMinor)
                : "";
}

bool isDeviceName(const std::string &name) {
  for (const char *prefix : {"cpu:", "gpu:"})
    if (name.rfind(prefix, 0) == 0 && name.size() > 4 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos)
      return true;
  return false;
}

int gpuIndex(const std::string &device) {
  if (device.rfind("gpu:", 0) != 0 || !isDeviceName(device))
    return -1;
  return std::atoi(device.c_str() + 4);
}

} // namespace smelt::rt
