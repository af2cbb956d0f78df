// Known-answer tests of the emulated NCCL (Nccl.cpp), written from NVIDIA's documentation of
// nccl.h rather than from Smelt's calls: 2 and 3 ranks on their own emulated devices, made by
// ncclCommInitAll from one thread or by ncclCommInitRank from one thread per rank; every
// reduction op on every dtype against a reference computed here, in place and out of place;
// all-gather; ranks that disagree, ranks that never arrive, and arguments NCCL rejects; and a
// rank in another process (emucuda-nccl-peer) joining, reducing, disagreeing, dying. Inputs
// are fresh random numbers (the seed is printed; SMELT_NCCL_TEST_SEED replays it). Work is
// deferred ("late" schedule), so results are read only after cuStreamSynchronize.
#include "EmuCuda.h"
#include "NcclPeer.h"

#include <cuda.h>
#include <nccl.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace emu = smelt::emucuda;

namespace {

#define CU_OK(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call
#define EXPECT_CONTAINS(text, part)                                                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)
#define NCCL_OK(call) ASSERT_EQ((call), ncclSuccess) << #call << ": " << ncclGetLastError(nullptr)

uint64_t freshSeed() {
  uint64_t seed = std::random_device{}();
  if (const char *fixed = std::getenv("SMELT_NCCL_TEST_SEED"))
    seed = std::strtoull(fixed, nullptr, 10);
  std::printf("NcclEmu seed %llu (SMELT_NCCL_TEST_SEED=%llu replays it)\n",
              (unsigned long long)seed, (unsigned long long)seed);
  return seed;
}

/// Runs `work` on its own thread; its result, or nothing when it has not returned within
/// `seconds` (the thread is then left behind: the point is that the test does not hang).
template <class R> std::optional<R> within(double seconds, std::function<R()> work) {
  auto promise = std::make_shared<std::promise<R>>();
  std::future<R> future = promise->get_future();
  std::thread([promise, work] { promise->set_value(work()); }).detach();
  if (future.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready)
    return std::nullopt;
  return future.get();
}

// Element encodings for the values the tests use: integers small enough, and floats exactly
// representable, in every type (so the reference needs no rounding of its own).
size_t sizeOf(ncclDataType_t type) {
  switch (type) {
  case ncclInt8: case ncclUint8: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  default: return 8;
  }
}

bool isFloat(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclBfloat16 || type == ncclFloat32 ||
         type == ncclFloat64;
}

bool isUnsigned(ncclDataType_t type) {
  return type == ncclUint8 || type == ncclUint32 || type == ncclUint64;
}

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float bitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

void encode(ncclDataType_t type, double value, std::byte *out) {
  auto put = [&](auto x) { std::memcpy(out, &x, sizeof x); };
  switch (type) {
  case ncclInt8: return put(int8_t(value));
  case ncclUint8: return put(uint8_t(value));
  case ncclInt32: return put(int32_t(value));
  case ncclUint32: return put(uint32_t(value));
  case ncclInt64: return put(int64_t(value));
  case ncclUint64: return put(uint64_t(value));
  case ncclFloat32: return put(float(value));
  case ncclFloat64: return put(value);
  case ncclBfloat16: return put(uint16_t(floatBits(float(value)) >> 16)); // exact values only
  case ncclFloat16: {                                                      // normal or zero only
    uint32_t bits = floatBits(float(value));
    uint16_t sign = (bits >> 16) & 0x8000;
    if ((bits & 0x7fffffff) == 0)
      return put(sign);
    return put(uint16_t(sign | ((((bits >> 23) & 0xff) - 112) << 10) | ((bits >> 13) & 0x3ff)));
  }
  default: FAIL() << "no encoding for type " << type;
  }
}

double decode(ncclDataType_t type, const std::byte *in) {
  auto get = [&](auto x) {
    std::memcpy(&x, in, sizeof x);
    return double(x);
  };
  switch (type) {
  case ncclInt8: return get(int8_t());
  case ncclUint8: return get(uint8_t());
  case ncclInt32: return get(int32_t());
  case ncclUint32: return get(uint32_t());
  case ncclInt64: return get(int64_t());
  case ncclUint64: return get(uint64_t());
  case ncclFloat32: return get(float());
  case ncclFloat64: return get(double());
  case ncclBfloat16: {
    uint16_t h;
    std::memcpy(&h, in, 2);
    return bitsFloat(uint32_t(h) << 16);
  }
  case ncclFloat16: {
    uint16_t h;
    std::memcpy(&h, in, 2);
    int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                       : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                        : std::ldexp(1024 + mantissa, exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
  }
  default: return NAN;
  }
}

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32, ncclInt64,
                                 ncclUint64,  ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

/// Ranks on devices 0..n-1 of the emulated driver, each with its primary context and a stream;
/// communicators and device buffers made by a test are released by TearDown.
class NcclEmu : public ::testing::Test {
protected:
  struct Rank {
    CUdevice device = 0;
    CUcontext context = nullptr;
    CUstream stream = nullptr;
  };

  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    int count = 0;
    ASSERT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
    if (count < 3)
      GTEST_SKIP() << "the emulated driver reports " << count << " devices; these tests need 3";
    emu::clearFault();
  }

  void TearDown() override {
    for (ncclComm_t comm : comms)
      if (comm)
        ncclCommAbort(comm);
    for (auto &[rank, pointer] : allocations) {
      cuCtxSetCurrent(ranks[rank].context);
      cuMemFree(pointer);
    }
    for (Rank &rank : ranks) {
      cuCtxSetCurrent(rank.context);
      cuStreamDestroy(rank.stream);
      cuDevicePrimaryCtxRelease(rank.device);
    }
    cuCtxSetCurrent(nullptr);
    emu::clearFault();
  }

  void openRanks(int n) {
    for (int i = 0; i < n; ++i) {
      Rank rank;
      CU_OK(cuDeviceGet(&rank.device, i));
      CU_OK(cuDevicePrimaryCtxRetain(&rank.context, rank.device));
      CU_OK(cuCtxSetCurrent(rank.context));
      CU_OK(cuStreamCreate(&rank.stream, CU_STREAM_NON_BLOCKING));
      ranks.push_back(rank);
    }
  }

  /// ncclCommInitAll over devices 0..n-1, kept in `comms`.
  void initAll(int n) {
    openRanks(n);
    comms.assign(n, nullptr);
    std::vector<int> devices(n);
    for (int i = 0; i < n; ++i)
      devices[i] = i;
    NCCL_OK(ncclCommInitAll(comms.data(), n, devices.data()));
  }

  void *alloc(int rank, size_t bytes) {
    CUdeviceptr pointer = 0;
    cuCtxSetCurrent(ranks[rank].context);
    EXPECT_EQ(cuMemAlloc(&pointer, bytes), CUDA_SUCCESS);
    allocations.emplace_back(rank, pointer);
    return reinterpret_cast<void *>(uintptr_t(pointer));
  }

  void upload(int rank, void *device, const std::vector<std::byte> &host) {
    CU_OK(cuCtxSetCurrent(ranks[rank].context));
    CU_OK(cuMemcpyHtoD(CUdeviceptr(uintptr_t(device)), host.data(), host.size()));
    // From pageable memory the copy may end after it returns, on the legacy stream, which the
    // ranks' non-blocking streams do not wait for.
    CU_OK(cuCtxSynchronize());
  }

  /// Synchronizes the rank's stream, then copies `bytes` back.
  std::vector<std::byte> download(int rank, const void *device, size_t bytes) {
    std::vector<std::byte> host(bytes);
    cuCtxSetCurrent(ranks[rank].context);
    EXPECT_EQ(cuStreamSynchronize(ranks[rank].stream), CUDA_SUCCESS) << emu::lastFault();
    EXPECT_EQ(cuMemcpyDtoH(host.data(), CUdeviceptr(uintptr_t(device)), bytes), CUDA_SUCCESS);
    return host;
  }

  std::vector<Rank> ranks;
  std::vector<ncclComm_t> comms;
  std::vector<std::pair<int, CUdeviceptr>> allocations;
};

/// The documented result of `op` over `values` (one per rank, in rank order), exactly.
double reference(ncclRedOp_t op, const std::vector<double> &values) {
  double result = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    double x = values[i];
    result = op == ncclProd ? result * x
             : op == ncclMax ? std::max(result, x)
             : op == ncclMin ? std::min(result, x)
                             : result + x;
  }
  return op == ncclAvg ? result / double(values.size()) : result;
}

TEST_F(NcclEmu, VersionAndErrorStrings) {
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_GE(version, NCCL_VERSION(2, 10, 0)); // has ncclAvg
  for (int code = ncclSuccess; code <= ncclNumResults; ++code) {
    const char *text = ncclGetErrorString(ncclResult_t(code));
    ASSERT_NE(text, nullptr);
    EXPECT_GT(std::strlen(text), 0u);
  }
  EXPECT_STRNE(ncclGetErrorString(ncclInvalidArgument), ncclGetErrorString(ncclInvalidUsage));
}

// Every op on every dtype, 2 and 3 ranks, out of place and in place (sendbuff == recvbuff).
TEST_F(NcclEmu, AllReduceEveryOpAndTypeMatchesReference) {
  std::mt19937_64 random(freshSeed());
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    TearDown();
    ranks.clear(), comms.clear(), allocations.clear();
    initAll(n);
    for (ncclDataType_t type : kTypes)
      for (ncclRedOp_t op : kOps)
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE("type " + std::to_string(type) + " op " + std::to_string(op) +
                       (inPlace ? " in place" : " out of place"));
          size_t count = 1 + random() % 300, bytes = count * sizeOf(type);
          // Products of 3 stay exact in int8/uint8/bf16: |x| <= 4 signed, 0..6 unsigned.
          std::uniform_int_distribution<int> pick(isUnsigned(type) ? 0 : -4,
                                                  isUnsigned(type) ? 6 : 4);
          std::vector<std::vector<double>> values(n, std::vector<double>(count));
          std::vector<void *> send(n), recv(n);
          for (int r = 0; r < n; ++r) {
            std::vector<std::byte> host(bytes);
            for (size_t i = 0; i < count; ++i) {
              values[r][i] = pick(random);
              encode(type, values[r][i], host.data() + i * sizeOf(type));
            }
            send[r] = alloc(r, bytes);
            recv[r] = inPlace ? send[r] : alloc(r, bytes);
            upload(r, send[r], host);
          }
          NCCL_OK(ncclGroupStart());
          for (int r = 0; r < n; ++r)
            NCCL_OK(ncclAllReduce(send[r], recv[r], count, type, op, comms[r], ranks[r].stream));
          NCCL_OK(ncclGroupEnd());
          for (int r = 0; r < n; ++r) {
            std::vector<std::byte> out = download(r, recv[r], bytes);
            for (size_t i = 0; i < count; ++i) {
              std::vector<double> column;
              for (int q = 0; q < n; ++q)
                column.push_back(values[q][i]);
              double expected = reference(op, column);
              double got = decode(type, out.data() + i * sizeOf(type));
              // Average: floats within their precision; integers truncated or floored.
              double tolerance = op != ncclAvg          ? 0
                                 : !isFloat(type)       ? 1 - 1e-9
                                 : type == ncclFloat16  ? 1e-2
                                 : type == ncclBfloat16 ? 5e-2
                                 : type == ncclFloat32  ? 1e-5
                                                        : 1e-12;
              ASSERT_NEAR(got, expected, tolerance) << "rank " << r << " element " << i;
            }
          }
        }
  }
}

// Deterministic sums: f32 and f64 values of many magnitudes (so order changes the rounding)
// are summed in rank order, bit for bit, on every rank.
TEST_F(NcclEmu, AllReduceSumIsInRankOrder) {
  std::mt19937_64 random(freshSeed());
  initAll(3);
  size_t count = 4096;
  std::uniform_real_distribution<double> unit(-1, 1);
  std::uniform_int_distribution<int> scale(-30, 30);
  auto check = [&](auto zero, ncclDataType_t type) {
    using T = decltype(zero);
    std::vector<std::vector<T>> values(3, std::vector<T>(count));
    std::vector<void *> buffers(3);
    for (int r = 0; r < 3; ++r) {
      for (T &x : values[r])
        x = T(std::ldexp(unit(random), scale(random)));
      std::vector<std::byte> host(count * sizeof(T));
      std::memcpy(host.data(), values[r].data(), host.size());
      buffers[r] = alloc(r, host.size());
      upload(r, buffers[r], host);
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < 3; ++r)
      NCCL_OK(ncclAllReduce(buffers[r], buffers[r], count, type, ncclSum, comms[r],
                            ranks[r].stream));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < 3; ++r) {
      std::vector<std::byte> out = download(r, buffers[r], count * sizeof(T));
      for (size_t i = 0; i < count; ++i) {
        T expected = T(T(values[0][i] + values[1][i]) + values[2][i]);
        T got;
        std::memcpy(&got, out.data() + i * sizeof(T), sizeof(T));
        ASSERT_EQ(got, expected) << "rank " << r << " element " << i;
      }
    }
  };
  check(float(), ncclFloat32);
  check(double(), ncclFloat64);
}

// NCCL's CUDA graph support: a collective queued on a capturing stream is recorded, runs
// nothing then, and every launch of the graph runs it again as the communicator's next
// collective, on the data its buffers hold at that time. One rank replays while the other
// (on its own thread) calls ncclAllReduce directly: the graph's node and the call meet.
TEST_F(NcclEmu, ACapturedCollectiveRunsAtEachLaunchOfItsGraph) {
  std::mt19937_64 random(freshSeed());
  initAll(2);
  constexpr size_t kCount = 300;
  std::uniform_int_distribution<int> pick(-1000, 1000);
  void *buffers[2] = {alloc(0, kCount * 4), alloc(1, kCount * 4)};
  auto fill = [&](std::vector<float>(&values)[2]) {
    for (int r = 0; r < 2; ++r) {
      values[r].resize(kCount);
      for (float &x : values[r])
        x = float(pick(random)) / 8; // exact in f32, so is the sum
      std::vector<std::byte> host(kCount * 4);
      std::memcpy(host.data(), values[r].data(), host.size());
      upload(r, buffers[r], host);
    }
  };
  std::vector<float> values[2];
  fill(values);
  // Rank 0 captures a graph of its all-reduce; nothing runs, and nothing is waited for.
  CU_OK(cuCtxSetCurrent(ranks[0].context));
  CU_OK(cuStreamBeginCapture(ranks[0].stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  NCCL_OK(ncclAllReduce(buffers[0], buffers[0], kCount, ncclFloat32, ncclSum, comms[0],
                        ranks[0].stream));
  CUgraph graph = nullptr;
  CU_OK(cuStreamEndCapture(ranks[0].stream, &graph));
  CUgraphExec exec = nullptr;
  CU_OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  CU_OK(cuGraphDestroy(graph));
  std::vector<std::byte> untouched = download(0, buffers[0], kCount * 4);
  EXPECT_EQ(std::memcmp(untouched.data(), values[0].data(), kCount * 4), 0)
      << "the capture ran the collective";
  for (int launch = 0; launch < 3; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    if (launch > 0)
      fill(values);
    // A thread per rank, as without a group: rank 1's on a thread of its own.
    ncclResult_t direct = ncclInternalError;
    std::thread rank1([&] {
      cuCtxSetCurrent(ranks[1].context);
      direct = ncclAllReduce(buffers[1], buffers[1], kCount, ncclFloat32, ncclSum, comms[1],
                             ranks[1].stream);
    });
    CU_OK(cuCtxSetCurrent(ranks[0].context));
    CU_OK(cuGraphLaunch(exec, ranks[0].stream));
    rank1.join();
    NCCL_OK(direct);
    for (int r = 0; r < 2; ++r) {
      std::vector<std::byte> out = download(r, buffers[r], kCount * 4);
      for (size_t i = 0; i < kCount; ++i) {
        float got;
        std::memcpy(&got, out.data() + i * 4, 4);
        ASSERT_EQ(got, values[0][i] + values[1][i]) << "rank " << r << " element " << i;
      }
    }
  }
  CU_OK(cuCtxSetCurrent(ranks[0].context));
  CU_OK(cuGraphExecDestroy(exec));
}

// recvbuff holds every rank's sendcount elements in rank order; in place when sendbuff is
// recvbuff + rank * sendcount.
TEST_F(NcclEmu, AllGatherInPlaceAndOutOfPlace) {
  std::mt19937_64 random(freshSeed());
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    TearDown();
    ranks.clear(), comms.clear(), allocations.clear();
    initAll(n);
    for (ncclDataType_t type : {ncclInt8, ncclFloat32, ncclBfloat16, ncclFloat64})
      for (bool inPlace : {false, true}) {
        size_t count = 1 + random() % 500, bytes = count * sizeOf(type);
        std::vector<std::vector<std::byte>> inputs(n, std::vector<std::byte>(bytes));
        std::vector<void *> send(n), recv(n);
        for (int r = 0; r < n; ++r) {
          for (std::byte &b : inputs[r])
            b = std::byte(random());
          recv[r] = alloc(r, bytes * n);
          send[r] = inPlace ? static_cast<std::byte *>(recv[r]) + r * bytes : alloc(r, bytes);
          upload(r, send[r], inputs[r]);
        }
        NCCL_OK(ncclGroupStart());
        for (int r = 0; r < n; ++r)
          NCCL_OK(ncclAllGather(send[r], recv[r], count, type, comms[r], ranks[r].stream));
        NCCL_OK(ncclGroupEnd());
        for (int r = 0; r < n; ++r) {
          std::vector<std::byte> out = download(r, recv[r], bytes * n);
          for (int q = 0; q < n; ++q)
            ASSERT_EQ(std::memcmp(out.data() + q * bytes, inputs[q].data(), bytes), 0)
                << "rank " << r << " block " << q << (inPlace ? " in place" : "");
        }
      }
  }
}

// One thread per rank, each on its own device, joining with a shared unique id (the call
// blocks until all have joined), then an all-reduce each thread issues for its own rank.
TEST_F(NcclEmu, CommInitRankFromThreads) {
  std::mt19937_64 random(freshSeed());
  const int n = 3;
  openRanks(n);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  size_t count = 1000;
  std::vector<std::vector<int32_t>> inputs(n, std::vector<int32_t>(count));
  for (auto &input : inputs)
    for (int32_t &x : input)
      x = int32_t(random() % 2001) - 1000;
  std::vector<void *> buffers(n);
  for (int r = 0; r < n; ++r) {
    buffers[r] = alloc(r, count * 4);
    std::vector<std::byte> host(count * 4);
    std::memcpy(host.data(), inputs[r].data(), host.size());
    upload(r, buffers[r], host);
  }
  comms.assign(n, nullptr);
  std::vector<ncclResult_t> results(n, ncclInternalError);
  std::vector<std::vector<int32_t>> outputs(n, std::vector<int32_t>(count));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cuCtxSetCurrent(ranks[r].context);
      results[r] = ncclCommInitRank(&comms[r], n, id, r);
      if (results[r] != ncclSuccess)
        return;
      ncclResult_t state = ncclInternalError;
      EXPECT_EQ(ncclCommGetAsyncError(comms[r], &state), ncclSuccess);
      EXPECT_EQ(state, ncclSuccess);
      results[r] = ncclAllReduce(buffers[r], buffers[r], count, ncclInt32, ncclSum, comms[r],
                                 ranks[r].stream);
      EXPECT_EQ(cuStreamSynchronize(ranks[r].stream), CUDA_SUCCESS);
      EXPECT_EQ(cuMemcpyDtoH(outputs[r].data(), CUdeviceptr(uintptr_t(buffers[r])), count * 4),
                CUDA_SUCCESS);
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], ncclSuccess) << "rank " << r << ": " << ncclGetLastError(nullptr);
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(outputs[r][i], inputs[0][i] + inputs[1][i] + inputs[2][i]) << "rank " << r;
  }
  for (ncclComm_t &comm : comms) {
    NCCL_OK(ncclCommDestroy(comm));
    comm = nullptr;
  }
}

// One thread initialising every rank: ncclCommInitRank inside a group completes at
// ncclGroupEnd, with each rank on the device current at its call.
TEST_F(NcclEmu, CommInitRankInGroupFromOneThread) {
  const int n = 2;
  openRanks(n);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  comms.assign(n, nullptr);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    CU_OK(cuCtxSetCurrent(ranks[r].context));
    NCCL_OK(ncclCommInitRank(&comms[r], n, id, r));
  }
  NCCL_OK(ncclGroupEnd());
  std::vector<void *> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    ncclResult_t state = ncclInternalError;
    NCCL_OK(ncclCommGetAsyncError(comms[r], &state));
    EXPECT_EQ(state, ncclSuccess);
    send[r] = alloc(r, 8);
    recv[r] = alloc(r, 16);
    std::vector<std::byte> host(8);
    encode(ncclFloat64, 10.5 + r, host.data());
    upload(r, send[r], host);
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    NCCL_OK(ncclAllGather(send[r], recv[r], 1, ncclFloat64, comms[r], ranks[r].stream));
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    std::vector<std::byte> out = download(r, recv[r], 16);
    EXPECT_EQ(decode(ncclFloat64, out.data()), 10.5);
    EXPECT_EQ(decode(ncclFloat64, out.data() + 8), 11.5);
  }
}

// The k-th collective of each rank is one collective: ranks disagreeing on its count fail it
// (a fault naming both counts) instead of reading past a buffer.
TEST_F(NcclEmu, RanksDisagreeingOnCountFail) {
  initAll(2);
  void *a = alloc(0, 64), *b = alloc(1, 64);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(a, a, 16, ncclFloat32, ncclSum, comms[0], ranks[0].stream));
  NCCL_OK(ncclAllReduce(b, b, 8, ncclFloat32, ncclSum, comms[1], ranks[1].stream));
  NCCL_OK(ncclGroupEnd());
  CU_OK(cuCtxSetCurrent(ranks[0].context));
  EXPECT_NE(cuStreamSynchronize(ranks[0].stream), CUDA_SUCCESS);
  EXPECT_CONTAINS(emu::lastFault(), "x16");
  EXPECT_CONTAINS(emu::lastFault(), "x8");
  ncclResult_t state = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comms[1], &state));
  EXPECT_EQ(state, ncclInvalidUsage);
  EXPECT_CONTAINS(std::string(ncclGetLastError(comms[1])), "count");
}

// A rank whose peer never issues its part: ncclCommAbort returns at once and ends the
// collective, so the rank's stream drains; the peer's communicator reports the failure.
TEST_F(NcclEmu, AbortEndsCollectiveWhosePeerNeverArrives) {
  initAll(2);
  void *a = alloc(0, 256);
  NCCL_OK(ncclAllReduce(a, a, 64, ncclFloat32, ncclSum, comms[0], ranks[0].stream));
  CU_OK(cuCtxSetCurrent(ranks[0].context));
  EXPECT_EQ(cuStreamQuery(ranks[0].stream), CUDA_ERROR_NOT_READY);
  ncclComm_t aborted = comms[0];
  comms[0] = nullptr;
  std::optional<ncclResult_t> abort =
      within<ncclResult_t>(10, [aborted] { return ncclCommAbort(aborted); });
  ASSERT_TRUE(abort.has_value()) << "ncclCommAbort hangs";
  EXPECT_EQ(*abort, ncclSuccess);
  CUstream stream = ranks[0].stream;
  CUcontext context = ranks[0].context;
  std::optional<CUresult> drained = within<CUresult>(10, [=] {
    cuCtxSetCurrent(context);
    return cuStreamSynchronize(stream);
  });
  ASSERT_TRUE(drained.has_value()) << "the aborted collective still blocks its stream";
  EXPECT_EQ(*drained, CUDA_SUCCESS);
  ncclResult_t state = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comms[1], &state));
  EXPECT_NE(state, ncclSuccess);
  EXPECT_NE(state, ncclInProgress);
  void *b = alloc(1, 256);
  EXPECT_NE(ncclAllReduce(b, b, 64, ncclFloat32, ncclSum, comms[1], ranks[1].stream),
            ncclSuccess);
}

// ncclCommInitRank for a rank whose peers never join gives up (after
// SMELT_EMUCUDA_NCCL_TIMEOUT) with a reason, instead of blocking forever.
TEST_F(NcclEmu, InitRankGivesUpWhenPeerNeverJoins) {
  openRanks(1);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  const char *previous = std::getenv("SMELT_EMUCUDA_NCCL_TIMEOUT");
  std::string saved = previous ? previous : "";
  setenv("SMELT_EMUCUDA_NCCL_TIMEOUT", "1", 1);
  CUcontext context = ranks[0].context;
  using Outcome = std::pair<ncclResult_t, std::string>;
  std::optional<Outcome> outcome = within<Outcome>(20, [=] {
    cuCtxSetCurrent(context);
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclCommInitRank(&comm, 2, id, 0);
    return Outcome{result, ncclGetLastError(comm)};
  });
  if (previous)
    setenv("SMELT_EMUCUDA_NCCL_TIMEOUT", saved.c_str(), 1);
  else
    unsetenv("SMELT_EMUCUDA_NCCL_TIMEOUT");
  ASSERT_TRUE(outcome.has_value()) << "ncclCommInitRank hangs";
  EXPECT_EQ(outcome->first, ncclSystemError);
  EXPECT_CONTAINS(outcome->second, "rank(s) 1");
}

// Ranks in two processes: the test's rank 0 and a forked and exec'ed emucuda-nccl-peer
// (NcclPeer.cpp) as rank 1, each with its own emulated driver, meeting through the id's
// rendezvous in /dev/shm.

/// Starts emucuda-nccl-peer as rank 1 of 2 of `id` in `mode`.
pid_t startPeer(const ncclUniqueId &id, const char *mode) {
  std::string hex = smelt::emucuda::nccl_peer::idToHex(id);
  std::vector<std::string> words = {EMUCUDA_NCCL_PEER, hex, "2", "1", mode};
  std::vector<char *> argv;
  for (std::string &word : words)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t child = fork(); // then only exec: the child starts its own emulation from nothing
  if (child == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  return child;
}

/// The peer's exit status, or -1 when it has not exited within `seconds` (then it is killed).
int peerExit(pid_t child, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The rendezvous files of ids this process made that are still in /dev/shm.
std::vector<std::string> leftRendezvous() {
  std::vector<std::string> left;
  std::string prefix = "smelt-emu-nccl-" + std::to_string(getpid()) + "-";
  if (DIR *dir = opendir("/dev/shm")) {
    while (dirent *entry = readdir(dir))
      if (std::string(entry->d_name).rfind(prefix, 0) == 0)
        left.push_back(entry->d_name);
    closedir(dir);
  }
  return left;
}

/// Sets SMELT_EMUCUDA_NCCL_TIMEOUT for a test, then puts it back.
struct PeerTimeout {
  explicit PeerTimeout(const char *seconds) {
    if (const char *previous = std::getenv("SMELT_EMUCUDA_NCCL_TIMEOUT"))
      saved = previous;
    setenv("SMELT_EMUCUDA_NCCL_TIMEOUT", seconds, 1);
  }
  ~PeerTimeout() {
    if (saved)
      setenv("SMELT_EMUCUDA_NCCL_TIMEOUT", saved->c_str(), 1);
    else
      unsetenv("SMELT_EMUCUDA_NCCL_TIMEOUT");
  }
  std::optional<std::string> saved;
};

/// Starts emucuda-nccl-peer in `mode` as rank 1 of a new id (its pid in `child`) and joins the
/// id as rank 0 of 2 on device 0, kept in `comms`.
#define JOIN_WITH_PEER(child, mode)                                                          \
  openRanks(1);                                                                              \
  ncclUniqueId peerId;                                                                       \
  NCCL_OK(ncclGetUniqueId(&peerId));                                                         \
  pid_t child = startPeer(peerId, mode);                                                     \
  ASSERT_GT(child, 0);                                                                       \
  comms.assign(1, nullptr);                                                                  \
  CU_OK(cuCtxSetCurrent(ranks[0].context));                                                  \
  NCCL_OK(ncclCommInitRank(&comms[0], 2, peerId, 0))

// The peer's all-reduce (more than one round of the rendezvous) and all-gather give every rank
// the one-process answer, bit for bit (the sum in rank order); nothing is left in /dev/shm.
TEST_F(NcclEmu, RankOfAnotherProcessJoinsAndAllReduces) {
  namespace peer = smelt::emucuda::nccl_peer;
  PeerTimeout timeout("60");
  JOIN_WITH_PEER(child, "agree");
  EXPECT_TRUE(leftRendezvous().empty()) << "the rendezvous' name outlived the joining";

  size_t count = peer::kAllReduceCount;
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = peer::allReduceInput(0, i);
  void *buffer = alloc(0, count * 4);
  std::vector<std::byte> host(count * 4);
  std::memcpy(host.data(), values.data(), host.size());
  upload(0, buffer, host);
  NCCL_OK(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comms[0], ranks[0].stream));
  std::vector<std::byte> reduced = download(0, buffer, count * 4);
  std::memcpy(values.data(), reduced.data(), reduced.size());
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(values[i], peer::allReduceInput(0, i) + peer::allReduceInput(1, i)) << i;

  size_t gathered = peer::kAllGatherCount;
  void *send = alloc(0, gathered * 4), *recv = alloc(0, 2 * gathered * 4);
  std::vector<std::byte> mine(gathered * 4);
  for (size_t i = 0; i < gathered; ++i) {
    int32_t x = peer::allGatherInput(0, i);
    std::memcpy(mine.data() + i * 4, &x, 4);
  }
  upload(0, send, mine);
  NCCL_OK(ncclAllGather(send, recv, gathered, ncclInt32, comms[0], ranks[0].stream));
  std::vector<std::byte> everyone = download(0, recv, 2 * gathered * 4);
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < gathered; ++i) {
      int32_t x;
      std::memcpy(&x, everyone.data() + (size_t(r) * gathered + i) * 4, 4);
      ASSERT_EQ(x, peer::allGatherInput(r, i)) << "rank " << r << ", element " << i;
    }
  NCCL_OK(ncclCommDestroy(comms[0]));
  comms[0] = nullptr;
  EXPECT_EQ(peerExit(child, 60), 0) << "the peer's results (its stderr says why)";
  EXPECT_TRUE(leftRendezvous().empty());
}

// Ranks of two processes issuing different counts: each fails the collective with a message
// naming both (the peer checks its own).
TEST_F(NcclEmu, RanksOfTwoProcessesDisagreeingFailNamingBoth) {
  PeerTimeout timeout("60");
  JOIN_WITH_PEER(child, "disagree");
  size_t count = smelt::emucuda::nccl_peer::kAllReduceCount;
  void *buffer = alloc(0, count * 4);
  NCCL_OK(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comms[0], ranks[0].stream));
  CU_OK(cuCtxSetCurrent(ranks[0].context));
  EXPECT_NE(cuStreamSynchronize(ranks[0].stream), CUDA_SUCCESS);
  EXPECT_CONTAINS(emu::lastFault(), "x1300000");
  EXPECT_CONTAINS(emu::lastFault(), "x650000");
  ncclResult_t state = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comms[0], &state));
  EXPECT_EQ(state, ncclInvalidUsage);
  EXPECT_EQ(peerExit(child, 60), 0) << "the peer's side (its stderr says why)";
}

// A peer process that exits without issuing its part: the collective fails at once (not at the
// timeout), naming the process.
TEST_F(NcclEmu, PeerProcessThatExitsFailsTheCollective) {
  PeerTimeout timeout("60");
  JOIN_WITH_PEER(child, "exit");
  void *buffer = alloc(0, 256);
  NCCL_OK(ncclAllReduce(buffer, buffer, 64, ncclFloat32, ncclSum, comms[0], ranks[0].stream));
  CUstream stream = ranks[0].stream;
  CUcontext context = ranks[0].context;
  auto begin = std::chrono::steady_clock::now();
  std::optional<CUresult> synced = within<CUresult>(20, [=] {
    cuCtxSetCurrent(context);
    return cuStreamSynchronize(stream);
  });
  ASSERT_TRUE(synced.has_value()) << "a collective whose peer process died hangs";
  EXPECT_NE(*synced, CUDA_SUCCESS);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
  EXPECT_CONTAINS(emu::lastFault(), "exited");
  EXPECT_EQ(peerExit(child, 10), 3);
}

// ncclCommAbort ends a collective waiting for a peer process that never issues its part.
TEST_F(NcclEmu, AbortEndsCollectiveWaitingForAnotherProcess) {
  PeerTimeout timeout("60");
  JOIN_WITH_PEER(child, "idle");
  void *buffer = alloc(0, 256);
  NCCL_OK(ncclAllReduce(buffer, buffer, 64, ncclFloat32, ncclSum, comms[0], ranks[0].stream));
  CUstream stream = ranks[0].stream;
  CUcontext context = ranks[0].context;
  auto synced = std::make_shared<std::promise<CUresult>>();
  std::future<CUresult> result = synced->get_future();
  std::thread([=] { // blocks in the rendezvous, waiting for rank 1
    cuCtxSetCurrent(context);
    synced->set_value(cuStreamSynchronize(stream));
  }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ncclComm_t aborted = comms[0];
  comms[0] = nullptr;
  std::optional<ncclResult_t> abort =
      within<ncclResult_t>(10, [aborted] { return ncclCommAbort(aborted); });
  ASSERT_TRUE(abort.has_value()) << "ncclCommAbort hangs";
  EXPECT_EQ(*abort, ncclSuccess);
  ASSERT_EQ(result.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the aborted collective still waits for the other process";
  EXPECT_EQ(result.get(), CUDA_SUCCESS);
  EXPECT_EQ(peerExit(child, 0), -1); // still idle: killed
  EXPECT_TRUE(leftRendezvous().empty());
}

// What NCCL documents as invalid arguments (ncclInvalidArgument) and misuse (ncclInvalidUsage),
// each with a reason in ncclGetLastError.
TEST_F(NcclEmu, InvalidArgumentsAndUsageAreRejected) {
  int devices = 0;
  CU_OK(cuDeviceGetCount(&devices));
  auto expect = [](ncclResult_t got, ncclResult_t want, const char *what) {
    EXPECT_EQ(got, want) << what;
    EXPECT_GT(std::strlen(ncclGetLastError(nullptr)), 0u) << what;
  };
  expect(ncclGetVersion(nullptr), ncclInvalidArgument, "ncclGetVersion(NULL)");
  expect(ncclGetUniqueId(nullptr), ncclInvalidArgument, "ncclGetUniqueId(NULL)");
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t comm = nullptr;
  expect(ncclCommInitRank(nullptr, 2, id, 0), ncclInvalidArgument, "InitRank comm NULL");
  expect(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "InitRank nranks 0");
  expect(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, "InitRank rank == nranks");
  expect(ncclCommInitRank(&comm, 2, id, -1), ncclInvalidArgument, "InitRank rank -1");
  ncclUniqueId zero{};
  EXPECT_NE(ncclCommInitRank(&comm, 2, zero, 0), ncclSuccess) << "an id not from GetUniqueId";
  ncclComm_t pair[2] = {};
  int badDevice[2] = {0, devices}, twice[2] = {1, 1};
  expect(ncclCommInitAll(nullptr, 2, nullptr), ncclInvalidArgument, "InitAll comm NULL");
  expect(ncclCommInitAll(pair, 0, nullptr), ncclInvalidArgument, "InitAll ndev 0");
  expect(ncclCommInitAll(pair, devices + 1, nullptr), ncclInvalidArgument, "InitAll too many");
  expect(ncclCommInitAll(pair, 2, badDevice), ncclInvalidArgument, "InitAll bad device");
  expect(ncclCommInitAll(pair, 2, twice), ncclInvalidUsage, "InitAll duplicate device");
  expect(ncclGroupEnd(), ncclInvalidUsage, "GroupEnd without GroupStart");

  initAll(2);
  void *buffer = alloc(0, 64);
  float host[16];
  CUstream stream = ranks[0].stream;
  expect(ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclSum, nullptr, stream),
         ncclInvalidArgument, "AllReduce comm NULL");
  expect(ncclAllReduce(buffer, buffer, 16, ncclNumTypes, ncclSum, comms[0], stream),
         ncclInvalidArgument, "AllReduce bad type");
  expect(ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclNumOps, comms[0], stream),
         ncclInvalidArgument, "AllReduce bad op");
  expect(ncclAllReduce(nullptr, buffer, 16, ncclFloat32, ncclSum, comms[0], stream),
         ncclInvalidArgument, "AllReduce sendbuff NULL");
  expect(ncclAllReduce(buffer, nullptr, 16, ncclFloat32, ncclSum, comms[0], stream),
         ncclInvalidArgument, "AllReduce recvbuff NULL");
  expect(ncclAllReduce(host, buffer, 16, ncclFloat32, ncclSum, comms[0], stream),
         ncclInvalidArgument, "AllReduce host sendbuff");
  expect(ncclAllReduce(buffer, buffer, 1000, ncclFloat32, ncclSum, comms[0], stream),
         ncclInvalidArgument, "AllReduce count past the allocation");
  expect(ncclAllGather(buffer, buffer, 16, ncclFloat32, comms[0], stream), ncclInvalidArgument,
         "AllGather recvbuff smaller than nranks * sendcount");
  expect(ncclAllGather(buffer, buffer, 8, ncclNumTypes, comms[0], stream), ncclInvalidArgument,
         "AllGather bad type");
  ncclResult_t state;
  expect(ncclCommGetAsyncError(comms[0], nullptr), ncclInvalidArgument, "GetAsyncError NULL");
  expect(ncclCommGetAsyncError(nullptr, &state), ncclInvalidArgument, "GetAsyncError comm NULL");

  // A call failing inside a group fails the group.
  NCCL_OK(ncclGroupStart());
  expect(ncclAllReduce(buffer, buffer, 16, ncclNumTypes, ncclSum, comms[0], stream),
         ncclInvalidArgument, "AllReduce bad type in a group");
  expect(ncclGroupEnd(), ncclInvalidArgument, "GroupEnd of a group with a failed call");
  // One thread issuing for two ranks must group the calls (NCCL documents a deadlock).
  void *other = alloc(1, 64);
  NCCL_OK(ncclAllReduce(buffer, buffer, 16, ncclFloat32, ncclSum, comms[0], stream));
  expect(ncclAllReduce(other, other, 16, ncclFloat32, ncclSum, comms[1], ranks[1].stream),
         ncclInvalidUsage, "one thread, two ranks, no group");
  // (rank 0's collective never gets its peer: TearDown's abort ends it.)
}

// A unique id makes one communicator; ranks must be unique and on distinct devices.
TEST_F(NcclEmu, UniqueIdMisuseIsRejected) {
  openRanks(2);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  comms.assign(2, nullptr);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < 2; ++r) {
    CU_OK(cuCtxSetCurrent(ranks[r].context));
    NCCL_OK(ncclCommInitRank(&comms[r], 2, id, r));
  }
  NCCL_OK(ncclGroupEnd());
  ncclComm_t again = nullptr;
  EXPECT_EQ(ncclCommInitRank(&again, 2, id, 0), ncclInvalidUsage) << "a used id";

  NCCL_OK(ncclGetUniqueId(&id));
  std::vector<ncclComm_t> same(2, nullptr);
  CU_OK(cuCtxSetCurrent(ranks[0].context));
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclCommInitRank(&same[0], 2, id, 0));
  NCCL_OK(ncclCommInitRank(&same[1], 2, id, 1));
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "two ranks on one device";
  EXPECT_CONTAINS(std::string(ncclGetLastError(nullptr)), "Duplicate GPU");
  for (ncclComm_t comm : same)
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

} // namespace
