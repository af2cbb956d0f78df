// The CUDA driver API, reached through dlopen("libcuda.so.1") and a table of symbols, every call
// checked. Binaries are never linked to libcuda, so they start on machines without a driver;
// there, and without a device, opening the driver is an error to report (or a test's reason to
// skip), never a crash. cuda.h is included for types and signatures only.
#pragma once

#include "runtime/Status.h"

#include <cuda.h>

namespace smelt::rt::cuda {

// symbol in libcuda (the versioned name cuda.h maps the plain one to), member in the table.
// Streams and events serve the executor and the collectives (runtime/cuda/Nccl.h): a wait
// blocks on an event. Pinned host memory stages the executor's host-device copies. Stream capture
// and graphs replay a run's launches (runtime/cuda/GpuGraphs.cpp).
#define SMELT_CUDA_DRIVER_ENTRIES(X)                                                               \
  X(cuInit, init)                                                                                  \
  X(cuDriverGetVersion, driverGetVersion)                                                          \
  X(cuGetErrorName, getErrorName)                                                                  \
  X(cuGetErrorString, getErrorString)                                                              \
  X(cuDeviceGetCount, deviceGetCount)                                                              \
  X(cuDeviceGet, deviceGet)                                                                        \
  X(cuDeviceGetAttribute, deviceGetAttribute)                                                      \
  X(cuDeviceGetName, deviceGetName)                                                                \
  X(cuDeviceTotalMem_v2, deviceTotalMem)                                                           \
  X(cuDevicePrimaryCtxRetain, primaryCtxRetain)                                                    \
  X(cuDevicePrimaryCtxRelease_v2, primaryCtxRelease)                                               \
  X(cuCtxSetCurrent, ctxSetCurrent)                                                                \
  X(cuCtxSynchronize, ctxSynchronize)                                                              \
  X(cuModuleLoadData, moduleLoadData)                                                              \
  X(cuModuleUnload, moduleUnload)                                                                  \
  X(cuModuleGetFunction, moduleGetFunction)                                                        \
  X(cuMemAlloc_v2, memAlloc)                                                                       \
  X(cuMemFree_v2, memFree)                                                                         \
  X(cuMemGetInfo_v2, memGetInfo)                                                                   \
  X(cuMemAllocHost_v2, memAllocHost)                                                               \
  X(cuMemFreeHost, memFreeHost)                                                                    \
  X(cuMemcpyHtoDAsync_v2, memcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync_v2, memcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync_v2, memcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async, memsetD8Async)                                                                \
  X(cuMemcpyHtoD_v2, memcpyHtoD)                                                                   \
  X(cuMemcpyDtoH_v2, memcpyDtoH)                                                                   \
  X(cuLaunchKernel, launchKernel)                                                                  \
  X(cuStreamCreate, streamCreate)                                                                  \
  X(cuStreamDestroy_v2, streamDestroy)                                                             \
  X(cuStreamSynchronize, streamSynchronize)                                                        \
  X(cuEventCreate, eventCreate)                                                                    \
  X(cuEventDestroy_v2, eventDestroy)                                                               \
  X(cuEventRecord, eventRecord)                                                                    \
  X(cuEventSynchronize, eventSynchronize)                                                          \
  X(cuStreamBeginCapture_v2, streamBeginCapture)                                                   \
  X(cuStreamEndCapture, streamEndCapture)                                                          \
  X(cuGraphInstantiateWithFlags, graphInstantiate)                                                 \
  X(cuGraphLaunch, graphLaunch)                                                                    \
  X(cuGraphExecDestroy, graphExecDestroy)                                                          \
  X(cuGraphDestroy, graphDestroy)

class CudaDriver {
public:
  /// The driver, opened and initialized (cuInit) once per process. The error names the library
  /// or symbol that is missing, or what cuInit said (CUDA_ERROR_NO_DEVICE ...).
  static Expected<const CudaDriver *> get();

  /// Success, or "<call> failed: CUDA_ERROR_<NAME> (<description>)".
  Status check(CUresult result, const char *call) const;

#define SMELT_CUDA_DRIVER_MEMBER(symbol, member) decltype(&::symbol) member = nullptr;
  SMELT_CUDA_DRIVER_ENTRIES(SMELT_CUDA_DRIVER_MEMBER)
#undef SMELT_CUDA_DRIVER_MEMBER

private:
  CudaDriver() = default;
};

} // namespace smelt::rt::cuda
