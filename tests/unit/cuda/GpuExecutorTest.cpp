// GpuExecutor: small functions placed on gpu:0 and compiled with CUDA code run on the GPU found
// and match the CPU executor on the same fresh random inputs, run after run (grouped and
// depthwise convolutions and their gradients among them); running out of
// memory fails a run and leaves the executor usable; argmax and scatter_add run kernels of their
// own; steps without a GPU kernel are refused.
// Validation needs no GPU and runs everywhere; the rest skips, saying why, without a device: it
// runs on the GPU machine through scripts/gpu-check.sh.
#include "CudaTestUtil.h"
#include "GpuSkip.h"
#include "RuntimeTestUtil.h"
#include "TestUtil.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "runtime/CpuExecutor.h"
#include "runtime/Executor.h"
#include "runtime/cuda/CudaArray.h"
#include "runtime/cuda/CudaMemory.h"
#include "runtime/cuda/GpuExecutor.h"
#ifdef SMELT_TEST_NCCL
#include "runtime/cuda/Nccl.h"
#endif

#include <cmath>
#include <iostream>
#include <thread>

namespace smelt::cuda_test {
namespace {

using rt::cuda::CudaDevice;
using rt::cuda::GpuExecutor;

// Two dense layers and a row sum: matmul (cuBLASLt), bias+relu and the reduce as fusions.
const char *const kMlp = R"mlir(
func.func @main(%x: tensor<64x32xf32>, %w1: tensor<32x48xf32>, %b1: tensor<48xf32>,
                %w2: tensor<48x16xf32>) -> (tensor<64x16xf32>, tensor<64xf32>) {
  %0 = smelt.matmul %x, %w1 : tensor<64x32xf32>, tensor<32x48xf32>
  %1 = smelt.broadcast_in_dim %b1, dims = [1] : tensor<48xf32> -> tensor<64x48xf32>
  %2 = smelt.add %0, %1 : tensor<64x48xf32>
  %3 = smelt.relu %2 : tensor<64x48xf32>
  %4 = smelt.matmul %3, %w2 : tensor<64x48xf32>, tensor<48x16xf32>
  %5 = smelt.reduce sum %4 axes = [1] : tensor<64x16xf32>
  return %4, %5 : tensor<64x16xf32>, tensor<64xf32>
}
)mlir";

// NHWC convolution (cuDNN), relu (a fusion), max pooling (cuDNN).
const char *const kConvPool = R"mlir(
func.func @main(%x: tensor<2x9x9x3xf32>, %w: tensor<3x3x3x8xf32>) -> tensor<2x3x3x8xf32> {
  %0 = smelt.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] : tensor<2x9x9x3xf32>, tensor<3x3x3x8xf32>
  %1 = smelt.relu %0 : tensor<2x9x9x8xf32>
  %2 = smelt.max_pool2d %1 window = [3, 3] strides = [3, 3] padding = [0, 0, 0, 0] : tensor<2x9x9x8xf32>
  return %2 : tensor<2x3x3x8xf32>
}
)mlir";

// feature_group_count reaching cuDNN from the steps: a convolution in 3 groups (6 channels into
// 9) and a depthwise one with 2 filters per channel, each with both gradients.
const char *const kGroupedConv = R"mlir(
func.func @main(%x: tensor<2x9x9x6xf32>, %w: tensor<3x3x2x9xf32>, %d: tensor<3x3x1x12xf32>,
                %dy: tensor<2x5x5x9xf32>, %ddy: tensor<2x9x9x12xf32>)
    -> (tensor<2x5x5x9xf32>, tensor<2x9x9x6xf32>, tensor<3x3x2x9xf32>,
        tensor<2x9x9x12xf32>, tensor<2x9x9x6xf32>, tensor<3x3x1x12xf32>) {
  %0 = smelt.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 3 : tensor<2x9x9x6xf32>, tensor<3x3x2x9xf32>
  %1 = smelt.conv2d_backward_input %dy, %w strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 3 : tensor<2x5x5x9xf32>, tensor<3x3x2x9xf32> -> tensor<2x9x9x6xf32>
  %2 = smelt.conv2d_backward_filter %x, %dy strides = [2, 2] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 3 : tensor<2x9x9x6xf32>, tensor<2x5x5x9xf32> -> tensor<3x3x2x9xf32>
  %3 = smelt.conv2d %x, %d strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 6 : tensor<2x9x9x6xf32>, tensor<3x3x1x12xf32>
  %4 = smelt.conv2d_backward_input %ddy, %d strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 6 : tensor<2x9x9x12xf32>, tensor<3x3x1x12xf32> -> tensor<2x9x9x6xf32>
  %5 = smelt.conv2d_backward_filter %x, %ddy strides = [1, 1] padding = [1, 1, 1, 1] dilation = [1, 1] feature_group_count = 6 : tensor<2x9x9x6xf32>, tensor<2x9x9x12xf32> -> tensor<3x3x1x12xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x5x5x9xf32>, tensor<2x9x9x6xf32>, tensor<3x3x2x9xf32>, tensor<2x9x9x12xf32>, tensor<2x9x9x6xf32>, tensor<3x3x1x12xf32>
}
)mlir";

// Padding cuDNN's descriptor cannot hold (one side more than the other), which
// smelt-gpu-conv-layouts makes an explicit pad (and a slice of the input gradient): TensorFlow's
// SAME at stride 2, and a dilated depthwise convolution padded differently on every side.
const char *const kAsymmetricConv = R"mlir(
func.func @main(%x: tensor<2x8x7x3xf32>, %w: tensor<3x2x3x6xf32>, %dy: tensor<2x4x4x6xf32>,
                %x2: tensor<2x10x7x5xf32>, %d: tensor<3x2x1x10xf32>, %ddy: tensor<2x5x6x10xf32>)
    -> (tensor<2x4x4x6xf32>, tensor<2x8x7x3xf32>, tensor<3x2x3x6xf32>,
        tensor<2x5x6x10xf32>, tensor<2x10x7x5xf32>, tensor<3x2x1x10xf32>) {
  %0 = smelt.conv2d %x, %w strides = [2, 2] padding = [0, 1, 1, 0] dilation = [1, 1] : tensor<2x8x7x3xf32>, tensor<3x2x3x6xf32>
  %1 = smelt.conv2d_backward_input %dy, %w strides = [2, 2] padding = [0, 1, 1, 0] dilation = [1, 1] : tensor<2x4x4x6xf32>, tensor<3x2x3x6xf32> -> tensor<2x8x7x3xf32>
  %2 = smelt.conv2d_backward_filter %x, %dy strides = [2, 2] padding = [0, 1, 1, 0] dilation = [1, 1] : tensor<2x8x7x3xf32>, tensor<2x4x4x6xf32> -> tensor<3x2x3x6xf32>
  %3 = smelt.conv2d %x2, %d strides = [2, 1] padding = [2, 1, 0, 1] dilation = [2, 2] feature_group_count = 5 : tensor<2x10x7x5xf32>, tensor<3x2x1x10xf32>
  %4 = smelt.conv2d_backward_input %ddy, %d strides = [2, 1] padding = [2, 1, 0, 1] dilation = [2, 2] feature_group_count = 5 : tensor<2x5x6x10xf32>, tensor<3x2x1x10xf32> -> tensor<2x10x7x5xf32>
  %5 = smelt.conv2d_backward_filter %x2, %ddy strides = [2, 1] padding = [2, 1, 0, 1] dilation = [2, 2] feature_group_count = 5 : tensor<2x10x7x5xf32>, tensor<2x5x6x10xf32> -> tensor<3x2x1x10xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x4x4x6xf32>, tensor<2x8x7x3xf32>, tensor<3x2x3x6xf32>, tensor<2x5x6x10xf32>, tensor<2x10x7x5xf32>, tensor<3x2x1x10xf32>
}
)mlir";

// 1 MiB in, its device copy and exp: more than 1.5 MiB live at once, each buffer less.
const char *const kExp = R"mlir(
func.func @main(%x: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %0 = smelt.exp %x : tensor<512x512xf32>
  return %0 : tensor<512x512xf32>
}
)mlir";

// argmax and scatter_add, kernels of their own on the GPU: a step's accuracy and an embedding's
// gradient.
const char *const kArgmaxScatter = R"mlir(
func.func @main(%dy: tensor<24x40xf32>, %ids: tensor<24xi32>) -> (tensor<24xi64>, tensor<50x40xf32>) {
  %0 = smelt.argmax %dy axis = 1 : tensor<24x40xf32>
  %1 = smelt.scatter_add %dy[%ids] size = 50 : tensor<24x40xf32>, tensor<24xi32>
  return %0, %1 : tensor<24xi64>, tensor<50x40xf32>
}
)mlir";

const rt::Expected<std::shared_ptr<CudaDevice>> &gpu() {
  static const rt::Expected<std::shared_ptr<CudaDevice>> opened = CudaDevice::open(0);
  return opened;
}

#define REQUIRE_GPU()                                                                              \
  if (!gpu().ok())                                                                                 \
  SMELT_SKIP_WITHOUT_GPU("needs a GPU: " << gpu().message())

/// `text`'s @main compiled for the CPU alone (empty `arch`), or placed on gpu:0 with its
/// fusions compiled by NVRTC for `arch`.
rt::Expected<rt::Executable> compileText(const std::string &text, const std::string &arch) {
  ParsedModule parsed = parseModule(text);
  if (!parsed.main)
    return rt::Status::error("the test module does not parse");
  codegen::CompileOptions options;
  if (!arch.empty()) {
    options.pipeline.devices = "cpu:0,gpu:0";
    options.cudaArch = arch;
  }
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*parsed.module, "main", options);
  if (mlir::failed(exe))
    return rt::Status::error("the test module does not compile (diagnostics above)");
  return std::move(*exe);
}

/// What the Executor hands the GPU executor for `text` placed on gpu:0: the one GPU segment of
/// the schedule, without the copies in and out.
rt::Expected<rt::Executable> gpuSegment(const std::string &text, const std::string &arch) {
  rt::Expected<rt::Executable> compiled = compileText(text, arch);
  if (!compiled)
    return compiled.status();
  if (compiled->segments.size() != 1)
    return rt::Status::error("not one segment:\n" + compiled->str());
  return rt::segmentExecutable(*compiled, 0);
}

void expectClose(const rt::HostTensor &got, const rt::HostTensor &ref, const std::string &what) {
  ASSERT_EQ(got.type(), ref.type()) << what;
  std::vector<double> g = got.toDoubles(), r = ref.toDoubles();
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    diff2 += (g[i] - r[i]) * (g[i] - r[i]);
    ref2 += r[i] * r[i];
  }
  EXPECT_LE(std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30), 1e-5)
      << what << " (seed " << rt::test::baseSeed() << ")";
}

/// `text` on the GPU and on the CPU, three runs of fresh inputs each: the executor is reused.
void expectGpuMatchesCpu(const char *text) {
  std::shared_ptr<CudaDevice> device = *gpu();
  rt::Expected<rt::Executable> onGpu = compileText(text, device->arch());
  rt::Expected<rt::Executable> onCpu = compileText(text, "");
  ASSERT_TRUE(onGpu.ok()) << onGpu.message();
  ASSERT_TRUE(onCpu.ok()) << onCpu.message();
  rt::Expected<GpuExecutor> gpuExec = GpuExecutor::create(*onGpu, device);
  ASSERT_TRUE(gpuExec.ok()) << gpuExec.message() << "\n" << onGpu->str();
  rt::Expected<rt::CpuExecutor> cpuExec = rt::CpuExecutor::create(*onCpu);
  ASSERT_TRUE(cpuExec.ok()) << cpuExec.message();
  for (int run = 0; run < 3; ++run) {
    std::vector<rt::HostTensor> inputs, got, want;
    for (rt::BufferId id : onCpu->inputs)
      inputs.push_back(rt::test::randomTensor(onCpu->buffers[id].type.dtype,
                                              onCpu->buffers[id].type.shape));
    rt::Status s = gpuExec->run(inputs, got);
    ASSERT_TRUE(s.ok()) << s.message();
    s = cpuExec->run(inputs, want);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      expectClose(got[i], want[i], "run " + std::to_string(run) + ", output #" + std::to_string(i));
  }
  EXPECT_GT(gpuExec->lastRunPeakBytes(), 0u);
}

TEST(GpuExecutor, CompiledFunctionsHaveOnlyGpuSteps) {
  for (const char *text : {kMlp, kConvPool, kGroupedConv, kAsymmetricConv, kExp, kArgmaxScatter}) {
    rt::Expected<rt::Executable> exe = compileText(text, "sm_90");
    ASSERT_TRUE(exe.ok()) << exe.message();
    rt::Status s = GpuExecutor::validate(*exe);
    EXPECT_TRUE(s.ok()) << s.message() << "\n" << exe->str();
  }
}

TEST(GpuExecutor, ArgmaxAndScatterAddRunTheirOwnKernels) {
  rt::Expected<rt::Executable> exe = compileText(kArgmaxScatter, "sm_90");
  ASSERT_TRUE(exe.ok()) << exe.message();
  for (rt::StepOp op : {rt::StepOp::Argmax, rt::StepOp::ScatterAdd}) {
    auto step = std::find_if(exe->steps.begin(), exe->steps.end(),
                             [&](const rt::Step &s) { return s.op == op; });
    ASSERT_NE(step, exe->steps.end()) << rt::stepOpName(op) << " is missing:\n" << exe->str();
    EXPECT_EQ(step->device, "gpu:0");
    ASSERT_NE(step->kernel(), rt::kNoKernel) << exe->str();
    const rt::FusedKernel &kernel = exe->kernels[size_t(step->kernel())];
    EXPECT_EQ(kernel.kind, rt::stepOpName(op));
    EXPECT_GT(kernel.cudaBlock, 0);
    EXPECT_NE(exe->cuda->source.find("void __launch_bounds__(" + std::to_string(kernel.cudaBlock) +
                                     ") " + kernel.name + "("),
              std::string::npos)
        << kernel.name << " is not in the CUDA source";
  }
  // No step on the CPU but the copies in and out: one GPU segment.
  for (const rt::Step &step : exe->steps)
    EXPECT_TRUE(step.device == "gpu:0" || step.op == rt::StepOp::Copy) << exe->str();
}

TEST(GpuExecutor, RefusesStepsWithoutAGpuKernel) {
  // A slice is a kernel the compiler makes; as a step (of a hand-built plan) only the CPU runs it.
  rt::Executable exe = rt::test::oneStep("slice", {rt::TensorType{rt::DType::f32, {4, 8}}},
                                         rt::TensorType{rt::DType::f32, {2, 8}},
                                         {{"start_indices", std::vector<int64_t>{0, 0}},
                                          {"limit_indices", std::vector<int64_t>{2, 8}},
                                          {"strides", std::vector<int64_t>{1, 1}}});
  rt::Status s = GpuExecutor::validate(exe);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'slice' (test.mlir:1:1) has no GPU kernel"), std::string::npos)
      << s.message();
  REQUIRE_GPU();
  rt::Expected<GpuExecutor> created = GpuExecutor::create(exe, *gpu());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.message(), s.message());
}

TEST(GpuExecutor, RefusesAKernelGivenTheWrongBuffers) {
  rt::Expected<rt::Executable> exe = compileText(kExp, "sm_90");
  ASSERT_TRUE(exe.ok()) << exe.message();
  ASSERT_FALSE(exe->kernels.empty());
  exe->kernels[0].inputs.push_back(exe->kernels[0].inputs[0]);
  rt::Status s = GpuExecutor::validate(*exe);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'fusion'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("but the step passes 1 operands"), std::string::npos) << s.message();
}

TEST(GpuExecutor, MlpMatchesTheCpu) {
  REQUIRE_GPU();
  expectGpuMatchesCpu(kMlp);
}

TEST(GpuExecutor, ConvPoolMatchesTheCpu) {
  REQUIRE_GPU();
  expectGpuMatchesCpu(kConvPool);
}

TEST(GpuExecutor, GroupedAndDepthwiseConvolutionsMatchTheCpu) {
  REQUIRE_GPU();
  expectGpuMatchesCpu(kGroupedConv);
}

TEST(GpuExecutor, AsymmetricPaddingPaddedByTheCompilerMatchesTheCpu) {
  REQUIRE_GPU();
  expectGpuMatchesCpu(kAsymmetricConv);
}

TEST(GpuExecutor, ArgmaxAndScatterAddMatchTheCpu) {
  REQUIRE_GPU();
  expectGpuMatchesCpu(kArgmaxScatter);
}

TEST(GpuExecutor, OutOfMemoryFailsTheRunAndLeavesTheExecutorUsable) {
  REQUIRE_GPU();
  std::shared_ptr<CudaDevice> device = *gpu();
  rt::Expected<rt::Executable> exe = compileText(kExp, device->arch());
  ASSERT_TRUE(exe.ok()) << exe.message();
  rt::MemoryPolicy policy;
  policy.limitBytes = 1536 << 10;
  rt::Expected<std::unique_ptr<rt::Allocator>> allocator = rt::Allocator::create(
      "gpu:0", std::make_unique<rt::cuda::CudaMemorySource>(device), policy);
  ASSERT_TRUE(allocator.ok()) << allocator.message();
  rt::Expected<GpuExecutor> exec = GpuExecutor::create(*exe, device, allocator->get());
  ASSERT_TRUE(exec.ok()) << exec.message();
  std::vector<rt::HostTensor> inputs{rt::test::randomTensor(rt::DType::f32, {512, 512})}, outputs;
  std::string first;
  for (int run = 0; run < 2; ++run) {
    rt::Status s = exec->run(inputs, outputs);
    ASSERT_FALSE(s.ok()) << "run " << run << " fit in 1.5 MiB";
    EXPECT_NE(s.message().find("out of memory for buffer b"), std::string::npos) << s.message();
    // The same buffer both times (what the allocator holds cached may differ).
    std::string which = s.message().substr(0, s.message().find(" it needs"));
    if (run == 0)
      first = which;
    EXPECT_EQ(which, first);
    // The failed run gave back every block it took.
    EXPECT_EQ((*allocator)->stats().inUseBytes, 0u);
  }
}

TEST(GpuExecutor, DonatedInputsGoBackAfterTheirLastReaderOrToTheCallerWhenARunFails) {
  REQUIRE_GPU();
  std::shared_ptr<CudaDevice> device = *gpu();
  rt::Expected<rt::Executable> exe = gpuSegment(kExp, device->arch());
  ASSERT_TRUE(exe.ok()) << exe.message();
  // x and exp(x) are 1 MiB each.
  auto withLimit = [&](uint64_t bytes) {
    rt::MemoryPolicy policy;
    policy.limitBytes = bytes;
    return rt::Allocator::create("gpu:0", std::make_unique<rt::cuda::CudaMemorySource>(device),
                                 policy);
  };
  rt::HostTensor x = rt::test::randomTensor(rt::DType::f32, {512, 512});
  auto upload = [&](rt::Allocator &allocator) -> rt::Value {
    rt::Expected<void *> block = allocator.allocate(x.byteSize(), "x");
    EXPECT_TRUE(block.ok()) << block.message();
    EXPECT_TRUE(device->copyToDevice(*block, x.raw(), x.byteSize()).ok());
    EXPECT_TRUE(device->synchronize("x").ok());
    return rt::cuda::cudaArray(x.type(), device, allocator, *block);
  };
  rt::RunValues donateAndKeep;
  donateAndKeep.donated = {1};
  donateAndKeep.keepOnDevice = {1};

  // 1.5 MiB: x on the device fits, exp(x) beside it does not. The failed run gives x back to
  // the caller, unchanged.
  auto small = withLimit(1536 << 10);
  ASSERT_TRUE(small.ok()) << small.message();
  rt::Expected<GpuExecutor> tight = GpuExecutor::create(*exe, device, small->get());
  ASSERT_TRUE(tight.ok()) << tight.message();
  rt::Value donated = upload(**small);
  std::vector<rt::Value> outputs;
  rt::Status s = tight->run({&donated}, outputs, donateAndKeep);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("out of memory"), std::string::npos) << s.message();
  ASSERT_TRUE(*donated.array()) << "the failed run kept the caller's donated x";
  rt::Expected<rt::HostTensor> back = donated.toHost();
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->toDoubles(), x.toDoubles());
  EXPECT_EQ((*small)->stats().inUseBytes, x.byteSize());

  // 2.5 MiB: the run takes x over, frees it once exp read it, and hands exp(x) back on the
  // device: 1 MiB in use after the run, not 2.
  auto large = withLimit(2560 << 10);
  ASSERT_TRUE(large.ok()) << large.message();
  rt::Expected<GpuExecutor> roomy = GpuExecutor::create(*exe, device, large->get());
  ASSERT_TRUE(roomy.ok()) << roomy.message();
  donated = upload(**large);
  s = roomy->run({&donated}, outputs, donateAndKeep);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(*donated.array()) << "the run took x over";
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_TRUE(outputs[0].onDevice());
  EXPECT_EQ((*large)->stats().inUseBytes, x.byteSize());
  rt::Expected<rt::HostTensor> y = outputs[0].toHost();
  ASSERT_TRUE(y.ok()) << y.message();
  std::vector<double> want = x.toDoubles();
  for (double &v : want)
    v = std::exp(v);
  EXPECT_LE(test::relError(y->toDoubles(), want), 1e-6);
  outputs.clear();
  EXPECT_EQ((*large)->stats().inUseBytes, 0u) << "the kept array went back when dropped";
}

// A loop that keeps its state on the GPU and donates it back, as a train step does: w <- tanh(w)
// with y = x w read out. From the second run on the steps go as one CUDA graph, captured for
// each set of blocks the state moves through and replayed after; every run's y and the last w
// are right (against float64), so no replay used a stale address. Off, each step is its own
// launch.
TEST(GpuExecutor, ARunReplaysACudaGraphWhileItsBuffersRepeat) {
  REQUIRE_GPU();
  std::shared_ptr<CudaDevice> device = *gpu();
  const char *text = R"mlir(
func.func @main(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>) -> (tensor<32x16xf32>, tensor<64x16xf32>) {
  %y = smelt.matmul %x, %w : tensor<64x32xf32>, tensor<32x16xf32>
  %next = smelt.tanh %w : tensor<32x16xf32>
  return %next, %y : tensor<32x16xf32>, tensor<64x16xf32>
}
)mlir";
  rt::Expected<rt::Executable> exe = gpuSegment(text, device->arch());
  ASSERT_TRUE(exe.ok()) << exe.message();
  // The segment takes and returns its values in the schedule's order: find them by shape.
  auto indexOf = [&](const std::vector<rt::BufferId> &ids, std::vector<int64_t> shape) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (exe->buffers[ids[i]].type.shape == shape)
        return i;
    ADD_FAILURE() << "no value of that shape";
    return size_t(0);
  };
  size_t xIn = indexOf(exe->inputs, {64, 32}), wIn = indexOf(exe->inputs, {32, 16});
  size_t wOut = indexOf(exe->outputs, {32, 16}), yOut = indexOf(exe->outputs, {64, 16});
  rt::RunValues donateAndKeep;
  donateAndKeep.donated.assign(2, 0);
  donateAndKeep.donated[wIn] = 1;
  donateAndKeep.keepOnDevice.assign(2, 0);
  donateAndKeep.keepOnDevice[wOut] = 1;
  constexpr int kRuns = 8;
  for (bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "graphs on" : "graphs off");
    rt::Expected<GpuExecutor> exec =
        GpuExecutor::create(*exe, device, nullptr, /*allowTf32=*/false, graphs);
    ASSERT_TRUE(exec.ok()) << exec.message();
    rt::HostTensor w0 = rt::test::randomTensor(rt::DType::f32, {32, 16});
    std::vector<double> w = w0.toDoubles();
    rt::Value state(std::move(w0));
    for (int run = 0; run < kRuns; ++run) {
      rt::HostTensor x = rt::test::randomTensor(rt::DType::f32, {64, 32});
      rt::Value batch = rt::Value::lent(x);
      std::vector<rt::Value *> inputs(2);
      inputs[xIn] = &batch;
      inputs[wIn] = &state;
      std::vector<rt::Value> outputs;
      rt::Status s = exec->run(inputs, outputs, donateAndKeep);
      ASSERT_TRUE(s.ok()) << "run " << run << ": " << s.message();
      ASSERT_EQ(outputs.size(), 2u);
      ASSERT_TRUE(outputs[wOut].onDevice()) << "run " << run;
      std::vector<double> xs = x.toDoubles(), want(64 * 16, 0.0);
      for (int i = 0; i < 64; ++i)
        for (int k = 0; k < 32; ++k)
          for (int j = 0; j < 16; ++j)
            want[i * 16 + j] += xs[i * 32 + k] * w[k * 16 + j];
      rt::Expected<rt::HostTensor> y = outputs[yOut].toHost();
      ASSERT_TRUE(y.ok()) << y.message();
      EXPECT_LE(test::relError(y->toDoubles(), want), 1e-5) << "run " << run;
      for (double &v : w)
        v = std::tanh(v);
      state = std::move(outputs[wOut]);
      rt::TransferStats launched = exec->lastRunTransfers();
      bool asGraph = graphs && run > 0;
      EXPECT_EQ(launched.graphLaunches, asGraph ? 1u : 0u) << "run " << run;
      EXPECT_EQ(launched.stepLaunches, asGraph ? 0u : exe->steps.size()) << "run " << run;
    }
    rt::Expected<rt::HostTensor> last = state.toHost();
    ASSERT_TRUE(last.ok()) << last.message();
    EXPECT_LE(test::relError(last->toDoubles(), w), 1e-5);
    GpuExecutor::GraphStats stats = exec->graphStats();
    if (graphs) {
      EXPECT_EQ(stats.off, "");
      EXPECT_EQ(stats.captured + stats.replayed, kRuns - 1);
      // One for the state as uploaded from the host, then one for each of the two sets of
      // blocks it alternates between: the rest replay.
      EXPECT_LE(stats.captured, 3) << "replayed " << stats.replayed;
    } else {
      EXPECT_NE(stats.off.find("--cuda-graphs=false"), std::string::npos) << stats.off;
      EXPECT_EQ(stats.captured + stats.replayed, 0);
    }
  }
}

// A train step's update, w - 0.25 g with w donated (smelt.donated) and returned under its own
// name: smelt-donate-in-place writes the new w into w's block, so the state never takes a
// second block. Run after run the state stays at one address, each run's w is right against
// float64, and the runs after the first replay the one CUDA graph captured for that address.
TEST(GpuExecutor, ADonatedStateIsUpdatedInItsOwnBlock) {
  REQUIRE_GPU();
  std::shared_ptr<CudaDevice> device = *gpu();
  const char *text = R"mlir(
func.func @main(%w: tensor<64x48xf32> {smelt.donated, smelt.name = "w"}, %g: tensor<64x48xf32>)
    -> (tensor<64x48xf32> {smelt.name = "w"}) {
  %rate = smelt.constant dense<0.25> : tensor<64x48xf32>
  %step = smelt.mul %rate, %g : tensor<64x48xf32>
  %new = smelt.sub %w, %step : tensor<64x48xf32>
  return %new : tensor<64x48xf32>
}
)mlir";
  rt::Expected<rt::Executable> exe = gpuSegment(text, device->arch());
  ASSERT_TRUE(exe.ok()) << exe.message();
  // The compiler chose it: the fusion's one result goes in place of w.
  ASSERT_EQ(exe->steps.size(), 1u) << exe->str();
  const rt::KernelParams *kernel = exe->steps[0].paramsAs<rt::KernelParams>();
  ASSERT_TRUE(kernel);
  int64_t operand = kernel->inPlace.empty() ? -1 : kernel->inPlace[0];
  ASSERT_GE(operand, 0) << exe->str();
  size_t wIn = size_t(
      std::find(exe->inputs.begin(), exe->inputs.end(), exe->steps[0].operands[size_t(operand)]) -
      exe->inputs.begin());
  ASSERT_LT(wIn, 2u);
  rt::Expected<rt::Executable> whole = compileText(text, device->arch());
  ASSERT_TRUE(whole.ok()) << whole.message();
  ASSERT_TRUE(whole->peakBytes.count("gpu:0")) << whole->str();
  uint64_t compiledPeak = whole->peakBytes.at("gpu:0");
  rt::Expected<GpuExecutor> exec = GpuExecutor::create(*exe, device);
  ASSERT_TRUE(exec.ok()) << exec.message();
  rt::RunValues donate;
  donate.donated.assign(2, 0);
  donate.donated[wIn] = 1;
  donate.keepOnDevice = {1};
  rt::HostTensor w0 = rt::test::randomTensor(rt::DType::f32, {64, 48});
  std::vector<double> want = w0.toDoubles();
  rt::Value state(std::move(w0));
  void *home = nullptr;
  constexpr int kRuns = 5;
  for (int run = 0; run < kRuns; ++run) {
    rt::HostTensor g = rt::test::randomTensor(rt::DType::f32, {64, 48});
    std::vector<double> gs = g.toDoubles();
    for (size_t i = 0; i < want.size(); ++i)
      want[i] -= 0.25 * gs[i];
    rt::Value lent = rt::Value::lent(g);
    std::vector<rt::Value *> inputs(2, &lent);
    inputs[wIn] = &state;
    std::vector<rt::Value> outputs;
    rt::Status s = exec->run(inputs, outputs, donate);
    ASSERT_TRUE(s.ok()) << "run " << run << ": " << s.message();
    ASSERT_TRUE(outputs[0].onDevice());
    void *address = outputs[0].array()->address();
    if (run == 0)
      home = address;
    EXPECT_EQ(address, home) << "run " << run << ": the state moved to another block";
    state = std::move(outputs[0]);
    rt::Expected<rt::HostTensor> got = state.toHost();
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_LE(test::relError(got->toDoubles(), want), 1e-6) << "run " << run;
    // w and g, copied in or donated, and no second w: what smelt-assign-buffers said.
    EXPECT_EQ(exec->lastRunPeakBytes(), uint64_t(2 * 64 * 48 * 4)) << "run " << run;
    EXPECT_EQ(exec->lastRunPeakBytes(), compiledPeak) << "run " << run;
  }
  GpuExecutor::GraphStats stats = exec->graphStats();
  EXPECT_EQ(stats.captured, 1) << stats.off;
  EXPECT_EQ(stats.replayed, kRuns - 2);
}

#ifdef SMELT_TEST_NCCL
// Two all_reduces (a mean and a sum: two buckets) between GPU kernels, the first one's result
// read again on the GPU after it.
const char *const kAllReduces = R"mlir(
func.func @main(%x: tensor<256xf32>, %y: tensor<64xf32>) -> (tensor<256xf32>, tensor<64xf32>) {
  %a = smelt.exp %x : tensor<256xf32>
  %r = smelt.all_reduce mean %a replicas = 2 : tensor<256xf32>
  %b = smelt.tanh %y : tensor<64xf32>
  %s = smelt.all_reduce sum %b replicas = 2 : tensor<64xf32>
  %t = smelt.mul %r, %r : tensor<256xf32>
  return %t, %s : tensor<256xf32>, tensor<64xf32>
}
)mlir";

TEST(GpuExecutor, NcclAllReducesRunOnTheExecutorsStreamWithNoHostWaitInside) {
  REQUIRE_GPU();
  rt::Expected<std::shared_ptr<CudaDevice>> second = CudaDevice::open(1);
  if (!second.ok()) {
    // Not a skip: gpu-check.sh counts a skip beside a GPU as a failure, and a machine with one
    // GPU has no second rank to reduce with.
    std::cout << "[   NOTE   ] one GPU: two NCCL ranks need two; not checked\n";
    return;
  }
  std::shared_ptr<CudaDevice> devices[2] = {*gpu(), *second};
  rt::Expected<rt::Executable> compiled = compileText(kAllReduces, devices[0]->arch());
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  ASSERT_EQ(compiled->segments.size(), 1u) << compiled->str();
  rt::Expected<rt::Executable> segment = rt::segmentExecutable(*compiled, 0);
  ASSERT_TRUE(segment.ok()) << segment.message();
  // Fresh random inputs every run: a replayed graph must read this run's data.
  auto expect = [](const rt::HostTensor *x, const rt::HostTensor *y) {
    std::vector<double> t(256), sum(64);
    for (size_t i = 0; i < 256; ++i) {
      double mean = (std::exp(x[0].toDoubles()[i]) + std::exp(x[1].toDoubles()[i])) / 2;
      t[i] = mean * mean;
    }
    for (size_t i = 0; i < 64; ++i)
      sum[i] = std::tanh(y[0].toDoubles()[i]) + std::tanh(y[1].toDoubles()[i]);
    return std::pair{t, sum};
  };

  // On the stream (the fast mode) the host waits only at the end of the run, and from the
  // second run on the whole step, both all_reduces included, is one CUDA graph. The
  // deterministic mode reduces on the host, so it also waits for the GPU before each
  // collective and for the gathered buffers, and no graph can hold that.
  constexpr int kRuns = 4;
  uint64_t waits[2] = {};
  for (bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "on the stream");
    auto comms = rt::cuda::createNcclCommunicators(
        {0, 1}, {.timeoutSeconds = 60, .deterministic = deterministic});
    ASSERT_TRUE(comms.ok()) << comms.message();
    std::vector<GpuExecutor> execs;
    for (int r = 0; r < 2; ++r) {
      rt::Expected<GpuExecutor> exec = GpuExecutor::create(
          r == 0 ? *segment : rt::movedToDevice(*segment, "gpu:0", "gpu:1"), devices[r]);
      ASSERT_TRUE(exec.ok()) << exec.message();
      exec->setCommunicator((*comms)[size_t(r)].get());
      execs.push_back(std::move(*exec));
    }
    for (int run = 0; run < kRuns; ++run) {
      rt::HostTensor x[2], y[2];
      for (int r = 0; r < 2; ++r) {
        x[r] = rt::test::randomTensor(rt::DType::f32, {256});
        y[r] = rt::test::randomTensor(rt::DType::f32, {64});
      }
      auto [wantT, wantS] = expect(x, y);
      rt::Status status[2];
      std::vector<rt::HostTensor> outputs[2];
      std::vector<std::thread> replicas;
      for (int r = 0; r < 2; ++r)
        replicas.emplace_back([&, r] {
          status[r] = execs[size_t(r)].run({&x[r], &y[r]}, outputs[r]);
        });
      for (std::thread &t : replicas)
        t.join();
      for (int r = 0; r < 2; ++r) {
        SCOPED_TRACE("run " + std::to_string(run) + ", replica " + std::to_string(r));
        ASSERT_TRUE(status[r].ok()) << status[r].message();
        // The segment returns its writes in the order it computes them: the sum, then t.
        ASSERT_EQ(outputs[r].size(), 2u);
        EXPECT_LE(test::relError(outputs[r][1].toDoubles(), wantT), 1e-6);
        EXPECT_LE(test::relError(outputs[r][0].toDoubles(), wantS), 1e-6);
        rt::TransferStats launched = execs[size_t(r)].lastRunTransfers();
        bool asGraph = !deterministic && run > 0;
        EXPECT_EQ(launched.graphLaunches, asGraph ? 1u : 0u) << launched.launchStr();
        EXPECT_EQ(launched.stepLaunches == 0, asGraph) << launched.launchStr();
      }
      waits[deterministic] = execs[0].lastRunTransfers().hostSyncs;
    }
    for (int r = 0; r < 2; ++r) {
      GpuExecutor::GraphStats stats = execs[size_t(r)].graphStats();
      if (deterministic) {
        EXPECT_NE(stats.off.find("deterministic"), std::string::npos) << stats.off;
        EXPECT_EQ(stats.captured, 0);
      } else {
        EXPECT_EQ(stats.off, "");
        EXPECT_EQ(stats.captured + stats.replayed, kRuns - 1);
        EXPECT_GE(stats.replayed, 1);
      }
    }
  }
  // On the stream, a graph run waits twice, both at its end: for the fence behind the graph's
  // collectives (the watchdog's bounded wait) and for its outputs.
  EXPECT_EQ(waits[0], 2u);
  EXPECT_GT(waits[1], waits[0]);
}
#endif

} // namespace
} // namespace smelt::cuda_test
