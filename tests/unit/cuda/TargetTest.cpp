// compile() hands each target the fusions placed on its devices: with a GPU the CUDA target
// compiles the GPU's kernels and the CPU target only the CPU's (a GPU-only kernel has no CPU
// entry); a CUDA artifact carries CPU code for every kernel too and runs, with no GPU, to the
// numbers of a CPU compile. NVRTC runs here; nothing needs a GPU.
#include "CudaTestUtil.h"
#include "RuntimeTestUtil.h"

#include "codegen/CompileArtifact.h"

#include "mlir/Parser/Parser.h"

namespace smelt::cuda_test {
namespace {

// The softmax runs where the default puts it (gpu:0); the exp of its output was asked for on
// the CPU.
const char *kPlaced = R"mlir(
func.func @main(%x: tensor<16x40xf32>) -> (tensor<16x40xf32>, tensor<16x40xf32>) {
  %0 = smelt.reduce max %x axes = [1] : tensor<16x40xf32>
  %1 = smelt.broadcast_in_dim %0, dims = [0] : tensor<16xf32> -> tensor<16x40xf32>
  %2 = smelt.sub %x, %1 : tensor<16x40xf32>
  %3 = smelt.exp %2 : tensor<16x40xf32>
  %4 = smelt.exp %3 {smelt.device = "cpu:0"} : tensor<16x40xf32>
  return %3, %4 : tensor<16x40xf32>, tensor<16x40xf32>
}
)mlir";

codegen::CompileOptions gpuOptions() {
  codegen::CompileOptions options;
  options.pipeline.devices = "cpu:0,gpu:0";
  options.cudaArch = "sm_90";
  return options;
}

TEST(Targets, EachCompilesOnlyTheFusionsPlacedOnItsDevices) {
  ParsedModule parsed = parseModule(kPlaced);
  ASSERT_TRUE(parsed.main);
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*parsed.module, "", gpuOptions());
  ASSERT_TRUE(mlir::succeeded(exe));
  ASSERT_TRUE(exe->cpu && exe->cuda);
  ASSERT_EQ(exe->cpu->entries.size(), exe->kernels.size());
  size_t onGpu = 0, onCpu = 0;
  for (const rt::Step &step : exe->steps) {
    if (step.op != rt::StepOp::Fusion)
      continue;
    size_t k = size_t(std::get<rt::KernelParams>(step.params).kernel);
    const rt::FusedKernel &kernel = exe->kernels[k];
    bool inPtx = exe->cuda->ptx.find(".entry " + kernel.name + "(") != std::string::npos;
    if (step.device == "gpu:0") {
      ++onGpu;
      EXPECT_TRUE(inPtx) << kernel.name;
      EXPECT_GT(kernel.cudaBlock, 0) << kernel.name;
      EXPECT_EQ(exe->cpu->entries[k], nullptr) << kernel.name << " was compiled for the CPU";
    } else {
      ++onCpu;
      EXPECT_FALSE(inPtx) << kernel.name << " was compiled for the GPU";
      EXPECT_EQ(kernel.cudaBlock, 0) << kernel.name;
      EXPECT_NE(exe->cpu->entries[k], nullptr) << kernel.name;
    }
  }
  EXPECT_GE(onGpu, 1u);
  EXPECT_EQ(onCpu, 1u);
}

TEST(Targets, ACudaArtifactAlsoRunsOnTheCpuAsACpuCompileDoes) {
  ParsedModule parsed = parseModule(kPlaced);
  ASSERT_TRUE(parsed.main);
  codegen::CompileOptions options = gpuOptions();
  options.cudaArch.clear(); // compileArtifact takes the arch from the target
  mlir::FailureOr<codegen::CompiledArtifact> artifact =
      codegen::compileArtifact(*parsed.module, "", options, "cuda:sm_90");
  ASSERT_TRUE(mlir::succeeded(artifact));
  const rt::Executable &exe = artifact->executable;
  ASSERT_TRUE(exe.cuda);
  ASSERT_EQ(artifact->extras.cpuSymbols.size(), exe.kernels.size());
  for (size_t k = 0; k < exe.kernels.size(); ++k) {
    EXPECT_EQ(artifact->extras.cpuSymbols[k], exe.kernels[k].name);
    EXPECT_NE(exe.cpu->entries[k], nullptr);
  }
  mlir::FailureOr<rt::Executable> cpuOnly = codegen::compile(*parsed.module);
  ASSERT_TRUE(mlir::succeeded(cpuOnly));
  rt::HostTensor x = rt::test::randomTensor(rt::DType::f32, {16, 40});
  std::vector<rt::HostTensor> got, want;
  rt::Expected<rt::CpuExecutor> fallback = rt::CpuExecutor::create(exe);
  ASSERT_TRUE(fallback.ok()) << fallback.message();
  ASSERT_TRUE(fallback->run({x}, got).ok());
  rt::Expected<rt::CpuExecutor> reference = rt::CpuExecutor::create(*cpuOnly);
  ASSERT_TRUE(reference.ok()) << reference.message();
  ASSERT_TRUE(reference->run({x}, want).ok());
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(got[i].toDoubles(), want[i].toDoubles()) << "output " << i;
}

} // namespace
} // namespace smelt::cuda_test
