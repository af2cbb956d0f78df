// The emulated CUDA driver's entry points: the subset of the driver API the runtime resolves
// (runtime/cuda/CudaDriver.h) and the few calls its tests and the emulated libraries add, each
// written from the driver API reference: devices that report what an H100 reports, one primary
// context each, memory (Memory.cpp), streams and events (Scheduler.cpp), modules and launches
// (Modules.cpp), and copies with the synchronization the reference documents for each kind
// ("API synchronization behavior"): a copy from pageable memory is staged at the call, one from
// pinned memory reads its source when it runs.
#include "Core.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace smelt::emucuda {
namespace {

std::atomic<bool> initialized{false};
thread_local Context *current = nullptr;

struct Counters {
  std::atomic<uint64_t> toDevice{0}, toDeviceCopies{0}, toHost{0}, toHostCopies{0};
  std::atomic<uint64_t> launches{0}, hostWaits{0}, graphLaunches{0}, layoutCopies{0};
  ~Counters() {
    if (const char *print = std::getenv("SMELT_EMUCUDA_TRAFFIC"); print && *print)
      std::fprintf(stderr,
                   "emulated CUDA traffic: %llu bytes to the device in %llu copies, %llu bytes to "
                   "the host in %llu copies, %llu kernel launches, %llu host waits, %llu graph "
                   "launches, %llu cuDNN layout copies\n",
                   (unsigned long long)toDevice, (unsigned long long)toDeviceCopies,
                   (unsigned long long)toHost, (unsigned long long)toHostCopies,
                   (unsigned long long)launches, (unsigned long long)hostWaits,
                   (unsigned long long)graphLaunches, (unsigned long long)layoutCopies);
  }
};
Counters counters;

bool validDevice(CUdevice device) { return device >= 0 && device < deviceCount(); }

/// The current context's device, or -1.
int here() { return current ? current->device : -1; }

/// The host copy of `bytes` pageable bytes, taken now: the contract lets the call return once
/// its source is staged, with the transfer to the device still to come.
std::shared_ptr<std::vector<char>> staged(const void *source, size_t bytes) {
  auto copy = std::make_shared<std::vector<char>>(bytes);
  std::memcpy(copy->data(), source, bytes);
  return copy;
}

CUresult checkDevice(CUdeviceptr pointer, size_t bytes, const char *call) {
  std::string why = checkRange(reinterpret_cast<const void *>(uintptr_t(pointer)), bytes);
  if (why.empty() && isDeviceAddress(reinterpret_cast<const void *>(uintptr_t(pointer))))
    return CUDA_SUCCESS;
  diagnose(std::string(call) + ": the device range of " + std::to_string(bytes) +
           " bytes is not usable: " + (why.empty() ? "it is pinned host memory" : why));
  return CUDA_ERROR_INVALID_VALUE;
}

/// Host to device: staged now from pageable memory, read when it runs from pinned memory.
CUresult hostToDevice(CUdeviceptr destination, const void *source, size_t bytes, CUstream stream,
                      bool waitForIt, const char *call) {
  if (!current)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0)
    return CUDA_SUCCESS;
  if (!source)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(destination, bytes, call))
    return r;
  counters.toDevice += bytes;
  ++counters.toDeviceCopies;
  if (waitForIt)
    ++counters.hostWaits;
  std::string what = std::string(call) + " of " + std::to_string(bytes) + " bytes";
  if (isPinned(source, bytes)) {
    auto run = [=]() {
      std::memcpy(hostView(destination, bytes, what), hostView(source, bytes, what), bytes);
    };
    return waitForIt ? enqueueWaiting(stream, what, run) : enqueue(stream, what, run);
  }
  // Captured, the copy staged now would replay these bytes, not the memory's at the launch.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!isLegacy(stream) && captureStatus(stream, &capture) == CUDA_SUCCESS &&
      capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (waitForIt) // "a stream sync is performed before the copy is initiated"
    if (CUresult r = synchronizeStream(stream))
      return r;
  auto copy = staged(source, bytes);
  return enqueue(stream, what, [=]() {
    std::memcpy(hostView(destination, bytes, what), copy->data(), bytes);
  });
}

/// Device to host: into pinned memory when it runs; into pageable memory before returning.
CUresult deviceToHost(void *destination, CUdeviceptr source, size_t bytes, CUstream stream,
                      bool waitForIt, const char *call) {
  if (!current)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0)
    return CUDA_SUCCESS;
  if (!destination)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkDevice(source, bytes, call))
    return r;
  std::string what = std::string(call) + " of " + std::to_string(bytes) + " bytes";
  bool pinned = isPinned(destination, bytes);
  counters.toHost += bytes;
  ++counters.toHostCopies;
  if (waitForIt || !pinned)
    ++counters.hostWaits;
  auto run = [=]() {
    void *target = pinned ? hostView(destination, bytes, what) : destination;
    std::memcpy(target, hostView(source, bytes, what), bytes);
  };
  return waitForIt || !pinned ? enqueueWaiting(stream, what, run) : enqueue(stream, what, run);
}

CUresult deviceToDevice(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                        CUstream stream, const char *call) {
  if (!current)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0)
    return CUDA_SUCCESS;
  if (CUresult r = checkDevice(destination, bytes, call))
    return r;
  if (CUresult r = checkDevice(source, bytes, call))
    return r;
  std::string what = std::string(call) + " of " + std::to_string(bytes) + " bytes";
  return enqueue(stream, what, [=]() {
    std::memmove(hostView(destination, bytes, what), hostView(source, bytes, what), bytes);
  });
}

} // namespace

Context *primaryContext(int device) {
  static Context contexts[kMaxDevices] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7},
                                          {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};
  return &contexts[device];
}
Context *currentContext() { return current; }
void setCurrentContext(Context *context) { current = context; }

int currentDevice() { return here(); }

Traffic traffic() {
  return {counters.toDevice,      counters.toDeviceCopies, counters.toHost,
          counters.toHostCopies,  counters.launches,       counters.hostWaits,
          counters.graphLaunches, counters.layoutCopies};
}

void resetTraffic() {
  for (std::atomic<uint64_t> *c :
       {&counters.toDevice, &counters.toDeviceCopies, &counters.toHost, &counters.toHostCopies,
        &counters.launches, &counters.hostWaits, &counters.graphLaunches, &counters.layoutCopies})
    *c = 0;
}

void countLayoutCopy() { ++counters.layoutCopies; }

int deviceCount() {
  static const int count = [] {
    const char *text = std::getenv("SMELT_EMUCUDA_DEVICES");
    int n = text ? std::atoi(text) : 8;
    return std::clamp(n, 0, kMaxDevices);
  }();
  return count;
}

const char *deviceName() { return "NVIDIA H100 80GB HBM3 (emulated)"; }

bool deviceAttribute(CUdevice_attribute attribute, int *value) {
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; return true;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; return true;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *value = 1024; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *value = 65535; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 49152; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = 233472; return true;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *value = 65536; return true;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = 65536; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = 65536; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; return true;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *value = 32; return true;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1980000; return true;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *value = 2619000; return true;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *value = 5120; return true;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 52428800; return true;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *value = 3; return true;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; return true;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *value = 1; return true;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *value = 1; return true;
  case CU_DEVICE_ATTRIBUTE_INTEGRATED: *value = 0; return true;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: *value = 1; return true;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *value = CU_COMPUTEMODE_DEFAULT; return true;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *value = 1; return true;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *value = 1; return true;
  default: return false;
  }
}

} // namespace smelt::emucuda

using namespace smelt::emucuda;

// ---- Initialization, errors and devices ---------------------------------------------------------

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  initialized = true;
  return CUDA_SUCCESS;
}

// The driver's private tables, which NVRTC asks for when a libcuda.so.1 is loaded in the process
// (it dlopens the soname, so it finds this one): an emulated driver has none to give.
CUresult cuGetExportTable(const void **table, const CUuuid *id) {
  if (table)
    *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define EMUCUDA_NAME(code)                                                                         \
  case code: *name = #code; return CUDA_SUCCESS;
    EMUCUDA_NAME(CUDA_SUCCESS)
    EMUCUDA_NAME(CUDA_ERROR_INVALID_VALUE)
    EMUCUDA_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    EMUCUDA_NAME(CUDA_ERROR_NOT_INITIALIZED)
    EMUCUDA_NAME(CUDA_ERROR_NO_DEVICE)
    EMUCUDA_NAME(CUDA_ERROR_INVALID_DEVICE)
    EMUCUDA_NAME(CUDA_ERROR_INVALID_IMAGE)
    EMUCUDA_NAME(CUDA_ERROR_INVALID_CONTEXT)
    EMUCUDA_NAME(CUDA_ERROR_INVALID_HANDLE)
    EMUCUDA_NAME(CUDA_ERROR_NOT_FOUND)
    EMUCUDA_NAME(CUDA_ERROR_NOT_READY)
    EMUCUDA_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    EMUCUDA_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    EMUCUDA_NAME(CUDA_ERROR_LAUNCH_FAILED)
    EMUCUDA_NAME(CUDA_ERROR_NOT_SUPPORTED)
    EMUCUDA_NAME(CUDA_ERROR_UNKNOWN)
#undef EMUCUDA_NAME
  default:
    *name = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char **text) {
  if (!text)
    return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
  case CUDA_SUCCESS: *text = "no error"; break;
  case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
  case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
  case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
  case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
  case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
  case CUDA_ERROR_INVALID_IMAGE: *text = "device kernel image is invalid"; break;
  case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context"; break;
  case CUDA_ERROR_INVALID_HANDLE: *text = "invalid resource handle"; break;
  case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
  case CUDA_ERROR_NOT_READY: *text = "device not ready"; break;
  case CUDA_ERROR_ILLEGAL_ADDRESS: *text = "an illegal memory access was encountered"; break;
  case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: *text = "too many resources requested for launch"; break;
  case CUDA_ERROR_LAUNCH_FAILED: *text = "unspecified launch failure"; break;
  case CUDA_ERROR_NOT_SUPPORTED: *text = "operation not supported"; break;
  case CUDA_ERROR_UNKNOWN: *text = "unknown error"; break;
  default: *text = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = deviceCount();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(ordinal))
    return deviceCount() == 0 ? CUDA_ERROR_NO_DEVICE : CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice device) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(device))
    return CUDA_ERROR_INVALID_DEVICE;
  if (!deviceAttribute(attribute, value)) {
    diagnose("cuDeviceGetAttribute: attribute " + std::to_string(int(attribute)) +
             " is not emulated");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!name || length <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(device))
    return CUDA_ERROR_INVALID_DEVICE;
  std::strncpy(name, deviceName(), size_t(length) - 1);
  name[length - 1] = '\0';
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice device) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(device))
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kDeviceMemory;
  return CUDA_SUCCESS;
}

// ---- Contexts ------------------------------------------------------------------------------------

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(device))
    return CUDA_ERROR_INVALID_DEVICE;
  Context *primary = primaryContext(device);
  ++primary->retained;
  *context = reinterpret_cast<CUcontext>(primary);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  if (!validDevice(device))
    return CUDA_ERROR_INVALID_DEVICE;
  Context *primary = primaryContext(device);
  if (primary->retained <= 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  --primary->retained;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (!initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  auto *wanted = reinterpret_cast<Context *>(context);
  if (wanted && (wanted < primaryContext(0) || wanted >= primaryContext(0) + deviceCount()))
    return CUDA_ERROR_INVALID_CONTEXT;
  setCurrentContext(wanted);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *context) {
  if (!context)
    return CUDA_ERROR_INVALID_VALUE;
  *context = reinterpret_cast<CUcontext>(currentContext());
  return CUDA_SUCCESS;
}

// The current context is the top of a per-thread stack: push and pop move it.
thread_local std::vector<Context *> pushed;

CUresult cuCtxPushCurrent(CUcontext context) {
  if (!context)
    return CUDA_ERROR_INVALID_CONTEXT;
  pushed.push_back(currentContext());
  if (CUresult r = cuCtxSetCurrent(context)) {
    pushed.pop_back();
    return r;
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *context) {
  if (!currentContext() || pushed.empty())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (context)
    *context = reinterpret_cast<CUcontext>(currentContext());
  setCurrentContext(pushed.back());
  pushed.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  *device = currentDevice();
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  ++counters.hostWaits;
  return synchronizeDevice(currentDevice());
}

// ---- Memory --------------------------------------------------------------------------------------

CUresult cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!pointer)
    return CUDA_ERROR_INVALID_VALUE;
  return allocateDevice(currentDevice(), bytes, pointer);
}

// cuMemFree "may perform implicit synchronization", and the Programming Guide says cudaFree
// "causes the GPU to synchronize across all executing CUDA streams": the device's queued work
// finishes first. (Work queued later with the stale pointer faults when it runs.)
CUresult cuMemFree(CUdeviceptr pointer) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!pointer)
    return CUDA_SUCCESS;
  if (int device = deviceOf(reinterpret_cast<const void *>(uintptr_t(pointer))); device >= 0)
    synchronizeDevice(device);
  return freeDevice(pointer);
}

CUresult cuMemGetInfo(size_t *free, size_t *total) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!free || !total)
    return CUDA_ERROR_INVALID_VALUE;
  *total = kDeviceMemory;
  *free = kDeviceMemory - deviceBytesInUse(currentDevice());
  return CUDA_SUCCESS;
}

CUresult cuMemAllocHost(void **pointer, size_t bytes) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!pointer || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  return allocatePinned(bytes, pointer);
}

// Unlike cuMemFree, nothing documents a synchronization here: a copy still queued from the
// memory faults when it runs (the caller had to wait for it).
CUresult cuMemFreeHost(void *pointer) { return freePinned(pointer); }

CUresult cuMemcpyHtoDAsync(CUdeviceptr destination, const void *source, size_t bytes,
                           CUstream stream) {
  return hostToDevice(destination, source, bytes, stream, false, "cuMemcpyHtoDAsync");
}
CUresult cuMemcpyDtoHAsync(void *destination, CUdeviceptr source, size_t bytes, CUstream stream) {
  return deviceToHost(destination, source, bytes, stream, false, "cuMemcpyDtoHAsync");
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                           CUstream stream) {
  return deviceToDevice(destination, source, bytes, stream, "cuMemcpyDtoDAsync");
}
CUresult cuMemcpyHtoD(CUdeviceptr destination, const void *source, size_t bytes) {
  return hostToDevice(destination, source, bytes, CU_STREAM_LEGACY, true, "cuMemcpyHtoD");
}
CUresult cuMemcpyDtoH(void *destination, CUdeviceptr source, size_t bytes) {
  return deviceToHost(destination, source, bytes, CU_STREAM_LEGACY, true, "cuMemcpyDtoH");
}
CUresult cuMemcpyDtoD(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  return deviceToDevice(destination, source, bytes, CU_STREAM_LEGACY, "cuMemcpyDtoD");
}

CUresult cuMemsetD8Async(CUdeviceptr destination, unsigned char value, size_t count,
                         CUstream stream) {
  if (!currentContext())
    return CUDA_ERROR_INVALID_CONTEXT;
  if (count == 0)
    return CUDA_SUCCESS;
  if (CUresult r = checkDevice(destination, count, "cuMemsetD8Async"))
    return r;
  std::string what = "cuMemsetD8Async of " + std::to_string(count) + " bytes";
  return enqueue(stream, what, [=]() {
    std::memset(hostView(destination, count, what), value, count);
  });
}

// ---- Modules and launches ------------------------------------------------------------------------

CUresult cuModuleLoadData(CUmodule *module, const void *image) { return loadModule(module, image); }
CUresult cuModuleUnload(CUmodule module) { return unloadModule(module); }
CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
  return moduleFunction(function, module, name);
}
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra) {
  CUresult r = launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                      sharedMemBytes, hStream, kernelParams, extra);
  // Captured, the kernel is recorded: it runs as a node of each graph launch.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (r == CUDA_SUCCESS && !isLegacy(hStream))
    captureStatus(hStream, &capture);
  if (r == CUDA_SUCCESS && capture == CU_STREAM_CAPTURE_STATUS_NONE)
    ++counters.launches;
  return r;
}

// ---- Streams and events --------------------------------------------------------------------------

CUresult cuStreamCreate(CUstream *stream, unsigned int flags) { return createStream(flags, stream); }
CUresult cuStreamDestroy(CUstream stream) { return destroyStream(stream); }
CUresult cuStreamQuery(CUstream stream) { return queryStream(stream); }
CUresult cuStreamSynchronize(CUstream stream) {
  ++counters.hostWaits;
  return synchronizeStream(stream);
}
CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  return flags ? CUDA_ERROR_INVALID_VALUE : waitEvent(stream, event);
}
CUresult cuEventCreate(CUevent *event, unsigned int flags) { return createEvent(flags, event); }
CUresult cuEventDestroy(CUevent event) { return destroyEvent(event); }
CUresult cuEventRecord(CUevent event, CUstream stream) { return recordEvent(event, stream); }
CUresult cuEventQuery(CUevent event) { return queryEvent(event); }
CUresult cuEventSynchronize(CUevent event) {
  ++counters.hostWaits;
  return synchronizeEvent(event);
}

// ---- Stream capture and graphs (Scheduler.cpp, Graphs.cpp)
// ---------------------------------------

CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  return beginCapture(stream, mode);
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) { return endCapture(stream, graph); }
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status) {
  return captureStatus(stream, status);
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  return instantiateGraph(exec, graph, flags);
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  CUresult r = launchGraph(exec, stream);
  if (r == CUDA_SUCCESS)
    ++counters.graphLaunches;
  return r;
}
CUresult cuGraphExecDestroy(CUgraphExec exec) { return destroyGraphExec(exec); }
CUresult cuGraphDestroy(CUgraph graph) { return destroyGraph(graph); }

} // extern "C"
