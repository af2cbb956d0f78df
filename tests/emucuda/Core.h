// The emulated driver's internals shared by its files (Memory, Scheduler, Modules, Driver):
// the devices it reports, their contexts, and the calls each file offers the others. The
// emulated libraries see only EmuCuda.h.
#pragma once

#include "EmuCuda.h"

#include <cstdint>
#include <string>

namespace smelt::emucuda {

/// What each emulated device reports: an H100 SXM5 80GB (compute capability 9.0, 132 SMs).
/// SMELT_EMUCUDA_DEVICES sets how many there are (default 8, as on one HGX node).
constexpr int kMaxDevices = 16;
constexpr uint64_t kDeviceMemory = 85520809984ull; // what cuDeviceTotalMem says on an H100 80GB
int deviceCount();
const char *deviceName();
/// cuDeviceGetAttribute's answer for `attribute`, or false for one the emulation does not know.
bool deviceAttribute(CUdevice_attribute attribute, int *value);

/// The primary context of each device: CUcontext points at one of these.
struct Context {
  int device;
  int retained = 0;
};
Context *primaryContext(int device);
/// The context current on this thread (cuCtxSetCurrent), or null.
Context *currentContext();
void setCurrentContext(Context *context);

// ---- Memory (Memory.cpp) -------------------------------------------------------------------------
CUresult allocateDevice(int device, size_t bytes, CUdeviceptr *pointer);
CUresult freeDevice(CUdeviceptr pointer);
CUresult allocatePinned(size_t bytes, void **pointer);
CUresult freePinned(void *pointer);
uint64_t deviceBytesInUse(int device);
/// Whether `pointer` is host memory cuMemAllocHost gave (so copies from it are truly async).
bool isPinned(const void *pointer, size_t bytes);
/// The device whose memory `pointer` is, or -1.
int deviceOf(const void *pointer);

// ---- Scheduler (Scheduler.cpp) -------------------------------------------------------------------
struct Stream;
struct Event;
CUresult createStream(unsigned flags, CUstream *stream);
CUresult destroyStream(CUstream stream);
/// enqueue(), then runs that work (and what it waits for) before returning: a copy that the
/// contract makes synchronous with the host.
CUresult enqueueWaiting(CUstream stream, std::string what, std::function<void()> run);
/// Runs what `stream` has queued (and what that waits for); the sticky error or success.
CUresult synchronizeStream(CUstream stream);
CUresult queryStream(CUstream stream);
/// Runs everything queued on `device`'s streams.
CUresult synchronizeDevice(int device);
/// The device's sticky error (CUDA_SUCCESS when none): set by a fault, never cleared.
CUresult stickyError(int device);
CUresult createEvent(unsigned flags, CUevent *event);
CUresult destroyEvent(CUevent event);
CUresult recordEvent(CUevent event, CUstream stream);
CUresult queryEvent(CUevent event);
CUresult synchronizeEvent(CUevent event);
CUresult waitEvent(CUstream stream, CUevent event);
/// Whether the work of `stream` must be seen as the legacy stream's (0, CU_STREAM_LEGACY).
bool isLegacy(CUstream stream);

// ---- Modules (Modules.cpp) -----------------------------------------------------------------------
CUresult loadModule(CUmodule *module, const void *image);
CUresult unloadModule(CUmodule module);
CUresult moduleFunction(CUfunction *function, CUmodule module, const char *name);
CUresult launch(CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ,
                unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,
                CUstream stream, void **params, void **extra);

/// Writes "emulated CUDA: <message>" to stderr (the emulation's diagnostics, beside the code
/// the call returns).
void diagnose(const std::string &message);

} // namespace smelt::emucuda
