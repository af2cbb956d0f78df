// The emulated driver's internals shared by its files (Memory, Scheduler, Modules, Driver):
// the devices it reports, their contexts, and the calls each file offers the others. The
// emulated libraries see only EmuCuda.h.
#pragma once

#include "EmuCuda.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

// ---- Graphs (Graphs.cpp; capture in Scheduler.cpp)
// -----------------------------------------------
/// A graph as stream capture records it: the work queued on the stream, in order. Captured from
/// one stream, each node depends on the one before, so a launch queues them in that order.
struct GraphNode {
  std::string what;
  std::function<void()> run;
  /// Instead of `run`: work that queues itself anew at each launch of the graph, on the
  /// launching stream (captureRequeue: an NCCL collective, issued as its communicator's next).
  std::function<CUresult(CUstream)> requeue;
};
struct Graph {
  int device = 0;
  std::vector<GraphNode> nodes;
};
/// cuStreamBeginCapture on `stream` (not the legacy one): its work is recorded, not run, until
/// endCapture. A call that capture cannot hold (a synchronize, a synchronous copy, an event,
/// an NCCL part, legacy-stream work on the device) fails with CUDA_ERROR_STREAM_CAPTURE_* and
/// invalidates the capture, as the driver does in CU_STREAM_CAPTURE_MODE_GLOBAL.
CUresult beginCapture(CUstream stream, CUstreamCaptureMode mode);
/// The recorded graph (registered with Graphs.cpp), or null and
/// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
CUresult endCapture(CUstream stream, CUgraph *graph);
CUresult captureStatus(CUstream stream, CUstreamCaptureStatus *status);
/// Takes ownership of a captured graph; its CUgraph handle.
CUgraph registerGraph(std::unique_ptr<Graph> graph);
CUresult destroyGraph(CUgraph graph);
/// An executable graph: a copy of the graph's nodes, fixed (kernel arguments, addresses) as
/// captured. Only flags 0 are known.
CUresult instantiateGraph(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
CUresult destroyGraphExec(CUgraphExec exec);
/// Queues the graph's nodes on `stream`, in order, as work of that stream (or records them when
/// it is capturing); the stream must be on the graph's device.
CUresult launchGraph(CUgraphExec exec, CUstream stream);

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
