// NCCL on real GPUs, through the dlopen'ed driver and libnccl: all-reduce of random f32 and bf16
// device buffers (sum and mean, fast and deterministic modes) against a host reference, with
// one rank on one GPU and, where there are several, one rank per GPU of this process. Skips when
// the driver, a device or libnccl is missing; scripts/gpu-check.sh runs it on the GPU machine.
#include "GpuSkip.h"
#include "RuntimeTestUtil.h"

#include "runtime/Collectives.h"
#include "runtime/DeviceMemory.h"
#include "runtime/cuda/Nccl.h"
#include "runtime/cuda/NcclReplicas.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <chrono>
#include <cstring>
#include <iostream>
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
    // One thread, several communicators: the starts go in one NCCL group.
    std::vector<int64_t> tickets;
    ASSERT_OK(NcclCommunicator::groupStart());
    for (int d = 0; d < ranks; ++d) {
      Expected<int64_t> ticket =
          (*comms)[size_t(d)]->start(buffers[size_t(d)]->data(), kCount, c.dtype, c.kind, c.name());
      ASSERT_TRUE(ticket.ok()) << ticket.message();
      tickets.push_back(*ticket);
    }
    ASSERT_OK(NcclCommunicator::groupEnd());
    std::vector<HostTensor> results;
    for (int d = 0; d < ranks; ++d) {
      ASSERT_OK((*comms)[size_t(d)]->wait(tickets[size_t(d)]));
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

} // namespace
// The Trainer aborts every replica's communicator from the thread of the one that failed,
// while the others may be inside wait(): the waiting rank must end with the abort's reason (the
// first real error), not with what its aborted communicator says afterwards, and not hang.
TEST(NcclGpu, AbortFromAnotherThreadEndsAWaitWithItsReason) {
  if (!gpus().ok())
    SMELT_SKIP_WITHOUT_GPU(gpus().message());
  if (gpus()->count < 2) {
    std::cout << "[   NOTE   ] one GPU: the abort needs a peer that never arrives; not checked\n";
    return;
  }
  Expected<std::vector<std::unique_ptr<NcclCommunicator>>> comms =
      createNcclCommunicators({0, 1}, {.timeoutSeconds = 60});
  ASSERT_TRUE(comms.ok()) << comms.message();
  HostTensor input = test::randomTensor(DType::f32, {1024});
  DeviceCopy buffer(0, input);
  ASSERT_OK(buffer.status());
  // Rank 0 starts; rank 1 never does, as a replica that failed before its all-reduce.
  Expected<int64_t> ticket =
      (*comms)[0]->start(buffer.data(), 1024, DType::f32, ReduceKind::sum, "gradients");
  ASSERT_TRUE(ticket.ok()) << ticket.message();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (*comms)[0]->abort("replica 1 failed: out of memory");
  });
  auto begin = std::chrono::steady_clock::now();
  Status waited = (*comms)[0]->wait(*ticket);
  aborter.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_FALSE(waited.ok()) << "the all-reduce completed without rank 1";
  EXPECT_NE(waited.message().find("aborted: replica 1 failed: out of memory"), std::string::npos)
      << waited.message();
  EXPECT_LT(seconds, 30) << "the wait outlived the abort";
  EXPECT_FALSE((*comms)[0]->start(buffer.data(), 1024, DType::f32, ReduceKind::sum, "next").ok());
}

} // namespace smelt::rt::cuda
