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
#include "data/Text.h"
#include "runtime/CpuExecutor.h"
#include "runtime/DeviceMemory.h"
#include "runtime/Executor.h"
#include "runtime/cuda/CudaArray.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/GpuRunner.h"
#include "train/BuiltinModels.h"
#include "train/Trainer.h"

// The emulated driver's own count of host-device traffic, read from the driver the runtime
// opened (no definition is linked here).
#include "tests/emucuda/EmuCuda.h"

#include <dlfcn.h>

#include <cmath>
#include <random>

namespace smelt::cuda_test {
namespace {

// rng_normal is placed on the CPU (its builder scope's device, smelt.device), so the GPU's work
// is cut in two around it: its offset is the sum of argmax's indices (argmax runs on the GPU);
// the result of the first GPU segment is read again by the last; one output is an argument, one
// a constant, one returned twice, and an iota on the GPU is a kernel with no inputs.
const char *const kMixed = R"mlir(
func.func @main(%x: tensor<16x8xf32>, %w: tensor<8x8xf32>) -> (tensor<16x8xf32>, tensor<16xi64>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<4xf32>, tensor<16x8xf32>, tensor<16x8xi32>) {
  %0 = smelt.matmul %x, %w : tensor<16x8xf32>, tensor<8x8xf32>
  %1 = smelt.tanh %0 : tensor<16x8xf32>
  %2 = smelt.argmax %1 axis = 1 : tensor<16x8xf32>
  %3 = smelt.reduce sum %2 axes = [0] : tensor<16xi64>
  %4 = smelt.rng_normal seed = 5, mean = 0.0, stddev = 1.0 offset %3 {smelt.device = "cpu:0"} : tensor<16x8xf32>
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

TEST(PlacedExecution, TheCompilerCutsAtTheCopiesIntoSegmentsPerDevice) {
  rt::Executable exe = compilePlaced(kMixed, /*withGpu=*/true);
  const std::vector<rt::Segment> &segments = exe.segments;
  std::vector<std::string> devices;
  for (size_t k = 0; k < segments.size(); ++k) {
    devices.push_back(segments[k].device);
    rt::Expected<rt::Executable> part = rt::segmentExecutable(exe, k);
    ASSERT_TRUE(part.ok()) << part.message();
    for (const rt::Step &step : part->steps) {
      EXPECT_NE(step.op, rt::StepOp::Copy) << "copies become segment inputs and outputs";
      EXPECT_EQ(step.device, segments[k].device);
    }
    EXPECT_EQ(segments[k].reads.size(), part->inputs.size());
    EXPECT_EQ(segments[k].writes.size(), part->outputs.size());
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
  ASSERT_EQ(exe.segments.size(), 1u);
  EXPECT_EQ(exe.segments[0].device, "cpu:0");
  EXPECT_EQ(exe.segments[0].begin, 0u);
  EXPECT_EQ(exe.segments[0].end, exe.steps.size());
  rt::Expected<std::unique_ptr<rt::Executor>> exec = rt::Executor::create(exe);
  ASSERT_TRUE(exec.ok()) << exec.message();
  EXPECT_EQ((*exec)->segmentDevices(), std::vector<std::string>{"cpu:0"});
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

/// An executor of `exe` whose GPU segments run on the GPU executor.
rt::Expected<std::unique_ptr<rt::Executor>> onTheGpu(const rt::Executable &exe) {
  rt::ExecutorOptions options;
  options.gpuRunner = rt::cuda::gpuSegmentRunner;
  return rt::Executor::create(exe, options);
}

TEST(PlacedExecutionOnGpu, CountsTheBytesEachSegmentMovesAndTheHostsWaits) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  rt::Executable exe = compilePlaced(kMixed, /*withGpu=*/true, (*gpu())->arch());
  rt::Expected<std::unique_ptr<rt::Executor>> exec = onTheGpu(exe);
  ASSERT_TRUE(exec.ok()) << exec.message();
  ASSERT_EQ((*exec)->segmentDevices(), (std::vector<std::string>{"gpu:0", "cpu:0", "gpu:0"}))
      << exe.str();
  // Known from the types: up go x (16x8 f32, 512 B) and w (8x8 f32, 256 B) to the first
  // segment, and the noise (512 B) to the last; tanh stays on gpu:0 for the last. Down come
  // the sum of the indices (one i64, 8 B) for the CPU, the indices (16 i64, 128 B), the
  // product (512 B, returned twice), the iota (16x8 i32, 512 B) and, at the end, tanh (512 B)
  // for the caller; x and the constant come back from the host, never from the GPU.
  const rt::TransferStats steady{.toDevice = 512 + 256 + 512,
                                 .toHost = 8 + 128 + 512 + 512 + 512,
                                 // Each GPU segment waits for its outputs (so its staging
                                 // buffer is free for the next run), and tanh's copy waits.
                                 .hostSyncs = 2 + 1};
  uint64_t gpuSteps = 0; // the GPU segments' steps: not the copies between segments
  for (const rt::Segment &segment : exe.segments)
    for (uint32_t s = segment.begin; s < segment.end; ++s)
      gpuSteps += segment.device != "cpu:0" && !rt::isCopyStep(exe.steps[s]);
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
    // The first run of each GPU segment launches its steps one by one; later runs replay them
    // as one CUDA graph per segment, their buffers being where they were.
    if (run == 0)
      want.stepLaunches = gpuSteps;
    else
      want.graphLaunches = 2;
    EXPECT_EQ((*exec)->lastRunTransfers(), want)
        << "run " << run << ": " << (*exec)->lastRunTransfers().str() << "; "
        << (*exec)->lastRunTransfers().launchStr();
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
  // The second step is one CUDA graph the host launches, no kernel launched on its own.
  EXPECT_EQ(counted.graphLaunches, second.graphLaunches - first.graphLaunches);
  EXPECT_EQ(counted.graphLaunches, 1u) << counted.launchStr();
  EXPECT_EQ(second.launches - first.launches, 0u);
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

TEST(PlacedExecutionOnGpu, ReplicaIdIsWrittenOnTheGpu) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  // The index scales x, so the function is one GPU segment that reads it on the device.
  rt::Executable exe = compilePlaced(R"mlir(
func.func @main(%x: tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) {
  %r = smelt.replica_id : tensor<i64>
  %f = smelt.convert %r : tensor<i64> -> tensor<f32>
  %b = smelt.broadcast_in_dim %f, dims = [] : tensor<f32> -> tensor<4xf32>
  %y = smelt.mul %x, %b : tensor<4xf32>
  return %r, %y : tensor<i64>, tensor<4xf32>
}
)mlir",
                                     /*withGpu=*/true, (*gpu())->arch());
  EXPECT_EQ(exe.placement.find("cpu:0"), std::string::npos) << exe.placement;
  // Ranks past one byte: the index is written a byte at a time.
  for (int rank : {0, 3, 300}) {
    rt::LocalGroup group(301);
    std::unique_ptr<rt::Communicator> communicator = group.communicator(rank);
    rt::ExecutorOptions options;
    options.gpuRunner = rt::cuda::gpuSegmentRunner;
    options.communicator = communicator.get();
    rt::Expected<std::unique_ptr<rt::Executor>> exec = rt::Executor::create(exe, options);
    ASSERT_TRUE(exec.ok()) << exec.message();
    EXPECT_EQ((*exec)->segmentDevices(), std::vector<std::string>{"gpu:0"});
    rt::HostTensor x =
        rt::test::randomTensor(rt::DType::f32, {4}, [] { return rt::test::draw(-2, 2); });
    std::vector<rt::HostTensor> out;
    rt::Status s = (*exec)->run({&x}, out);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(*out[0].data<int64_t>(), rank);
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_FLOAT_EQ(out[1].data<float>()[i], x.data<float>()[i] * float(rank)) << i;
  }
}

/// A built-in model's training, small enough for the emulator: its config and data.
struct ResidentCase {
  const char *model;
  PrecisionPolicy precision;
};

/// The config and data of `c` on the CPU (the GPU's adds the devices).
std::pair<train::TrainConfig, data::Dataset> residentCaseSetup(const ResidentCase &c) {
  train::TrainConfig config;
  config.seed = rt::test::baseSeed() % 1000;
  config.precision = c.precision;
  config.model = c.model;
  if (std::string(c.model) == "gpt") {
    GptConfig gpt{.vocab = 19, .context = 16, .width = 32, .layers = 1, .heads = 2};
    config.model = train::gptModel(gpt);
    config.batch = 8;
    // Fresh random text: four windows a batch, four batches.
    std::mt19937 random(uint32_t(rt::test::baseSeed()));
    std::vector<int32_t> ids(4 * 8 * 16 + 1);
    for (int32_t &id : ids)
      id = int32_t(random() % gpt.vocab);
    rt::Expected<data::Dataset> text = data::nextTokenWindows(ids, gpt.context, gpt.context);
    EXPECT_TRUE(text.ok()) << text.message();
    return {config, std::move(*text)};
  }
  config.batch = 32;
  return {config, test::fashion("train", 4 * config.batch)};
}

class TrainStepOnGpu : public ::testing::TestWithParam<ResidentCase> {};

TEST_P(TrainStepOnGpu, KeepsItsStateOnTheGpuAndMovesOnlyTheBatchAndTheMetrics) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  auto [config, data] = residentCaseSetup(GetParam());
  auto onCpu = train::Trainer::create(config);
  ASSERT_TRUE(onCpu.ok()) << onCpu.message();
  config.pipeline.devices = "cpu:0,gpu:0";
  config.executor.gpuRunner = rt::cuda::gpuSegmentRunner;
  config.compile.cudaArch = (*gpu())->arch();
  auto onGpu = train::Trainer::create(config);
  ASSERT_TRUE(onGpu.ok()) << onGpu.message();
  EXPECT_EQ((*onGpu)->replicaDevices(), std::vector<std::string>{"gpu:0"});
  // One GPU segment: every step on gpu:0, with nothing cut out to the CPU.
  std::vector<std::string> segments;
  for (const rt::Segment &segment : (*onGpu)->trainStepExecutable().segments)
    segments.push_back(segment.device);
  EXPECT_EQ(segments, std::vector<std::string>{"gpu:0"});

  double tolerance = config.precision == PrecisionPolicy::f32 ? 1e-3 : 2e-2;
  decltype(&emucuda::traffic) traffic = emulatedTraffic();
  emucuda::Traffic before = traffic ? traffic() : emucuda::Traffic{};
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    rt::Expected<train::Metrics> want = (*onCpu)->trainEpoch(data, epoch);
    rt::Expected<train::Metrics> got = (*onGpu)->trainEpoch(data, epoch);
    ASSERT_TRUE(want.ok()) << want.message();
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_NEAR(got->loss, want->loss, tolerance * want->loss)
        << "epoch " << epoch << " (seed " << config.seed << ")";
  }
  // cuDNN reads the filters and inputs as the compiler laid them out (smelt-gpu-conv-layouts):
  // in f32 no call copies a tensor into another layout. (In f16/bf16, channels cuDNN's NHWC
  // kernels cannot take, as the CNN's first convolution's one, still run on NCHW copies.)
  if (traffic && config.precision == PrecisionPolicy::f32) {
    EXPECT_EQ(traffic().layoutCopies - before.layoutCopies, 0u);
  }
  // From the second step on, up go only the batch, the step number and the learning rates,
  // and down come only the loss and the metrics: the parameters and the optimizer's state
  // stay on gpu:0. The host waits once, for the loss.
  const rt::Executable &step = (*onGpu)->trainStepExecutable();
  size_t batchInputs = 3 + (*onGpu)->optimizers().size();
  size_t reported = 1 + (*onGpu)->metricNames().size();
  uint64_t up = 0, down = 0;
  for (size_t i = 0; i < batchInputs; ++i)
    up += step.buffers[step.inputs[i]].type.byteSize();
  for (size_t i = step.outputs.size() - reported; i < step.outputs.size(); ++i)
    down += step.buffers[step.outputs[i]].type.byteSize();
  // Every parameter, variable and optimizer state is updated in place: its new value is
  // written into the block of the old one, which the Trainer donates (smelt-donate-in-place).
  size_t inPlace = 0;
  for (const rt::Step &s : step.steps)
    if (const rt::KernelParams *kernel = s.paramsAs<rt::KernelParams>())
      inPlace += size_t(std::count_if(kernel->inPlace.begin(), kernel->inPlace.end(),
                                      [](int64_t operand) { return operand >= 0; }));
  size_t state = (*onGpu)->parameters().size() + (*onGpu)->variables().size();
  EXPECT_GE(inPlace, state) << "of " << step.outputs.size() - reported << " state outputs";
  rt::TransferStats moved = (*onGpu)->lastStepTransfers();
  // And the host queues the step as one CUDA graph.
  EXPECT_EQ(moved,
            (rt::TransferStats{.toDevice = up, .toHost = down, .hostSyncs = 1, .graphLaunches = 1}))
      << moved.str() << ", " << moved.launchStr() << "; the batch, step and rates are " << up
      << " B, loss and metrics " << down << " B";

  // The parameters and variables that stayed on gpu:0, brought to the host, are what the
  // GPU evaluates with: the CPU evaluates the same numbers from them. (Adam sends parameters
  // whose gradients are rounding noise either way, so the two runs' own parameters are not
  // compared.)
  ASSERT_TRUE((*onCpu)->setParameters((*onGpu)->parameters()).ok());
  ASSERT_TRUE((*onCpu)->setVariables((*onGpu)->variables()).ok());
  rt::Expected<train::Metrics> gpuEval = (*onGpu)->evaluate(data);
  rt::Expected<train::Metrics> cpuEval = (*onCpu)->evaluate(data);
  ASSERT_TRUE(gpuEval.ok()) << gpuEval.message();
  ASSERT_TRUE(cpuEval.ok()) << cpuEval.message();
  EXPECT_NEAR(gpuEval->loss, cpuEval->loss, tolerance * cpuEval->loss);
}

INSTANTIATE_TEST_SUITE_P(Models, TrainStepOnGpu,
                         ::testing::Values(ResidentCase{"mlp", PrecisionPolicy::f32},
                                           ResidentCase{"mlp", PrecisionPolicy::mixed_bf16},
                                           ResidentCase{"cnn", PrecisionPolicy::f32},
                                           ResidentCase{"cnn", PrecisionPolicy::mixed_bf16},
                                           ResidentCase{"gpt", PrecisionPolicy::f32},
                                           ResidentCase{"gpt", PrecisionPolicy::mixed_bf16}),
                         [](const ::testing::TestParamInfo<ResidentCase> &info) {
                           return std::string(info.param.model) + "_" +
                                  precisionPolicyName(info.param.precision).str();
                         });

TEST(PlacedExecutionOnGpu, KeptOutputsStayOnTheGpuAndDonatedInputsAreTakenOver) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message());
  rt::Executable exe = compilePlaced(kMixed, /*withGpu=*/true, (*gpu())->arch());
  rt::Expected<std::unique_ptr<rt::Executor>> exec = onTheGpu(exe);
  ASSERT_TRUE(exec.ok()) << exec.message();
  auto input = [&](size_t i) {
    const rt::TensorType &type = exe.buffers[exe.inputs[i]].type;
    return rt::test::randomTensor(type.dtype, type.shape, [] { return rt::test::draw(-0.5, 0.5); });
  };
  rt::HostTensor x = input(0), w = input(1);
  // Every output kept: those a GPU computed come back as gpu:0 arrays, x and the constant
  // (never on the GPU as outputs) as host tensors, and so does the product's first place of
  // two (its array goes to the last); all hold the host run's values.
  std::vector<rt::HostTensor> want;
  ASSERT_TRUE((*exec)->run({&x, &w}, want).ok());
  rt::Value xValue = rt::Value::lent(x), wValue = rt::Value::lent(w);
  std::vector<rt::Value> kept;
  rt::RunValues keepAll;
  keepAll.keepOnDevice.assign(exe.outputs.size(), 1);
  rt::Status s = (*exec)->run({&xValue, &wValue}, kept, keepAll);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(kept.size(), want.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i].device(), i == 0 || i == 2 || i == 4 ? "cpu:0" : "gpu:0")
        << "output #" << i << " of " << exe.str();
    rt::Expected<rt::HostTensor> host = kept[i].toHost();
    ASSERT_TRUE(host.ok()) << host.message();
    EXPECT_EQ(host->toDoubles(), want[i].toDoubles()) << "output #" << i;
  }
  // tanh (output #5, 16x8 f32) as the next run's x, donated: the run reads it where it is and
  // takes it, leaving the caller's array empty; the results are those of its host copy.
  rt::Expected<rt::HostTensor> tanhOnHost = kept[5].toHost();
  ASSERT_TRUE(tanhOnHost.ok());
  std::vector<rt::HostTensor> fromHost;
  ASSERT_TRUE((*exec)->run({&*tanhOnHost, &w}, fromHost).ok());
  rt::RunValues donateX;
  donateX.donated = {1, 0};
  std::vector<rt::Value> results;
  s = (*exec)->run({&kept[5], &wValue}, results, donateX);
  ASSERT_TRUE(s.ok()) << s.message();
  // x is also returned, so the run copies it out rather than taking it.
  EXPECT_TRUE(*kept[5].array()) << "x is returned: the run must not free it";
  EXPECT_EQ((*exec)->lastRunTransfers().toDevice, 256u + 512u) << "w and the noise only";
  ASSERT_EQ(results.size(), fromHost.size());
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i].host()->toDoubles(), fromHost[i].toDoubles()) << "output #" << i;

  // w uploaded as a gpu:0 array and donated: the run reads it where it is and takes it over,
  // leaving the caller's array empty; up go only x and the noise.
  rt::Expected<rt::Allocator *> allocator = rt::deviceAllocator("gpu:0");
  ASSERT_TRUE(allocator.ok()) << allocator.message();
  rt::Expected<void *> block = (*allocator)->allocate(w.byteSize(), "w");
  ASSERT_TRUE(block.ok()) << block.message();
  ASSERT_TRUE((*gpu())->copyToDevice(*block, w.raw(), w.byteSize()).ok());
  ASSERT_TRUE((*gpu())->synchronize("w").ok());
  rt::Value wOnGpu{rt::cuda::cudaArray(w.type(), *gpu(), **allocator, *block)};
  rt::RunValues donateW;
  donateW.donated = {0, 1};
  s = (*exec)->run({&xValue, &wOnGpu}, results, donateW);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(*wOnGpu.array()) << "the run took w over";
  EXPECT_EQ((*exec)->lastRunTransfers().toDevice, 512u + 512u) << "x and the noise only";
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i].host()->toDoubles(), want[i].toDoubles()) << "output #" << i;
  // A donated array is not usable again: a clear error, not a fault.
  s = (*exec)->run({&xValue, &wOnGpu}, results, rt::RunValues());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("empty device array"), std::string::npos) << s.message();
}

} // namespace
} // namespace smelt::cuda_test
