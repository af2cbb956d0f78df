// Device discovery: cpu:0 always, and each GPU the CUDA driver reports (opened with dlopen, so
// this works and explains itself on machines without one), with the versions of the CUDA
// libraries Smelt uses and a warning when they do not fit together. `smelt devices` prints it;
// the tools pass the device list and the reason there is no GPU to smelt-place-devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::rt {

struct DeviceInfo {
  std::string name;        // "cpu:0", "gpu:0"
  std::string description; // "NVIDIA H100 80GB HBM3", "x86_64, 16 cores"
  int computeMajor = 0, computeMinor = 0; // GPUs
  int multiprocessors = 0;                // GPUs: SMs; the CPU: hardware threads
  uint64_t memoryBytes = 0;
};

/// A library's version as it reports it ("13.0.2"), or why it could not be asked.
struct LibraryInfo {
  std::string name;    // "cuBLASLt"
  std::string file;    // the file loaded (its soname when it was not found)
  std::string version; // empty when not loaded
  std::string problem; // why not
};

struct DeviceReport {
  std::vector<DeviceInfo> devices; // cpu:0 first
  /// Empty when there is a GPU; else why not ("no CUDA driver: dlopen(...) failed: ...").
  std::string noGpuReason;
  int driverCudaVersion = 0; // 13000 for CUDA 13.0; 0 without a driver
  std::vector<LibraryInfo> libraries;
  /// Version mismatches that will bite ("the driver supports CUDA 12.4, NVRTC is 13.0: ...").
  std::vector<std::string> warnings;

  bool hasGpu() const { return devices.size() > 1; }
  /// The listing `smelt devices` prints.
  std::string str() const;
};

/// Looks once per call. The devices alone take one dlopen (the driver); `libraryVersions`
/// also loads NVRTC, cuBLASLt, cuDNN and NCCL to ask their versions and check them against
/// the driver (most of a second), which `smelt devices` wants and placement does not.
DeviceReport discoverDevices(bool libraryVersions = true);

/// Why a CUDA driver supporting `driverVersion` (13000 for 13.0) cannot run kernels built with
/// the CUDA `toolkitVersion` toolkit, naming both, or "" when it can. CUDA's minor version
/// compatibility lets a 13.x build run on any 13.y driver; an older major version cannot load
/// the toolkit's CUBIN or PTX.
std::string cudaDriverTooOld(int driverVersion, int toolkitVersion);

/// The arch the fused kernels are compiled for on a machine with these GPUs: the lowest compute
/// capability among them ("sm_80" beside "sm_90"), so one build runs on all of them: the GPUs
/// of that arch load its CUBIN, the newer ones JIT its PTX (GpuExecutor's loadModule), as
/// PTX runs on its arch and every later one. "" without a GPU.
std::string lowestGpuArch(const std::vector<DeviceInfo> &devices);

/// Whether `name` names a device: "cpu:<N>" or "gpu:<N>".
bool isDeviceName(const std::string &name);
/// N in "gpu:N", or -1 for anything else.
int gpuIndex(const std::string &device);

} // namespace smelt::rt
