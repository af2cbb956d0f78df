// The emulated CUDA's shared core, for the emulated libraries built beside the emulated driver
// (libcuda.so.1 here; libcublasLt.so.13, libcudnn.so.9, libnccl.so.2 link to it): its device
// memory, its streams and their adversarial schedule, and how queued work reports a fault.
// docs/emucuda.md says what the emulation proves and how to run on it.
//
// Memory. Device memory is a reserved range of address space that the host cannot touch
// (PROT_NONE); its bytes live at a second mapping that only work run by the emulation reaches,
// through hostView(). So a host read of device memory outside a copy is a fault the emulation
// reports (a SIGSEGV handler names the allocation), a pointer into freed memory is refused, and
// a copy or kernel that runs after its memory was freed fails with the call that queued it.
//
// Streams. Work is queued, not run: it runs when the host needs it (a synchronize, a
// synchronous copy, an event query that polls) or, with SMELT_EMUCUDA_SCHEDULE=eager, at once.
// Among the work that is ready the scheduler picks by a seeded random draw, so independent
// streams interleave in any order the CUDA contract allows, and a missing synchronization shows
// as a wrong value or a fault instead of being hidden by a fast device.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace smelt::emucuda {

/// Thrown by queued work to fail: the context's sticky error becomes `code`, `message` goes to
/// stderr and lastFault(), and every later synchronize returns the code, as on a GPU.
struct Fault : std::runtime_error {
  Fault(CUresult code, const std::string &message)
      : std::runtime_error(message), code(code) {}
  CUresult code;
};

/// The host address of the device bytes [pointer, pointer + bytes), when they lie inside one
/// live device allocation or pinned host allocation (pinned memory is its own host view); else
/// throws Fault(CUDA_ERROR_ILLEGAL_ADDRESS) naming `what` and why ("freed", "outside any
/// allocation", "past the end of a 4096-byte allocation"). For queued work, when it runs.
void *hostView(const void *pointer, size_t bytes, const std::string &what);
inline void *hostView(CUdeviceptr pointer, size_t bytes, const std::string &what) {
  return hostView(reinterpret_cast<const void *>(uintptr_t(pointer)), bytes, what);
}

/// Whether `pointer` lies in emulated device memory (live or not): the check a library call
/// makes at once, as the real one rejects a host pointer with CUDA_ERROR_INVALID_VALUE.
bool isDeviceAddress(const void *pointer);
/// "" when [pointer, pointer + bytes) is inside one live allocation (device or pinned), else why.
std::string checkRange(const void *pointer, size_t bytes);

/// The ordinal of the device whose context is current on this thread, or -1.
int currentDevice();
/// The device a stream belongs to; -1 for an unknown stream. 0 and CU_STREAM_LEGACY are the
/// current context's legacy stream.
int streamDevice(CUstream stream);

/// Queues `run` on `stream`, after everything the stream (and, for the legacy stream and
/// blocking streams, each other) must wait for. `what` names the work in faults and traces
/// ("cublasLtMatmul f32 [64x32]x[32x16]"). Returns CUDA_ERROR_INVALID_HANDLE for a stream that
/// does not exist, or the context's sticky error.
CUresult enqueue(CUstream stream, std::string what, std::function<void()> run);

/// Work that spans several streams and runs once, when every part's stream has reached it: an
/// NCCL collective whose ranks queue one part each. `run` must be set before the last part is
/// queued; it runs on one thread and may read every part's buffers.
struct GroupWork {
  explicit GroupWork(int parts) : parts(parts) {}
  const int parts;
  std::function<void()> run;
  std::string what;
  /// Its run waits for ranks of other processes (an NCCL collective across processes), so the
  /// eager schedule does not run it inside the call that queued it (NCCL's calls return at
  /// once): it runs when the host needs it, as under the late schedule.
  bool waitsForOtherProcesses = false;
};
/// Queues one part of `group` on `stream`; the group runs once all `parts` are queued and ready.
CUresult enqueuePart(const std::shared_ptr<GroupWork> &group, CUstream stream, std::string what);

/// When `stream` is capturing a graph: records a node that, at each launch of the graph, calls
/// `requeue` with the launching stream to queue its work then (an NCCL collective, which NCCL
/// issues as the communicator's next one at every replay), sets `captured` and returns
/// CUDA_SUCCESS, or CUDA_ERROR_STREAM_CAPTURE_INVALIDATED for a broken capture. Otherwise
/// leaves `captured` false and returns CUDA_SUCCESS: the caller queues the work itself.
CUresult captureRequeue(CUstream stream, std::string what,
                        std::function<CUresult(CUstream)> requeue, bool &captured);

/// Gives up on `group`: the parts queued so far complete, in their streams' order, without its
/// work, and parts queued later are refused; what ncclCommAbort does to a collective whose peers
/// never come. Returns false when the group is already running.
bool abandonGroup(const std::shared_ptr<GroupWork> &group);

/// The message of the last fault queued work raised, "" when none (the tests' window onto
/// the emulation's diagnostics); clearFault() forgets it and the sticky errors.
std::string lastFault();
void clearFault();

/// What crossed between host and device and how often the host waited, since the process began
/// or the last resetTraffic(): the emulation's own count, independent of the runtime's, for
/// tests and issue 31's baseline. SMELT_EMUCUDA_TRAFFIC=1 prints it to stderr at exit.
struct Traffic {
  uint64_t toDevice = 0, toDeviceCopies = 0; // host to device, bytes and copies
  uint64_t toHost = 0, toHostCopies = 0;     // device to host
  uint64_t launches = 0;                     // kernels queued to run (not captured)
  uint64_t hostWaits = 0; // synchronizes, and synchronous copies that wait for the device
  uint64_t graphLaunches = 0; // cuGraphLaunch: each queues its graph's nodes, kernels included
  /// cudnnTransformTensor calls run (a graph's replays included): on a GPU, a copy kernel each
  /// that the runtime's layouts made necessary.
  uint64_t layoutCopies = 0;
};
Traffic traffic();
void resetTraffic();
/// Counts a cudnnTransformTensor call as it runs (the emulated cuDNN's).
void countLayoutCopy();

/// How queued work is ordered: eager (at once, in order), late (only when the host needs it,
/// ready work picked at random), from SMELT_EMUCUDA_SCHEDULE ("eager", "late", "late:SEED");
/// late with a random seed printed to stderr when unset.
enum class Schedule { Eager, Late };
Schedule schedule();
uint64_t scheduleSeed();

} // namespace smelt::emucuda
