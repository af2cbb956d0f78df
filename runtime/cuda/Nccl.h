// NCCL, reached through dlopen("libnccl.so.2") and a table of symbols like the CUDA driver's
// (CudaDriver.h): binaries start without NCCL, and a missing library is an error to report (or
// a test's reason to skip). nccl.h is included for types and signatures only.
//
// NcclCommunicator is the Communicator of runtime/Collectives.h on GPU memory: `data` passed to
// start() is a device pointer (a CUdeviceptr cast to void *) in the communicator's device's
// primary context, and the all-reduce is enqueued on a stream; wait() blocks on an event recorded
// after it. A watchdog thread per communicator bounds that wait: a rank that died makes the
// others fail after the timeout instead of hanging, with no polling on the step's path.
#pragma once

#include "runtime/Collectives.h"
#include "runtime/cuda/CudaDevice.h"

#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace smelt::rt::cuda {

// symbol in libnccl, member in the table.
#define SMELT_NCCL_ENTRIES(X)                                                                      \
  X(ncclGetVersion, getVersion)                                                                    \
  X(ncclGetErrorString, getErrorString)                                                            \
  X(ncclGetUniqueId, getUniqueId)                                                                  \
  X(ncclCommInitRank, commInitRank)                                                                \
  X(ncclCommInitAll, commInitAll)                                                                  \
  X(ncclCommDestroy, commDestroy)                                                                  \
  X(ncclCommAbort, commAbort)                                                                      \
  X(ncclCommGetAsyncError, commGetAsyncError)                                                      \
  X(ncclAllReduce, allReduce)                                                                      \
  X(ncclAllGather, allGather)

class Nccl {
public:
  /// The library, opened once per process: libnccl.so.2, found as cudaLibraryCandidates
  /// (DynamicLibrary.h) says. The error names the library or the symbol that is missing.
  static Expected<const Nccl *> get();

  /// Success, or "<call> failed: <ncclGetErrorString> (<ncclGetLastError>)".
  Status check(ncclResult_t result, const char *call, ncclComm_t comm = nullptr) const;

  /// NCCL_VERSION_CODE of the loaded library (22809 for 2.28.9), and "2.28.9".
  int version = 0;
  std::string versionName() const;

#define SMELT_NCCL_MEMBER(symbol, member) decltype(&::symbol) member = nullptr;
  SMELT_NCCL_ENTRIES(SMELT_NCCL_MEMBER)
#undef SMELT_NCCL_MEMBER
  /// Only in NCCL 2.13 and later; null before.
  decltype(&::ncclGetLastError) getLastError = nullptr;

private:
  Nccl() = default;
};

/// The CUDA driver and NCCL, both of which NCCL on GPUs needs, or why either is missing.
Expected<std::pair<const CudaDriver *, const Nccl *>> openDriverAndNccl();

class NcclCommunicator final : public Communicator {
public:
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// "nccl rank 1 of 2 (gpu 1)".
  std::string describe() const override;

  /// Enqueues ncclAllReduce in place on the stream (mean: ncclAvg, NCCL 2.10+; for integers
  /// NCCL's own rounding). Deterministic mode instead gathers every rank's buffer on the
  /// device (ncclAllGather), and wait() reduces them in rank order on the host with
  /// reduceInRankOrder: slow, but the same bits as every other backend.
  Expected<int64_t> start(void *data, int64_t count, DType dtype, ReduceKind kind,
                          std::string what) override;
  /// Blocks on the collective's event (cuEventSynchronize) while the communicator's watchdog
  /// thread watches the wait: past the timeout, or when NCCL reports an asynchronous error, it
  /// aborts the communicator (ncclCommAbort ends the stuck kernels, so the event completes and
  /// the wait returns the watchdog's reason) and every later call fails.
  Status wait(int64_t ticket) override;
  /// Prints "smelt: <describe()>: <reason>" and aborts the communicator (ncclCommAbort): this
  /// rank's collectives end; the other ranks' fail when their waits time out (an MPI job
  /// should also call the MPI communicator's abort(), which ends every rank at once).
  void abort(const std::string &reason) override;

  /// The communicator's own stream, where start() enqueues.
  CUstream stream() const { return ownStream_; }
  int cudaDevice() const override { return ordinal_; }
  /// Not in deterministic mode, whose wait() finishes the reduction on the host.
  bool reducesOnStreams() const override { return !options_.deterministic; }
  Expected<int64_t> startOnStream(void *stream, void *data, int64_t count, DType dtype,
                                  ReduceKind kind, std::string what) override;
  /// ncclAllReduce on a stream that is capturing a CUDA graph (NCCL supports capture: each
  /// launch of the graph runs the collective again), with no event and no ticket.
  Status captureOnStream(void *stream, void *data, int64_t count, DType dtype, ReduceKind kind,
                         std::string what) override;
  Expected<int64_t> fenceOnStream(void *stream, std::string what) override;

private:
  friend Expected<std::vector<std::unique_ptr<NcclCommunicator>>>
  createNcclCommunicators(const std::vector<int> &devices, CollectiveOptions options);
  friend Expected<std::unique_ptr<NcclCommunicator>>
  createNcclCommunicator(Communicator &bootstrap, int device, CollectiveOptions options);

  struct Pending {
    CUevent done = nullptr;
    CUdeviceptr data = 0;
    int64_t count = 0;
    DType dtype = DType::f32;
    ReduceKind kind = ReduceKind::sum;
    std::string what;
    CUdeviceptr staging = 0; // deterministic mode: every rank's contribution, in order
    bool fence = false;      // fenceOnStream's: `what` names it, there is no data
    /// Set while wait() blocks on it: the watchdog times the wait from here.
    std::optional<std::chrono::steady_clock::time_point> waitedSince;
    /// Why the watchdog broke the communicator during this wait: the wait's answer.
    std::string failure;
  };

  NcclCommunicator(const CudaDriver &cu, const Nccl &nccl, CollectiveOptions options)
      : cu_(cu), nccl_(nccl), options_(options) {}
  /// Opens the device (its primary context current) and makes the communicator's stream.
  Status openDevice(int ordinal);
  /// A pending collective as collectiveName says it ("all_reduce '<what>' (...) on nccl rank R
  /// of N (gpu D)"); "<what> on nccl rank R of N (gpu D)" for a fence.
  std::string name(const Pending &p) const;
  /// Queues `p`'s collective on `stream` (nothing for a fence) after the checks they share;
  /// `tracked`: with a completion event and a ticket (else kUntracked, for a stream that is
  /// capturing a graph, where no event can be waited for).
  Expected<int64_t> enqueue(Pending p, CUstream stream, bool tracked);
  /// The Pending of an all-reduce.
  static Pending collective(void *data, int64_t count, DType dtype, ReduceKind kind,
                            std::string what);
  static constexpr int64_t kUntracked = -1;
  /// The watchdog thread, started with the first collective or fence (lock_ held).
  Status startWatchdog();
  /// Files `p` under a new ticket for wait() and the watchdog (lock_ held).
  int64_t addPending(Pending p);
  /// The deterministic mode's host reduction, once the gather is done.
  Status reduceGathered(Pending &p);
  void release(Pending &p);
  /// After a timeout or an error: abort the NCCL communicator and refuse every later call.
  void breakWith(const std::string &why);
  void breakLocked(const std::string &why); // lock_ held
  /// The watchdog thread's loop, from the first start() to the destructor: every period while a
  /// collective is pending, checks the waited ones' time and NCCL's asynchronous error.
  void watch();

  const CudaDriver &cu_;
  const Nccl &nccl_;
  CollectiveOptions options_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1, ordinal_ = 0;
  std::shared_ptr<CudaDevice> device_;
  CUstream ownStream_ = nullptr;
  int64_t nextTicket_ = 0;
  std::map<int64_t, Pending> pending_;
  /// Guards comm_, broken_ and pending_: abort() comes from another replica's thread (the
  /// Trainer aborts every replica when one fails) and the watchdog from its own, while this one
  /// may be inside wait(). The first reason to break the communicator is the one every later
  /// call reports.
  std::mutex lock_;
  std::optional<std::string> broken_;
  /// The watchdog sleeps on `wake_` until a collective is pending, then checks every period;
  /// `closing_` (set by the destructor) ends it.
  std::thread watchdog_;
  std::condition_variable wake_;
  bool watchdogIdle_ = false; // asleep until woken: start() wakes it for a first collective
  bool closing_ = false;
};

/// One process driving several GPUs: one communicator per device of `devices` (ordinals), rank
/// i on devices[i] (ncclCommInitAll).
Expected<std::vector<std::unique_ptr<NcclCommunicator>>>
createNcclCommunicators(const std::vector<int> &devices, CollectiveOptions options = {});

/// One rank per process: the NCCL unique id made on rank 0 of `bootstrap` (an MPI communicator,
/// typically: createMpiCommunicator in runtime/mpi) and sent to its other ranks with one
/// all_reduce; the NCCL communicator has bootstrap's rank and size. `device` is this rank's GPU
/// ordinal (the node-local rank, when a node has one GPU per rank). Collective over bootstrap's
/// ranks: blocks until all of them have joined.
Expected<std::unique_ptr<NcclCommunicator>>
createNcclCommunicator(Communicator &bootstrap, int device, CollectiveOptions options = {});

} // namespace smelt::rt::cuda
