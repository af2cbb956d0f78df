// rt::Executor on placed Executables: functions and the MLP training step compiled with a GPU
// in the device list are cut into per-device segments at the copies, and run segment by segment
// they give what the whole function gives on the CPU. Without a GPU the GPU segments run on a
// CpuExecutor (the cut, the values passed between segments and the outputs are what is under
// test); with one (scripts/gpu-check.sh) they run on the GPU executor and training on the GPU
// tracks the CPU's loss curve.
#include "GpuSkip.h"
#include "CudaTestUtil.h"
#include "RuntimeTestUtil.h"
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "codegen/cuda/CudaCodegen.h"
#include "runtime/CpuExecutor.h"
#include "runtime/Executor.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/GpuRunner.h"
#include "train/Trainer.h"

// The emulated driver's own count of host-device traffic, read from the driver the runtime
// opened (no definition is linked here).
#include "tests/emucuda/EmuCuda.h"

#include <dlfcn.h>

#include <cmath>

namespace smelt::cuda_test {
namespace {

// rng_normal has no GPU kernel, so the GPU's work is cut in two around it: its offset is the
// sum of argmax's indices (argmax runs on the GPU); the result of the first GPU segment is read
// again by the last; one output is an argument, one a constant, one returned twice, and an iota
// on the GPU is a kernel with no inputs.
const char *const kMixed = R"mlir(
func.func @main(%x: tensor<16x8xf32>, %w: tensor<8x8xf32>) -> (tensor<16x8xf32>, tensor<16xi64>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<4xf32>, tensor<16x8xf32>, tensor<16x8xi32>) {
  %0 = smelt.matmul %x, %w : tensor<16x8xf32>, tensor<8x8xf32>
  %1 = smelt.tanh %0 : tensor<16x8xf32>
  %2 = smelt.argmax %1 axis = 1 : tensor<16x8xf32>
  %3 = smelt.reduce sum %2 axes = [0] : tensor<16xi64>
  %4 = smelt.rng_normal seed = 5, mean = 0.0, stddev = 1.0 offset %3 : tensor<16x8xf32>
  %5 = smelt.mul %4, %1 : tensor<16x8xf32>
  %c = smelt.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %i = smelt.iota dim = 1 : tensor<16x8xi32>
  return %5, %2, %x, %5, %c, %1, %i : tensor<16x8xf32>, tensor<16xi64>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<4xf32>, tensor<16x8xf32>, tensor<16x8xi32>
}
)mlir";

const rt::Expected<std::shared_ptr<rt::cuda::CudaDevice>> &gpu() {
  static const rt::Expected<std::shared_ptr<rt::cuda::CudaDevice>> opened =
      rt::cuda::CudaDevice::open(0);
  return opened;
}

/// @main of `text` with gpu:0 in the device list (CUDA code for `arch` when given), or for the
/// CPU alone.
rt::Executable compilePlaced(const char *text, bool withGpu, const std::string &arch = "") {
  ParsedModule parsed = parseModule(text);
  EXPECT_TRUE(parsed.main);
  codegen::CompileOptions options;
  // The same kernels with and without a GPU: the CPU alone would fold tanh into oneDNN's
  // matmul (an eltwise post-op) where gpu:0's cuBLASLt cannot, and the last-ulp difference
  // near tanh's saturation flips kMixed's argmax in about one run in five.
  options.pipeline.epilogues = false;
  if (withGpu)
    options.pipeline.devices = "cpu:0,gpu:0";
  if (!arch.empty())
    options.cudaArch = arch;
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*parsed.module, "main", options);
  EXPECT_TRUE(mlir::succeeded(exe));
  return mlir::succeeded(exe) ? std::move(*exe) : rt::Executable();
}

void expectSameOutputs(const rt::Executable &placed, rt::SegmentRunnerFactory gpuRunner) {
  rt::Executable alone = compilePlaced(kMixed, /*withGpu=*/false);
  rt::ExecutorOptions options;
  options.gpuRunner = std::move(gpuRunner);
  rt::Expected<std::unique_ptr<rt::Executor>> split = rt::Executor::create(placed, options);
  ASSERT_TRUE(split.ok()) << split.message() << "\n" << placed.str();
  rt::Expected<rt::CpuExecutor> whole = rt::CpuExecutor::create(alone);
  ASSERT_TRUE(whole.ok()) << whole.message();
  for (int run = 0; run < 3; ++run) {
    std::vector<rt::HostTensor> inputs, got, want;
    // Small enough that tanh does not saturate: where it does, rows tie at 1.0f and which of
    // the tied entries argmax picks follows the last ulp of the matmul, whose sums cuBLASLt
    // and oneDNN round in different orders (a seed the emulated GPU ran flipped one).
    for (rt::BufferId id : alone.inputs)
      inputs.push_back(rt::test::randomTensor(alone.buffers[id].type.dtype,
                                              alone.buffers[id].type.shape,
                                              [] { return rt::test::draw(-0.5, 0.5); }));
    rt::Status s = (*split)->run(inputs, got);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(whole->run(inputs, want).ok());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].type(), want[i].type()) << "output #" << i;
      // TF32 is off: cuBLASLt's f32 sums differ from oneDNN's only in rounding order.
      EXPECT_LE(test::relError(got[i].toDoubles(), want[i].toDoubles()), 1e-5)
          << "run " << run << ", output #" << i << " (seed " << rt::test::baseSeed() << ")";
    }
  }
  EXPECT_GT((*split)->lastRunPeakBytes(), 0u);
}

TEST(PlacedExecution, CutsAtTheCopiesIntoSegmentsPerDevice) {
  rt::Executable exe = compilePlaced(kMixed, /*withGpu=*/true);
  std::vector<rt::Executor::Segment> segments = rt::splitByDevice(exe);
  std::vector<std::string> devices;
  for (const rt::Executor::Segment &segment : segments) {
    devices.push_back(segment.device);
    for (const rt::Step &step : segment.executable.steps) {
      EXPECT_NE(step.op, rt::StepOp::Copy) << "copies become segment inputs and outputs";
      EXPECT_EQ(step.device, segment.device);
    }
    EXPECT_EQ(segment.reads.size(), segment.executable.inputs.size());
    EXPECT_EQ(segment.writes.size(), segment.executable.outputs.size());
  }
  EXPECT_EQ(devices, (std::vector<std::string>{"gpu:0", "cpu:0", "gpu:0"})) << exe.str();
  // The first GPU segment hands the offset to the CPU (rng_normal), and tanh to the last
  // segment (mul) and to the caller; the last reads tanh back with the CPU's noise.
  EXPECT_EQ(segments[1].reads.size(), 1u);
  EXPECT_EQ(segments[2].reads.size(), 2u);
}

TEST(PlacedExecution, SegmentsRunOneAfterAnotherGiveTheWholeFunctionsOutputs) {
  expectSameOutputs(compilePlaced(kMixed, /*withGpu=*/true), rt::cpuSegmentRunner);
}

TEST(PlacedExecution, GpuSegmentsCompileWithNvrtc) {
  rt::Executable exe = compilePlaced(kMixed, /*withGpu=*/true, "sm_90");
  ASSERT_TRUE(exe.cuda);
  EXPECT_FALSE(exe.cuda->cubin.empty());
  EXPECT_NE(exe.cuda->source.find("main_fusion"), std::string::npos);
}

TEST(PlacedExecution, CpuOnlyExecutablesAreOneSegmentUnchanged) {
  rt::Executable exe = compilePlaced(kMixed, /*withGpu=*/false);
  std::vector<rt::Executor::Segment> segments = rt::splitByDevice(exe);
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].device, "cpu:0");
  EXPECT_EQ(segments[0].executable.steps.size(), exe.steps.size());
  EXPECT_EQ(segments[0].reads, exe.inputs);
}

TEST(PlacedExecution, GpuStepsWithoutAGpuExecutorAreAnErrorNamingThem) {
  rt::Expected<std::unique_ptr<rt::Executor>> exec =
      rt::Executor::create(compilePlaced(kMixed, /*withGpu=*/true));
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.message().find("placed on gpu:0 ('matmul'"), std::string::npos)
      << exec.message();
  EXPECT_NE(exec.message().find("built without the GPU executor"), std::string::npos);
}

TEST(PlacedExecution, RunsOnTheCpuMoveNothingToADevice) {
  // The GPU segments on CpuExecutors, then the whole function on the CPU alone.
  rt::ExecutorOptions options;
  options.gpuRunner = rt::cpuSegmentRunner;
  for (bool withGpu : {true, false}) {
    rt::Executable exe = compilePlaced(kMixed, withGpu);
    rt::Expected<std::unique_ptr<rt::Executor>> exec = rt::Executor::create(exe, options);
    ASSERT_TRUE(exec.ok()) << exec.message();
    rt::HostTensor x = rt::HostTensor::zeros({rt::DType::f32, {16, 8}}),
                   w = rt::HostTensor::zeros({rt::DType::f32, {8, 8}});
    std::vector<rt::HostTensor> outputs;
    rt::Status s = (*exec)->run({&x, &w}, outputs);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ((*exec)->lastRunTransfers(), rt::TransferStats{}) << "with gpu:0 " << withGpu;
  }
}

TEST(PlacedExecutionOnGpu, CountsTheBytesEachSegmentMovesAndTheHostsWaits) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  rt::Executable exe = compilePlaced(kMixed, /*withGpu=*/true, (*gpu())->arch());
  rt::ExecutorOptions options;
  options.gpuRunner = rt::cuda::gpuSegmentRunner;
  rt::Expected<std::unique_ptr<rt::Executor>> exec = rt::Executor::create(exe, options);
  ASSERT_TRUE(exec.ok()) << exec.message();
  ASSERT_EQ((*exec)->segmentDevices(), (std::vector<std::string>{"gpu:0", "cpu:0", "gpu:0"}))
      << exe.str();
  // Known from the types: up go x (16x8 f32, 512 B) and w (8x8 f32, 256 B) to the first
  // segment, and the noise and tanh (512 B each) to the last. Down come the sum of the indices
  // (one i64, 8 B) for the CPU, tanh (512 B: the last segment and the caller read it), the
  // indices (16 i64, 128 B), the product (512 B, returned twice) and the iota (16x8 i32, 512
  // B); x and the constant come back from the host, never from the GPU.
  const rt::TransferStats steady{.toDevice = 512 + 256 + 512 + 512,
                                 .toHost = 8 + 512 + 128 + 512 + 512,
                                 // Each GPU segment waits before it refills its staging
                                 // buffer and for its outputs.
                                 .hostSyncs = 2 * 2};
  rt::HostTensor x = rt::HostTensor::zeros({rt::DType::f32, {16, 8}}),
                 w = rt::HostTensor::zeros({rt::DType::f32, {8, 8}});
  std::vector<rt::HostTensor> outputs;
  for (int run = 0; run < 3; ++run) {
    rt::Status s = (*exec)->run({&x, &w}, outputs);
    ASSERT_TRUE(s.ok()) << s.message();
    rt::TransferStats want = steady;
    // On the first run the staging buffers grow, each time after a wait, and a wait before the
    // old one is freed: the first segment's for its inputs (768 B), then for its outputs (1024
    // B or more, in 256-byte slots), the last segment's for its inputs, which hold the most.
    if (run == 0)
      want.hostSyncs += 1 + 2 + 1;
    EXPECT_EQ((*exec)->lastRunTransfers(), want)
        << "run " << run << ": " << (*exec)->lastRunTransfers().str();
  }
}

/// The emulated driver's count of traffic since the process began (tests/emucuda/EmuCuda.h),
/// when the driver the runtime opened is the emulation; null on a real GPU.
decltype(&emucuda::traffic) emulatedTraffic() {
  void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  // smelt::emucuda::traffic(), by its Itanium C++ name.
  return driver ? reinterpret_cast<decltype(&emucuda::traffic)>(
                      dlsym(driver, "_ZN5smelt7emucuda7trafficEv"))
                : nullptr;
}

TEST(PlacedExecutionOnGpu, TrainStepTrafficIsWhatTheEmulatedDriverCounted) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  decltype(&emucuda::traffic) traffic = emulatedTraffic();
  if (!traffic)
    GTEST_SKIP() << "needs the emulated CUDA driver (tests/emucuda), which counts for itself";
  train::TrainConfig config;
  config.batch = 128;
  config.pipeline.devices = "cpu:0,gpu:0";
  config.executor.gpuRunner = rt::cuda::gpuSegmentRunner;
  config.compile.cudaArch = (*gpu())->arch();
  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  // Between the ends of the first and the second step, only the second step used the GPU.
  emucuda::Traffic first, second;
  rt::Expected<train::Metrics> epoch =
      (*trainer)->trainEpoch(test::fashion("train", 2 * config.batch), 0,
                             [&](int64_t step, int64_t, const train::Metrics &) {
                               (step == 1 ? first : second) = traffic();
                             });
  ASSERT_TRUE(epoch.ok()) << epoch.message();
  rt::TransferStats counted = (*trainer)->lastStepTransfers();
  EXPECT_EQ(counted.toDevice, second.toDevice - first.toDevice);
  EXPECT_EQ(counted.toHost, second.toHost - first.toHost);
  EXPECT_EQ(counted.hostSyncs, second.hostWaits - first.hostWaits);
  // The batch goes up: 128 images of 784 f32.
  EXPECT_GE(counted.toDevice, 128u * 784 * 4) << counted.str();
}

/// The MLP training step placed with a GPU and run by `gpuRunner`, against the CPU alone: the
/// same seed gives the same losses step by step (dropout's random numbers are the same on
/// every device).
void expectTrainingTracksTheCpu(rt::SegmentRunnerFactory gpuRunner, const std::string &arch,
                                double tolerance) {
  data::Dataset data = test::fashion("train", 1024);
  train::TrainConfig config;
  config.seed = rt::test::baseSeed() % 1000;
  config.batch = 128;
  auto onCpu = train::Trainer::create(config);
  ASSERT_TRUE(onCpu.ok()) << onCpu.message();
  config.pipeline.devices = "cpu:0,gpu:0";
  config.executor.gpuRunner = std::move(gpuRunner);
  if (!arch.empty())
    config.compile.cudaArch = arch;
  auto placed = train::Trainer::create(config);
  ASSERT_TRUE(placed.ok()) << placed.message();
  EXPECT_NE((*placed)->placement().find("on gpu:0"), std::string::npos)
      << (*placed)->placement();
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    rt::Expected<train::Metrics> want = (*onCpu)->trainEpoch(data, epoch);
    rt::Expected<train::Metrics> got = (*placed)->trainEpoch(data, epoch);
    ASSERT_TRUE(want.ok()) << want.message();
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_NEAR(got->loss, want->loss, tolerance * want->loss)
        << "epoch " << epoch << " (seed " << config.seed << ")";
  }
}

TEST(PlacedExecution, TrainingStepCutIntoSegmentsTracksTheCpu) {
  expectTrainingTracksTheCpu(rt::cpuSegmentRunner, "", 1e-5);
}

TEST(PlacedExecutionOnGpu, MixedFunctionMatchesTheCpu) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  expectSameOutputs(compilePlaced(kMixed, /*withGpu=*/true, (*gpu())->arch()),
                    rt::cuda::gpuSegmentRunner);
}

TEST(PlacedExecutionOnGpu, MlpTrainingTracksTheCpuLossCurve) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  // cuBLASLt and the fused kernels round differently from oneDNN; over two epochs of Adam the
  // losses stay within a percent.
  expectTrainingTracksTheCpu(rt::cuda::gpuSegmentRunner, (*gpu())->arch(), 1e-2);
}

} // namespace
} // namespace smelt::cuda_test
