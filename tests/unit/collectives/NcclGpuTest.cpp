// NCCL on real GPUs, through the dlopen'ed driver and libnccl: all-reduce of random f32 and bf16
// device buffers (sum and mean, fast and deterministic modes) against a host reference, with
// one rank on one GPU and, where there are several, one rank per GPU of this process; and the
// watchdog that bounds a wait (a peer that never comes, an abort from another thread). Skips when
// the driver, a device or libnccl is missing; scripts/gpu-check.sh runs it on the GPU machine.
#include "GpuSkip.h"
#include "RuntimeTestUtil.h"

#include "runtime/Collectives.h"
#include "runtime/DeviceMemory.h"
#include "runtime/cuda/Nccl.h"
#include "runtime/cuda/NcclReplicas.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>

namespace smelt::rt::cuda {
namespace {

struct Gpus {
  const CudaDriver *cu = nullptr;
  const Nccl *nccl = nullptr;
  int count = 0;
  std::vector<CUcontext> contexts; // primary, retained for the whole run
};

Expected<Gpus> openGpus() {
  auto both = openDriverAndNccl();
  if (!both.ok())
    return both.status();
  Gpus gpus{both->first, both->second};
  if (Status status = gpus.cu->check(gpus.cu->deviceGetCount(&gpus.count), "cuDeviceGetCount");
      !status.ok())
    return status;
  if (gpus.count == 0)
    return Status::error("the CUDA driver sees no device");
  for (int d = 0; d < gpus.count; ++d) {
    CUdevice device = 0;
    CUcontext context = nullptr;
    for (Status status :
         {gpus.cu->check(gpus.cu->deviceGet(&device, d), "cuDeviceGet"),
          gpus.cu->check(gpus.cu->primaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain")})
      if (!status.ok())
        return status;
    gpus.contexts.push_back(context);
  }
  std::cout << "NCCL " << gpus.nccl->versionName() << ", " << gpus.count << " GPU(s)\n";
  return gpus;
}

const Expected<Gpus> &gpus() {
  static const Expected<Gpus> opened = openGpus();
  return opened;
}

#define ASSERT_OK(expr)                                                                            \
  do {                                                                                             \
    Status status_ = (expr);                                                                       \
    ASSERT_TRUE(status_.ok()) << status_.message();                                                \
  } while (0)

/// A host tensor's copy in device memory on GPU `ordinal`; freed with the object.
class DeviceCopy {
public:
  DeviceCopy(int ordinal, const HostTensor &host) : ordinal_(ordinal), bytes_(host.byteSize()) {
    const CudaDriver &cu = *gpus()->cu;
    status_ = cu.check(cu.ctxSetCurrent(gpus()->contexts[size_t(ordinal)]), "cuCtxSetCurrent");
    if (status_.ok())
      status_ = cu.check(cu.memAlloc(&pointer_, std::max<size_t>(bytes_, 1)), "cuMemAlloc");
    if (status_.ok())
      status_ = cu.check(cu.memcpyHtoD(pointer_, host.raw(), bytes_), "cuMemcpyHtoD");
    // From pageable memory the copy may return before its DMA ends, on the legacy stream, which
    // the communicators' non-blocking streams do not wait for.
    if (status_.ok())
      status_ = cu.check(cu.ctxSynchronize(), "cuCtxSynchronize");
  }
  ~DeviceCopy() {
    const CudaDriver &cu = *gpus()->cu;
    cu.ctxSetCurrent(gpus()->contexts[size_t(ordinal_)]);
    if (pointer_)
      cu.memFree(pointer_);
  }
  DeviceCopy(const DeviceCopy &) = delete;
  DeviceCopy &operator=(const DeviceCopy &) = delete;

  const Status &status() const { return status_; }
  void *data() const { return reinterpret_cast<void *>(uintptr_t(pointer_)); }
  Status download(HostTensor &host) const {
    const CudaDriver &cu = *gpus()->cu;
    if (Status s =
            cu.check(cu.ctxSetCurrent(gpus()->contexts[size_t(ordinal_)]), "cuCtxSetCurrent");
        !s.ok())
      return s;
    return cu.check(cu.memcpyDtoH(host.raw(), pointer_, bytes_), "cuMemcpyDtoH");
  }

private:
  int ordinal_;
  size_t bytes_;
  CUdeviceptr pointer_ = 0;
  Status status_;
};

double ulpAt(DType dtype, double value) {
  int precision = dtype == DType::bf16 ? 8 : 24;
  int exponent = value == 0 ? -126 : std::max(int(std::floor(std::log2(std::fabs(value)))), -126);
  return std::ldexp(1.0, exponent - precision + 1);
}

/// Every rank's result against the host: bit-identical to reduceInRankOrder in deterministic
/// mode; otherwise within a few ulps of the float64 sum (NCCL adds in its own order).
void expectReduced(const std::vector<HostTensor> &results, const std::vector<HostTensor> &inputs,
                   ReduceKind kind, bool deterministic, const std::string &what) {
  const int ranks = int(inputs.size());
  HostTensor exact = HostTensor::zeros(inputs[0].type());
  std::vector<std::byte> everyone;
  for (const HostTensor &t : inputs) {
    const std::byte *bytes = static_cast<const std::byte *>(t.raw());
    everyone.insert(everyone.end(), bytes, bytes + t.byteSize());
  }
  reduceInRankOrder(everyone.data(), ranks, exact.type().numElements(), exact.type().dtype, kind,
                    exact.raw());
  DType dtype = exact.type().dtype;
  for (int r = 0; r < ranks; ++r) {
    const HostTensor &got = results[size_t(r)];
    std::string name = fmt::format("{}, rank {} (SMELT_TEST_SEED={})", what, r, test::baseSeed());
    if (deterministic) {
      EXPECT_EQ(std::memcmp(got.raw(), exact.raw(), got.byteSize()), 0)
          << name << ": not bit-identical to reduceInRankOrder: " << got.summary() << " vs "
          << exact.summary();
      continue;
    }
    int bad = 0;
    for (int64_t i = 0; i < got.type().numElements() && bad < 5; ++i) {
      double magnitude = 0;
      for (const HostTensor &t : inputs)
        magnitude += std::fabs(t.at(i));
      double ref = exact.at(i);
      double tolerance = ranks * ulpAt(dtype, magnitude) + ulpAt(dtype, ref);
      if (!(std::fabs(got.at(i) - ref) <= tolerance)) {
        ADD_FAILURE() << name << ": element " << i << " is " << got.at(i) << ", expected " << ref
                      << " within " << tolerance;
        ++bad;
      }
    }
  }
}

struct Case {
  DType dtype;
  ReduceKind kind;
  bool deterministic;
  std::string name() const {
    return fmt::format("{} {} ({})", dtypeName(dtype), reduceKindName(kind),
                       deterministic ? "deterministic" : "fast");
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (bool deterministic : {false, true})
    for (DType dtype : {DType::f32, DType::bf16})
      for (ReduceKind kind : {ReduceKind::sum, ReduceKind::mean})
        all.push_back({dtype, kind, deterministic});
  return all;
}

constexpr int64_t kCount = (1 << 20) + 3; // not a multiple of anything NCCL likes

TEST(NcclGpu, OneRankSumAndMeanOnOneGpu) {
  if (!gpus().ok())
    SMELT_SKIP_WITHOUT_GPU(gpus().message());
  for (const Case &c : cases()) {
    // The id travels through a one-replica LocalGroup, as it would through MPI.
    LocalGroup bootstrap(1);
    std::unique_ptr<Communicator> local = bootstrap.communicator(0);
    Expected<std::unique_ptr<NcclCommunicator>> comm =
        createNcclCommunicator(*local, 0, {.timeoutSeconds = 60, .deterministic = c.deterministic});
    ASSERT_TRUE(comm.ok()) << comm.message();
    EXPECT_EQ((*comm)->describe(), "nccl rank 0 of 1 (gpu 0)");

    std::vector<HostTensor> inputs = {test::randomTensor(c.dtype, {kCount})};
    DeviceCopy buffer(0, inputs[0]);
    ASSERT_OK(buffer.status());
    ASSERT_OK((*comm)->allReduce(buffer.data(), kCount, c.dtype, c.kind, c.name()));
    std::vector<HostTensor> results = {HostTensor::zeros(inputs[0].type())};
    ASSERT_OK(buffer.download(results[0]));
    expectReduced(results, inputs, c.kind, c.deterministic, c.name());

    bool flags[4] = {};
    EXPECT_FALSE((*comm)->start(flags, 4, DType::i1, ReduceKind::sum, "mask").ok());
  }
}

TEST(NcclGpu, SumAndMeanAcrossEveryGpuOfThisProcess) {
  if (!gpus().ok())
    SMELT_SKIP_WITHOUT_GPU(gpus().message());
  const int ranks = gpus()->count;
  if (ranks < 2) {
    // Not a skip: gpu-check.sh counts a skip beside a GPU as a failure, and one GPU is a
    // machine this test has nothing more to say about.
    std::cout << "[   NOTE   ] one GPU: the multi-device all-reduce needs two; not checked\n";
    return;
  }
  std::vector<int> devices;
  for (int d = 0; d < ranks; ++d)
    devices.push_back(d);
  for (const Case &c : cases()) {
    Expected<std::vector<std::unique_ptr<NcclCommunicator>>> comms =
        createNcclCommunicators(devices, {.timeoutSeconds = 60, .deterministic = c.deterministic});
    ASSERT_TRUE(comms.ok()) << comms.message();
    std::vector<HostTensor> inputs;
    std::vector<std::unique_ptr<DeviceCopy>> buffers;
    for (int d = 0; d < ranks; ++d) {
      inputs.push_back(test::randomTensor(c.dtype, {kCount}));
      buffers.push_back(std::make_unique<DeviceCopy>(d, inputs.back()));
      ASSERT_OK(buffers.back()->status());
    }
    // One thread per rank, as the replicas run: one thread starting several ranks' collectives
    // would need NCCL's group calls (a rank's start may block until the others join).
    std::vector<Expected<int64_t>> tickets(size_t(ranks), Status::error("not started"));
    std::vector<std::thread> threads;
    for (int d = 0; d < ranks; ++d)
      threads.emplace_back([&, d] {
        tickets[size_t(d)] = (*comms)[size_t(d)]->start(buffers[size_t(d)]->data(), kCount, c.dtype,
                                                        c.kind, c.name());
      });
    for (std::thread &thread : threads)
      thread.join();
    for (const Expected<int64_t> &ticket : tickets)
      ASSERT_TRUE(ticket.ok()) << ticket.message();
    std::vector<HostTensor> results;
    for (int d = 0; d < ranks; ++d) {
      ASSERT_OK((*comms)[size_t(d)]->wait(*tickets[size_t(d)]));
      results.push_back(HostTensor::zeros(inputs[0].type()));
      ASSERT_OK(buffers[size_t(d)]->download(results.back()));
    }
    expectReduced(results, inputs, c.kind, c.deterministic, c.name());
  }
}

TEST(NcclReplicas, ReplicasSharingAPhysicalGpuAreNamed) {
  EXPECT_EQ(sharedGpuReason({"gpu:0", "gpu:1", "gpu:2"}, {0, 1, 2}), "");
  EXPECT_EQ(sharedGpuReason({"gpu:0", "gpu:1", "gpu:2"}, {0, 1, 1}),
            "gpu:1 and gpu:2 are both on physical GPU 1, and NCCL puts one rank on each GPU");
}

TEST(NcclReplicas, TheGroupOfTheTrainersReplicas) {
  if (!gpus().ok()) {
    // Without a GPU the factory says which replica has none.
    Expected<DeviceGroup> none = ncclReplicaGroup({"gpu:0", "gpu:1"}, nullptr, {});
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.message().find("the replica on gpu:0: "), std::string::npos)
        << none.message();
    return;
  }
  // One replica per physical GPU: an NCCL group (one GPU: a group of one).
  std::vector<std::string> devices;
  for (int d = 0; d < gpus()->count; ++d)
    devices.push_back(fmt::format("gpu:{}", d));
  Expected<DeviceGroup> group = ncclReplicaGroup(devices, nullptr, {.timeoutSeconds = 60});
  ASSERT_TRUE(group.ok()) << group.message();
  ASSERT_EQ(group->communicators.size(), devices.size());
  EXPECT_EQ(group->summary.rfind("NCCL ", 0), 0u) << group->summary;
  EXPECT_EQ(group->communicators[0]->cudaDevice(), 0);

  // Two logical GPUs on physical GPU 0: no NCCL group, the reason instead.
  MemoryConfig original = memoryConfig(), split = original;
  split.logicalGpuLimits = {uint64_t(1) << 30, uint64_t(1) << 30};
  ASSERT_OK(configureMemory(split));
  Expected<DeviceGroup> shared = ncclReplicaGroup({"gpu:0", "gpu:1"}, nullptr, {});
  ASSERT_OK(configureMemory(original));
  ASSERT_TRUE(shared.ok()) << shared.message();
  EXPECT_TRUE(shared->communicators.empty());
  EXPECT_EQ(shared->summary, "through host copies (gpu:0 and gpu:1 are both on physical GPU 0, "
                             "and NCCL puts one rank on each GPU)");
}

/// Rank 0 of two (gpus 0 and 1) waiting for an all-reduce of 1024 f32 ("gradients") that rank 1
/// never starts, as a replica that failed before its all-reduce would; another thread aborts
/// rank 0 with `reason` after `abortAfter` unless the wait has ended by then.
/// Skips without a GPU; with one GPU only, notes that `what` needs a second rank's GPU (a
/// peer that never arrives) and returns: not a skip, which gpu-check.sh counts as a failure
/// beside a GPU.
#define SMELT_REQUIRE_A_PEER_GPU(what)                                                             \
  if (!gpus().ok())                                                                                \
    SMELT_SKIP_WITHOUT_GPU(gpus().message());                                                      \
  if (gpus()->count < 2) {                                                                         \
    std::cout << "[   NOTE   ] one GPU: " << what                                                  \
              << " needs a peer that never arrives; not checked\n";                                \
    return;                                                                                        \
  }

struct LoneRank {
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
  std::unique_ptr<DeviceCopy> buffer;
  Status waited;
  double seconds = 0;
};

/// Starts rank 0's all-reduce 'gradients' of `data` (1024 f32): a ticket to wait for.
using StartLone = std::function<Expected<int64_t>(NcclCommunicator &rank0, void *data)>;
Expected<int64_t> startDirectly(NcclCommunicator &rank0, void *data) {
  return rank0.start(data, 1024, DType::f32, ReduceKind::sum, "gradients");
}

void waitWithoutRankOne(LoneRank &lone, CollectiveOptions options,
                        std::chrono::milliseconds abortAfter, const std::string &reason,
                        const StartLone &startLone = startDirectly) {
  Expected<std::vector<std::unique_ptr<NcclCommunicator>>> comms =
      createNcclCommunicators({0, 1}, options);
  ASSERT_TRUE(comms.ok()) << comms.message();
  lone.comms = std::move(*comms);
  NcclCommunicator &rank0 = *lone.comms[0];
  lone.buffer = std::make_unique<DeviceCopy>(0, test::randomTensor(DType::f32, {1024}));
  ASSERT_OK(lone.buffer->status());
  Expected<int64_t> ticket = startLone(rank0, lone.buffer->data());
  ASSERT_TRUE(ticket.ok()) << ticket.message();
  std::mutex mutex;
  std::condition_variable changed;
  bool returned = false;
  std::thread aborter([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (!changed.wait_for(lock, abortAfter, [&] { return returned; }))
      rank0.abort(reason);
  });
  auto begin = std::chrono::steady_clock::now();
  lone.waited = rank0.wait(*ticket);
  lone.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  {
    std::lock_guard<std::mutex> lock(mutex);
    returned = true;
  }
  changed.notify_all();
  aborter.join();
  if (lone.waited.ok()) // else destroying the communicators would wait for rank 1 forever
    rank0.abort("the test: rank 1 never comes");
}

} // namespace

// The Trainer aborts every replica's communicator from the thread of the one that failed,
// while the others may be inside wait(): the waiting rank must end with the abort's reason (the
// first real error), not with what its aborted communicator says afterwards, and not hang.
TEST(NcclGpu, AbortFromAnotherThreadEndsAWaitWithItsReason) {
  SMELT_REQUIRE_A_PEER_GPU("the abort");
  LoneRank lone;
  ASSERT_NO_FATAL_FAILURE(waitWithoutRankOne(lone, {.timeoutSeconds = 60},
                                             std::chrono::milliseconds(200),
                                             "replica 1 failed: out of memory"));
  ASSERT_FALSE(lone.waited.ok()) << "the all-reduce completed without rank 1";
  EXPECT_NE(lone.waited.message().find("aborted: replica 1 failed: out of memory"),
            std::string::npos)
      << lone.waited.message();
  EXPECT_LT(lone.seconds, 30) << "the wait outlived the abort";
  EXPECT_FALSE(
      lone.comms[0]->start(lone.buffer->data(), 1024, DType::f32, ReduceKind::sum, "next").ok());
}

namespace {

/// How many of this process's threads are NcclCommunicator watchdogs (named "nccl-watchdog").
int watchdogThreads() {
  int count = 0;
  for (const auto &task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string name;
    std::getline(std::ifstream(task.path() / "comm"), name);
    count += name == "nccl-watchdog";
  }
  return count;
}

/// This thread's voluntary context switches so far: one at least for every sleep or blocked wait.
long voluntarySwitches() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

} // namespace

// The communicator's watchdog thread starts with its first collective and ends with it, and a
// wait blocks on the collective's event instead of polling it with sleeps: on the emulated GPU,
// whose event queries report "not ready" until the waiter has run the collective, a polling wait
// sleeps at least once every time; a blocking one runs it and returns, with no sleep to switch
// this thread out.
TEST(NcclGpu, AWaitBlocksOnItsEventWhileAWatchdogThreadWatches) {
  if (!gpus().ok())
    SMELT_SKIP_WITHOUT_GPU(gpus().message());
  {
    Expected<std::vector<std::unique_ptr<NcclCommunicator>>> comms =
        createNcclCommunicators({0}, {.timeoutSeconds = 60});
    ASSERT_TRUE(comms.ok()) << comms.message();
    NcclCommunicator &comm = *(*comms)[0];
    EXPECT_EQ(watchdogThreads(), 0) << "a watchdog before the first collective, or left running";
    HostTensor input = test::randomTensor(DType::f32, {64});
    DeviceCopy buffer(0, input);
    ASSERT_OK(buffer.status());
    constexpr int kWaits = 200;
    long before = voluntarySwitches();
    for (int i = 0; i < kWaits; ++i)
      ASSERT_OK(comm.allReduce(buffer.data(), 64, DType::f32, ReduceKind::sum, "small"));
    long switches = voluntarySwitches() - before;
    EXPECT_EQ(watchdogThreads(), 1);
    // A few for the watchdog's lock (it wakes every 0.1 s): far fewer than one a wait.
    EXPECT_LT(switches, kWaits / 4)
        << "the waiting thread slept or blocked " << switches << " times in " << kWaits << " waits";
  }
  EXPECT_EQ(watchdogThreads(), 0) << "the communicator's watchdog outlived it";
}

// A replica that never reaches its all-reduce: the waiting rank's watchdog gives up after the
// timeout, names the collective, and aborts NCCL, which ends the blocked wait. A safety net
// aborts after 30 s, so a watchdog that never fires fails here instead of hanging the test.
TEST(NcclGpu, TheWatchdogEndsAWaitForARankThatNeverComesAfterTheTimeout) {
  SMELT_REQUIRE_A_PEER_GPU("the timeout");
  LoneRank lone;
  ASSERT_NO_FATAL_FAILURE(waitWithoutRankOne(lone, {.timeoutSeconds = 0.5},
                                             std::chrono::seconds(30),
                                             "the test's safety net: no watchdog ended the wait"));
  ASSERT_FALSE(lone.waited.ok()) << "the all-reduce completed without rank 1";
  const std::string &message = lone.waited.message();
  EXPECT_EQ(message.find("all_reduce 'gradients' (4096 bytes of f32, sum) on nccl rank 0 of 2 "
                         "(gpu 0): the other ranks did not complete it within"),
            0u)
      << message;
  EXPECT_NE(message.find("The NCCL communicator was aborted"), std::string::npos) << message;
  EXPECT_GE(lone.seconds, 0.5) << "gave up before the timeout";
  Expected<int64_t> next =
      lone.comms[0]->start(lone.buffer->data(), 1024, DType::f32, ReduceKind::sum, "next");
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.message().find("the communicator is unusable: all_reduce 'gradients'"),
            std::string::npos)
      << next.message();
}

// The same inside a CUDA graph: the all-reduce captured (no ticket of its own), the graph
// launched, and a fence behind it that the watchdog bounds as it bounds a collective.
TEST(NcclGpu, TheWatchdogEndsAWaitForAGraphWhosePeerNeverComes) {
  SMELT_REQUIRE_A_PEER_GPU("the timeout");
  const CudaDriver &cu = *gpus()->cu;
  auto startInGraph = [&](NcclCommunicator &rank0, void *data) -> Expected<int64_t> {
    CUstream stream = rank0.stream();
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    for (Status s : {cu.check(cu.ctxSetCurrent(gpus()->contexts[0]), "cuCtxSetCurrent"),
                     cu.check(cu.streamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                              "cuStreamBeginCapture")})
      if (!s.ok())
        return s;
    Status captured =
        rank0.captureOnStream(stream, data, 1024, DType::f32, ReduceKind::sum, "gradients");
    Status ended = cu.check(cu.streamEndCapture(stream, &graph), "cuStreamEndCapture");
    for (Status s :
         {captured, ended, cu.check(cu.graphInstantiate(&exec, graph, 0), "cuGraphInstantiate")})
      if (!s.ok())
        return s;
    cu.graphDestroy(graph);
    Status launched = cu.check(cu.graphLaunch(exec, stream), "cuGraphLaunch");
    cu.graphExecDestroy(exec); // a launched graph finishes without its exec
    if (!launched.ok())
      return launched;
    return rank0.fenceOnStream(stream, "the step's graph");
  };
  LoneRank lone;
  ASSERT_NO_FATAL_FAILURE(
      waitWithoutRankOne(lone, {.timeoutSeconds = 0.5}, std::chrono::seconds(30),
                         "the test's safety net: no watchdog ended the wait", startInGraph));
  ASSERT_FALSE(lone.waited.ok()) << "the graph's all-reduce completed without rank 1";
  const std::string &message = lone.waited.message();
  EXPECT_EQ(message.find("the step's graph on nccl rank 0 of 2 (gpu 0): the other ranks did not "
                         "complete it within"),
            0u)
      << message;
  EXPECT_GE(lone.seconds, 0.5) << "gave up before the timeout";
  // Deterministic mode reduces on the host, which no graph holds: refused by name.
  Expected<std::vector<std::unique_ptr<NcclCommunicator>>> deterministic =
      createNcclCommunicators({0}, {.deterministic = true});
  ASSERT_TRUE(deterministic.ok()) << deterministic.message();
  Status refused =
      (*deterministic)[0]->captureOnStream((*deterministic)[0]->stream(), lone.buffer->data(), 1024,
                                           DType::f32, ReduceKind::sum, "gradients");
  EXPECT_NE(refused.message().find("gradients: nccl rank 0 of 1 (gpu 0) cannot reduce inside a "
                                   "CUDA graph"),
            std::string::npos)
      << refused.message();
}

} // namespace smelt::rt::cuda
