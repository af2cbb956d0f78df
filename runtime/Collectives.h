// Collectives across replicas: the Communicator the executor's all_reduce steps call, and the
// in-process backend (LocalGroup: N replicas as threads of one process, MirroredStrategy on CPU
// devices). MPI (runtime/mpi) and NCCL (runtime/cuda) implement the same interface.
//
// A collective is started, may make progress while the executor runs later steps, and is waited
// for before the first step that reads its result; every wait has a timeout, so a replica that
// died or hangs makes the others fail with a message instead of hanging them.
#pragma once

#include "runtime/DType.h"
#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smelt::rt {

std::string_view reduceKindName(ReduceKind kind);

struct CollectiveOptions {
  /// How long a wait may take before it fails, in seconds; 0 waits forever.
  double timeoutSeconds = 300;
  /// Reduce in rank order (gather every replica's contribution, then add replica 0, 1, ... in
  /// float64 for floats): the same bits on every replica, in every run and with every backend,
  /// whatever algorithm the backend would otherwise choose.
  bool deterministic = false;
};

class Communicator {
public:
  virtual ~Communicator() = default;

  /// This replica's index in [0, size()), and how many replicas take part.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// For messages and logs: "mpi rank 1 of 2 (host node3)", "local replica 0 of 2".
  virtual std::string describe() const = 0;

  /// Starts reducing `count` elements of `dtype` at `data` across all replicas, in place. Every
  /// replica must start the same collectives in the same order. `what` names it in errors
  /// ("all_reduce at step.mlir:4:3, bucket 2"). `data` must stay valid until wait().
  /// Returns a ticket for wait().
  virtual Expected<int64_t> start(void *data, int64_t count, DType dtype, ReduceKind kind,
                                  std::string what) = 0;
  /// Lets started collectives advance without blocking; the executor calls it between steps.
  virtual void progress() {}
  /// Blocks until collective `ticket` is done. After the timeout it fails with a message naming
  /// the collective, its size, this replica and how long it waited; the communicator is then
  /// unusable (every later call fails), since replicas no longer agree on what comes next.
  virtual Status wait(int64_t ticket) = 0;

  /// This replica failed: make the others fail rather than wait for it. LocalGroup fails their
  /// collectives with `reason`; MPI prints it and calls MPI_Abort, which ends every rank of the
  /// job, this process included.
  virtual void abort(const std::string &reason) = 0;

  /// The GPU whose memory start() reduces (NCCL), or -1 for host memory: the GPU executor
  /// hands a device buffer to the first kind and stages through the host for the second.
  virtual int cudaDevice() const { return -1; }
  /// Whether startOnStream works: the collective is then ordered on a GPU stream of
  /// cudaDevice() like a kernel, with no host wait (NCCL, unless it finishes on the host).
  virtual bool reducesOnStreams() const { return false; }
  /// start() enqueued on `stream` (a CUstream of cudaDevice()): after the work queued there
  /// before it, before the work queued after it. wait(ticket) still bounds it with the
  /// timeout, and must come before the host reads the result or gives `data` up.
  virtual Expected<int64_t> startOnStream(void *stream, void *data, int64_t count, DType dtype,
                                          ReduceKind kind, std::string what);
  /// startOnStream() on a stream that is capturing a CUDA graph: the collective is recorded,
  /// and every launch of the graph runs it as this replica's next collective, so replicas must
  /// launch their graphs in the same order as they would start the collectives. There is no
  /// ticket (work inside a graph cannot be waited for alone): fenceOnStream() after the launch
  /// bounds it. Works where reducesOnStreams() does.
  virtual Status captureOnStream(void *stream, void *data, int64_t count, DType dtype,
                                 ReduceKind kind, std::string what);
  /// A ticket for everything queued on `stream` so far (a graph launch whose collectives
  /// captureOnStream() recorded): wait() blocks until it is done, bounded by the timeout and
  /// named `what` in its errors, as a collective is.
  virtual Expected<int64_t> fenceOnStream(void *stream, std::string what);

  /// start() then wait().
  Status allReduce(void *data, int64_t count, DType dtype, ReduceKind kind, std::string what);

protected:
  /// "all_reduce '<what>' (<bytes> bytes of <dtype>, <kind>) on <describe()>": how every
  /// backend's messages name a collective.
  std::string collectiveName(const std::string &what, int64_t count, DType dtype,
                             ReduceKind kind) const;
  /// Refuses what no backend reduces (i1 elements, a negative count, a null buffer), in an
  /// error that starts with the collective's name (formatted only then: start() is per step).
  Status checkReduceArguments(const void *data, int64_t count, DType dtype, ReduceKind kind,
                              const std::string &what) const;
};

/// `message` prefixed with which replica it concerns (`communicator`'s describe()), unless it
/// already says so, as a collective's errors do; unchanged without a communicator.
std::string namingReplica(const Communicator *communicator, const std::string &message);

/// Adds `replicas` contributions of `count` elements of `dtype`, laid out one after another in
/// `contributions`, in rank order (float types accumulate in float64, then round once), divides
/// by `replicas` for mean, and writes `out`. The deterministic mode of every backend.
/// Integers add exactly (i32 in 64 bits, i64 in 128): sum wraps to the type's width as MPI_SUM
/// does, mean divides the exact sum truncating toward zero (-7 / 2 = -3). i1 has no sum and
/// leaves `out` unchanged: every backend's start() refuses it with an error naming the dtype.
void reduceInRankOrder(const void *contributions, int replicas, int64_t count, DType dtype,
                       ReduceKind kind, void *out);

/// N replicas in one process, each on its own thread with its own Communicator. The replica that
/// starts a collective last reduces it in rank order (reduceInRankOrder: deterministic whatever
/// the options say) and writes the result into every replica's buffer. A mismatch (count, dtype
/// or kind differing between replicas) or a wait that times out fails the whole group, like
/// abort(): the replicas no longer agree, and a late replica must not write into a buffer whose
/// owner gave up on it.
class LocalGroup {
public:
  LocalGroup(int replicas, CollectiveOptions options = {});
  ~LocalGroup();
  LocalGroup(const LocalGroup &) = delete;
  LocalGroup &operator=(const LocalGroup &) = delete;

  int size() const;
  /// The communicator of replica `rank` (null when `rank` is not in [0, size())); it shares
  /// the group's state, so it may outlive the group. A group made with fewer than one replica
  /// has one, and fails every collective with a message saying so.
  std::unique_ptr<Communicator> communicator(int rank);
  /// Fails every collective in flight and every later one with `reason` (a replica failed, so
  /// the others must not wait for it).
  void abort(const std::string &reason);

private:
  struct State;
  std::shared_ptr<State> state_;
};

/// The communicators of replicas that run on GPUs, one per device, made by a DeviceGroupFactory
/// (rt::cuda::ncclReplicaGroup: NCCL), and a line saying how they reduce or, when
/// `communicators` is empty, why the replicas keep their host communicators.
struct DeviceGroup {
  std::vector<std::unique_ptr<Communicator>> communicators;
  std::string summary;
};
/// Makes the DeviceGroup of the replicas on `devices` ("gpu:0", "gpu:1"): in one process when
/// `bootstrap` is null, else this process's one replica of `bootstrap`'s group (which passes
/// the group's id around). An error is a group that should work and did not.
using DeviceGroupFactory = std::function<Expected<DeviceGroup>(
    const std::vector<std::string> &devices, Communicator *bootstrap, CollectiveOptions options)>;

} // namespace smelt::rt
