// Known-answer tests of the emulated driver, from the driver API reference: what the device
// reports, memory and its misuse, the synchronization each kind of copy documents, stream and
// event ordering under the late schedule, and kernels built from a registered source.
#include "EmuCuda.h"

#include <gtest/gtest.h>

#include <cuda.h>
#include <nvrtc.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <openssl/sha.h>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using smelt::emucuda::Schedule;

class EmuDriver : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
    smelt::emucuda::clearFault();
  }
  void TearDown() override {
    cuCtxSynchronize();
    smelt::emucuda::clearFault();
    cuDevicePrimaryCtxRelease(0);
  }
  static bool late() { return smelt::emucuda::schedule() == Schedule::Late; }
  CUcontext context_ = nullptr;
};

TEST_F(EmuDriver, ReportsAnH100) {
  int count = 0, major = 0, minor = 0, sms = 0, threads = 0;
  ASSERT_EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_GE(count, 2);
  EXPECT_EQ(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(major * 10 + minor, 90);
  EXPECT_EQ(sms, 132);
  EXPECT_EQ(threads, 1024);
  char name[128];
  ASSERT_EQ(cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
  EXPECT_NE(std::string(name).find("H100"), std::string::npos);
  size_t total = 0;
  ASSERT_EQ(cuDeviceTotalMem(&total, 0), CUDA_SUCCESS);
  EXPECT_GT(total, size_t(79) << 30);
  CUdevice device;
  EXPECT_EQ(cuDeviceGet(&device, count), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  const char *text = nullptr;
  EXPECT_EQ(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(cuGetErrorName(CUresult(123456), &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(text, nullptr);
}

TEST_F(EmuDriver, MemoryIsCountedAndChecked) {
  size_t free0 = 0, total = 0, free1 = 0;
  ASSERT_EQ(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc(&a, 1000), CUDA_SUCCESS);
  EXPECT_EQ(a % 256, 0u);
  ASSERT_EQ(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free0 - free1, 1024u); // rounded to 256 bytes
  EXPECT_EQ(cuMemAlloc(&a, 0), CUDA_ERROR_INVALID_VALUE);
  std::vector<char> host(2000, 1);
  EXPECT_EQ(cuMemcpyHtoD(a, host.data(), 1001), CUDA_ERROR_INVALID_VALUE); // past the end
  EXPECT_EQ(cuMemcpyHtoD(a + 8, host.data(), 992), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(a), CUDA_ERROR_INVALID_VALUE); // twice
  EXPECT_NE(smelt::emucuda::checkRange(reinterpret_cast<void *>(a), 4).find("freed"),
            std::string::npos);
  CUdeviceptr huge = 0;
  EXPECT_EQ(cuMemAlloc(&huge, size_t(100) << 30), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
  EXPECT_EQ(free1, free0);
}

TEST_F(EmuDriver, HostTouchOfDeviceMemoryDies) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc(&a, 64), CUDA_SUCCESS);
  EXPECT_DEATH(
      {
        volatile float *p = reinterpret_cast<float *>(a);
        (void)p[3];
      },
      "the host touched device memory");
  cuMemFree(a);
}

TEST_F(EmuDriver, CopiesOnTheLegacyStreamRoundTrip) {
  std::mt19937 random(std::random_device{}());
  std::vector<float> in(4099), out(4099);
  for (float &v : in)
    v = std::uniform_real_distribution<float>(-1, 1)(random);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, in.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, in.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(a, in.data(), in.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoD(b, a, in.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), b, out.size() * 4), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  cuMemFree(a);
  cuMemFree(b);
}

// "For transfers from pageable host memory to device memory ... the DMA to final destination
// may not have completed" when cuMemcpyHtoD returns, and a non-blocking stream does not wait
// for the legacy stream: reading there right after is a race the late schedule loses.
TEST_F(EmuDriver, PageableCopyIsNotOrderedWithANonBlockingStream) {
  if (!late())
    GTEST_SKIP() << "the late schedule shows the race";
  std::vector<float> ones(256, 1.0f), seen(256, 0.0f);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc(&a, 1024), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8Async(a, 0, 1024, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(a, ones.data(), 1024), CUDA_SUCCESS);
  void *pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, 1024), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(pinned, a, 1024, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  std::memcpy(seen.data(), pinned, 1024);
  EXPECT_EQ(seen[0], 0.0f) << "the copy on the legacy stream landed before it had to";
  // Synchronizing the context orders everything: now the value is there.
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(seen.data(), a, 1024), CUDA_SUCCESS);
  EXPECT_EQ(seen, ones);
  cuMemFreeHost(pinned);
  cuStreamDestroy(stream);
  cuMemFree(a);
}

// An async copy from pinned memory reads its source when it runs, not at the call.
TEST_F(EmuDriver, PinnedAsyncCopyReadsItsSourceLate) {
  if (!late())
    GTEST_SKIP() << "the late schedule shows it";
  void *pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, 64), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc(&a, 64), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  std::memset(pinned, 1, 64);
  ASSERT_EQ(cuMemcpyHtoDAsync(a, pinned, 64, stream), CUDA_SUCCESS);
  std::memset(pinned, 2, 64); // too early: the copy has not run
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  unsigned char back[64];
  ASSERT_EQ(cuMemcpyDtoH(back, a, 64), CUDA_SUCCESS);
  EXPECT_EQ(back[0], 2);
  cuMemFreeHost(pinned);
  cuStreamDestroy(stream);
  cuMemFree(a);
}

// Two non-blocking streams are ordered only through an event: without the wait the reader runs
// first under the late schedule; with it, always after.
TEST_F(EmuDriver, EventsOrderStreams) {
  CUstream writer, reader;
  ASSERT_EQ(cuStreamCreate(&writer, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&reader, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, 256), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&b, 256), CUDA_SUCCESS);
  CUevent written;
  ASSERT_EQ(cuEventCreate(&written, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  for (bool wait : {false, true}) {
    ASSERT_EQ(cuMemsetD8Async(a, 0, 256, writer), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD8Async(b, 0, 256, writer), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(writer), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD8Async(a, 7, 256, writer), CUDA_SUCCESS);
    ASSERT_EQ(cuEventRecord(written, writer), CUDA_SUCCESS);
    if (wait)
      ASSERT_EQ(cuStreamWaitEvent(reader, written, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoDAsync(b, a, 256, reader), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(reader), CUDA_SUCCESS);
    unsigned char back[256];
    ASSERT_EQ(cuMemcpyDtoH(back, b, 256), CUDA_SUCCESS);
    if (wait)
      EXPECT_EQ(back[0], 7);
    else if (late())
      EXPECT_EQ(back[0], 0) << "the reader saw the writer's work without waiting for it";
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  }
  cuEventDestroy(written);
  cuStreamDestroy(writer);
  cuStreamDestroy(reader);
  cuMemFree(a);
  cuMemFree(b);
}

// A poll makes progress but never sees work done before it is.
TEST_F(EmuDriver, EventQueryPollsToCompletion) {
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc(&a, 1 << 20), CUDA_SUCCESS);
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(cuMemsetD8Async(a, i, 1 << 20, stream), CUDA_SUCCESS);
  CUevent done;
  ASSERT_EQ(cuEventCreate(&done, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(done, stream), CUDA_SUCCESS);
  int polls = 0;
  CUresult r;
  while ((r = cuEventQuery(done)) == CUDA_ERROR_NOT_READY)
    ++polls;
  EXPECT_EQ(r, CUDA_SUCCESS);
  if (late())
    EXPECT_GE(polls, 1);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_SUCCESS);
  cuEventDestroy(done);
  cuStreamDestroy(stream);
  cuMemFree(a);
}

// The emulation counts what crosses between host and device and how often the host waits.
TEST_F(EmuDriver, CountsTrafficAndHostWaits) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc(&a, 4096), CUDA_SUCCESS);
  void *pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, 4096), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  std::vector<char> pageable(4096, 3);
  smelt::emucuda::resetTraffic();
  ASSERT_EQ(cuMemcpyHtoD(a, pageable.data(), 1000), CUDA_SUCCESS);        // waits
  ASSERT_EQ(cuMemcpyHtoDAsync(a, pinned, 24, stream), CUDA_SUCCESS);      // does not
  ASSERT_EQ(cuMemcpyDtoHAsync(pinned, a, 512, stream), CUDA_SUCCESS);     // does not
  ASSERT_EQ(cuMemcpyDtoHAsync(pageable.data(), a, 8, stream), CUDA_SUCCESS); // pageable: waits
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);                   // waits
  smelt::emucuda::Traffic t = smelt::emucuda::traffic();
  EXPECT_EQ(t.toDevice, 1024u);
  EXPECT_EQ(t.toDeviceCopies, 2u);
  EXPECT_EQ(t.toHost, 520u);
  EXPECT_EQ(t.toHostCopies, 2u);
  EXPECT_EQ(t.hostWaits, 3u);
  EXPECT_EQ(t.launches, 0u);
  cuStreamDestroy(stream);
  cuMemFreeHost(pinned);
  cuMemFree(a);
}

// Stream capture, as the driver's global mode has it: what a graph cannot hold (a synchronize,
// a synchronous or pageable copy, an event, legacy-stream work on the device) fails and ends the
// capture invalidated; the legacy stream itself cannot be captured.
TEST_F(EmuDriver, CaptureRefusesWhatAGraphCannotHold) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc(&a, 256), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  EXPECT_EQ(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_ILLEGAL_STATE);
  std::vector<char> pageable(256, 1);
  std::vector<char> threes(256, 3);
  ASSERT_EQ(cuMemcpyHtoD(a, threes.data(), 256), CUDA_SUCCESS);
  CUevent event;
  ASSERT_EQ(cuEventCreate(&event, 0), CUDA_SUCCESS);
  struct Case {
    const char *what;
    std::function<CUresult()> call;
    CUresult refused;
  };
  std::vector<Case> cases = {
      {"a synchronize", [&] { return cuStreamSynchronize(stream); },
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
      {"a query", [&] { return cuStreamQuery(stream); }, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
      {"a pageable async copy", [&] { return cuMemcpyHtoDAsync(a, pageable.data(), 256, stream); },
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
      {"an event", [&] { return cuEventRecord(event, stream); },
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
      {"legacy-stream work", [&] { return cuMemsetD8Async(a, 0, 256, nullptr); },
       CUDA_ERROR_STREAM_CAPTURE_IMPLICIT},
      {"a device synchronize", [&] { return cuCtxSynchronize(); },
       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
              CUDA_ERROR_ILLEGAL_STATE);
    ASSERT_EQ(cuMemsetD8Async(a, 7, 256, stream), CUDA_SUCCESS); // recorded, not run
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    ASSERT_EQ(cuStreamIsCapturing(stream, &status), CUDA_SUCCESS);
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    // A pageable copy is refused without breaking the capture in the driver; the others break it.
    bool breaks = std::string(c.what) != "a pageable async copy";
    EXPECT_EQ(c.call(), c.refused);
    ASSERT_EQ(cuStreamIsCapturing(stream, &status), CUDA_SUCCESS);
    EXPECT_EQ(status,
              breaks ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE);
    graph = reinterpret_cast<CUgraph>(1);
    EXPECT_EQ(cuStreamEndCapture(stream, &graph),
              breaks ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS);
    EXPECT_EQ(graph == nullptr, breaks);
    if (graph)
      cuGraphDestroy(graph);
    ASSERT_EQ(cuStreamIsCapturing(stream, &status), CUDA_SUCCESS);
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  }
  // Nothing captured ever ran (nor did the refused legacy memset): `a` holds what it held.
  unsigned char back[256];
  ASSERT_EQ(cuMemcpyDtoH(back, a, 256), CUDA_SUCCESS);
  EXPECT_EQ(back[255], 3);
  cuEventDestroy(event);
  cuStreamDestroy(stream);
  cuMemFree(a);
}

/// A module image and its source, registered as codegen registers NVRTC's output: the image's
/// SHA-256 names the source in $SMELT_CUDA_SOURCE_DIR.
class EmuKernels : public EmuDriver {
protected:
  void SetUp() override {
    EmuDriver::SetUp();
    folder_ = ::testing::TempDir() + "emucuda-kernels-" + std::to_string(getpid());
    std::string mkdir = "mkdir -p '" + folder_ + "'";
    ASSERT_EQ(std::system(mkdir.c_str()), 0);
    setenv("SMELT_CUDA_SOURCE_DIR", folder_.c_str(), 1);
  }
  // The folder goes with the test: every run left one behind in the temporary directory.
  void TearDown() override {
    std::filesystem::remove_all(folder_);
    EmuDriver::TearDown();
  }
  void registerSource(const std::string &image, const std::string &source) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char *>(image.data()), image.size(), digest);
    std::string hex;
    for (unsigned char byte : digest) {
      hex += "0123456789abcdef"[byte >> 4];
      hex += "0123456789abcdef"[byte & 15];
    }
    std::ofstream(folder_ + "/" + hex + ".cu") << source;
  }
  /// Registers kScaleSource as `image`, loads it and finds scale_by_two.
  void loadScale(const std::string &image, CUmodule &module, CUfunction &function);
  std::string folder_;
};

const char *kScaleSource = R"(
typedef long long int64_t;
extern "C" __global__ void __launch_bounds__(128) scale_by_two(const float *__restrict__ x,
                                                               float *__restrict__ y) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < 1000)
    y[i] = 2.0f * x[i];
}
)";

void EmuKernels::loadScale(const std::string &image, CUmodule &module, CUfunction &function) {
  registerSource(image, kScaleSource);
  ASSERT_EQ(cuModuleLoadData(&module, image.c_str()), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&function, module, "scale_by_two"), CUDA_SUCCESS);
}

TEST_F(EmuKernels, LaunchRunsTheRegisteredSource) {
  std::string image = "// PTX of scale_by_two (a stand-in: the driver only hashes it)\n";
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  ASSERT_NO_FATAL_FAILURE(loadScale(image, module, function));
  EXPECT_EQ(cuModuleGetFunction(&function, module, "missing"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cuModuleGetFunction(&function, module, "scale_by_two"), CUDA_SUCCESS);

  std::mt19937 random(std::random_device{}());
  std::vector<float> x(1000), y(1000);
  for (float &v : x)
    v = std::uniform_real_distribution<float>(-4, 4)(random);
  CUdeviceptr dx = 0, dy = 0;
  ASSERT_EQ(cuMemAlloc(&dx, 4000), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&dy, 4000), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(dx, x.data(), 4000), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS); // blocking: ordered after the copy
  void *params[] = {&dx, &dy};
  ASSERT_EQ(cuLaunchKernel(function, 8, 1, 1, 128, 1, 1, 0, stream, params, nullptr),
            CUDA_SUCCESS);
  // sm_90's limits, the kernel's bounds, and what the emulator does not run.
  EXPECT_EQ(cuLaunchKernel(function, 1, 1, 1, 2048, 1, 1, 0, stream, params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(function, 1, 1, 1, 256, 1, 1, 0, stream, params, nullptr),
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  EXPECT_EQ(cuLaunchKernel(function, 0, 1, 1, 128, 1, 1, 0, stream, params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(function, 4, 2, 1, 128, 1, 1, 0, stream, params, nullptr),
            CUDA_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(y.data(), dy, 4000), CUDA_SUCCESS);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(y[i], 2.0f * x[i]) << "at " << i;
  cuStreamDestroy(stream);
  cuModuleUnload(module);
  cuMemFree(dx);
  cuMemFree(dy);
}

// A captured graph runs nothing while captured and replays its nodes (a copy from pinned
// memory, a kernel, a device copy) as the stream's work on each launch, reading what the pinned
// memory holds then: two launches on fresh data give two right answers, with no kernel launched
// by the host.
TEST_F(EmuKernels, ACapturedGraphReplaysOnFreshData) {
  std::string image = "// PTX of scale_by_two, for the graph test\n";
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  ASSERT_NO_FATAL_FAILURE(loadScale(image, module, function));
  void *pinned = nullptr;
  ASSERT_EQ(cuMemAllocHost(&pinned, 4000), CUDA_SUCCESS);
  CUdeviceptr dx = 0, dy = 0, dz = 0;
  for (CUdeviceptr *d : {&dx, &dy, &dz})
    ASSERT_EQ(cuMemAlloc(d, 4000), CUDA_SUCCESS);
  std::vector<float> zeros(1000, 0.0f);
  ASSERT_EQ(cuMemcpyHtoD(dz, zeros.data(), 4000), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoDAsync(dx, pinned, 4000, stream), CUDA_SUCCESS);
  void *params[] = {&dx, &dy};
  ASSERT_EQ(cuLaunchKernel(function, 8, 1, 1, 128, 1, 1, 0, stream, params, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoDAsync(dz, dy, 4000, stream), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 1ull << 40), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS); // the exec keeps its own copy
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  std::vector<float> z(1000, 1.0f);
  ASSERT_EQ(cuMemcpyDtoH(z.data(), dz, 4000), CUDA_SUCCESS);
  EXPECT_EQ(z[0], 0.0f) << "the capture ran its work";

  smelt::emucuda::resetTraffic();
  std::mt19937 random(std::random_device{}());
  for (int replay = 0; replay < 2; ++replay) {
    std::vector<float> x(1000);
    for (float &v : x)
      v = std::uniform_real_distribution<float>(-4, 4)(random);
    std::memcpy(pinned, x.data(), 4000);
    ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
    ASSERT_EQ(cuMemcpyDtoH(z.data(), dz, 4000), CUDA_SUCCESS);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(z[i], 2.0f * x[i]) << "replay " << replay << " at " << i;
  }
  smelt::emucuda::Traffic t = smelt::emucuda::traffic();
  EXPECT_EQ(t.graphLaunches, 2u);
  EXPECT_EQ(t.launches, 0u);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphLaunch(exec, stream), CUDA_ERROR_INVALID_VALUE);
  cuStreamDestroy(stream);
  cuModuleUnload(module);
  cuMemFreeHost(pinned);
  for (CUdeviceptr d : {dx, dy, dz})
    cuMemFree(d);
}

TEST_F(EmuKernels, UnregisteredImageIsRefused) {
  CUmodule module = nullptr;
  EXPECT_EQ(cuModuleLoadData(&module, "// an image nobody registered\n"),
            CUDA_ERROR_INVALID_IMAGE);
}

// A launch given a pointer to memory already freed (a stale pointer) faults when it runs,
// naming the kernel, and the error sticks to the context as a GPU's illegal address does.
TEST_F(EmuKernels, LaunchOnFreedMemoryFaults) {
  std::string image = "// PTX of scale_by_two, for the fault test\n";
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  ASSERT_NO_FATAL_FAILURE(loadScale(image, module, function));
  CUdeviceptr dx = 0, dy = 0;
  ASSERT_EQ(cuMemAlloc(&dx, 4000), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&dy, 4000), CUDA_SUCCESS);
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  void *params[] = {&dx, &dy};
  ASSERT_EQ(cuMemFree(dx), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(function, 8, 1, 1, 128, 1, 1, 0, stream, params, nullptr),
            CUDA_SUCCESS); // checked when it runs, as a GPU would
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_ERROR_ILLEGAL_ADDRESS);
  std::string fault = smelt::emucuda::lastFault();
  EXPECT_NE(fault.find("scale_by_two"), std::string::npos) << fault;
  EXPECT_NE(fault.find("freed"), std::string::npos) << fault;
  EXPECT_EQ(cuMemsetD8Async(dy, 0, 4, stream), CUDA_ERROR_ILLEGAL_ADDRESS); // sticky
  smelt::emucuda::clearFault();
  cuStreamDestroy(stream);
  cuMemFree(dy);
}

// A CUBIN says how many registers each kernel takes (ptxas's EIATTR_REGCOUNT): a launch whose
// block needs more than sm_90's 64K registers is refused, as the GPU refuses it ("too many
// resources requested for launch"). ptxas gives this kernel 72 registers (no launch bounds):
// 512 threads fit, 1024 do not.
const char *kHeavySource = R"(
extern "C" __global__ void heavy(const float *__restrict__ x, float *__restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v[64];
#pragma unroll
  for (int k = 0; k < 64; ++k)
    v[k] = x[i * 64 + k];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int k = 0; k < 64; ++k)
      v[k] = v[k] * v[(k + r + 1) & 63] + 1.0f;
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 64; ++k)
    s += v[k];
  y[i] = s;
}
)";

TEST_F(EmuKernels, ALaunchNeedingMoreRegistersThanABlockHasIsRefused) {
  nvrtcProgram program;
  ASSERT_EQ(nvrtcCreateProgram(&program, kHeavySource, "heavy.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  const char *options[] = {"--gpu-architecture=sm_90"};
  ASSERT_EQ(nvrtcCompileProgram(program, 1, options), NVRTC_SUCCESS);
  size_t size = 0;
  ASSERT_EQ(nvrtcGetCUBINSize(program, &size), NVRTC_SUCCESS);
  std::string cubin(size, '\0');
  ASSERT_EQ(nvrtcGetCUBIN(program, cubin.data()), NVRTC_SUCCESS);
  nvrtcDestroyProgram(&program);
  registerSource(cubin, kHeavySource);
  CUmodule module = nullptr;
  ASSERT_EQ(cuModuleLoadData(&module, cubin.data()), CUDA_SUCCESS);
  CUfunction function = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&function, module, "heavy"), CUDA_SUCCESS);

  const unsigned threads = 512;
  std::mt19937 random(std::random_device{}());
  std::vector<float> x(threads * 64), y(threads);
  for (float &v : x)
    v = std::uniform_real_distribution<float>(-0.5f, 0.5f)(random);
  CUdeviceptr dx = 0, dy = 0;
  ASSERT_EQ(cuMemAlloc(&dx, x.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&dy, y.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD(dx, x.data(), x.size() * 4), CUDA_SUCCESS);
  void *params[] = {&dx, &dy};
  EXPECT_EQ(cuLaunchKernel(function, 1, 1, 1, 1024, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  ASSERT_EQ(cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, nullptr, params, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(y.data(), dy, y.size() * 4), CUDA_SUCCESS);
  for (unsigned i = 0; i < threads; ++i) {
    float v[64];
    for (int k = 0; k < 64; ++k)
      v[k] = x[i * 64 + k];
    for (int r = 0; r < 4; ++r)
      for (int k = 0; k < 64; ++k)
        v[k] = v[k] * v[(k + r + 1) & 63] + 1.0f;
    float s = 0.0f;
    for (int k = 0; k < 64; ++k)
      s += v[k];
    ASSERT_EQ(y[i], s) << "thread " << i;
  }
  cuModuleUnload(module);
  cuMemFree(dx);
  cuMemFree(dy);
}

} // namespace
