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
