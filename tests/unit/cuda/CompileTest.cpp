// Every kernel of the shared fusion cases compiled by NVRTC for sm_90 and its PTX assembled by
// ptxas, with no GPU; and what a failed compile reports.
#include "CudaTestUtil.h"

#include "codegen/cuda/Nvrtc.h"
#include "passes/Passes.h"
#include "tests/unit/ScopedEnvironment.h"

#include "mlir/Pass/PassManager.h"

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace smelt::cuda_test {
namespace {

class CudaCompile : public testing::TestWithParam<FusionCase> {};

TEST_P(CudaCompile, NvrtcBuildsCubinAndPtxasAcceptsThePtx) {
  ParsedModule parsed = parseModule(GetParam().mlir);
  ASSERT_TRUE(parsed.main);
  mlir::FailureOr<rt::CudaCode> code =
      codegen::compileCudaKernels(parsed.kernelOps, parsed.kernels, "sm_90");
  ASSERT_TRUE(mlir::succeeded(code));
  EXPECT_EQ(code->arch, "sm_90");
  EXPECT_FALSE(code->cubin.empty());
  for (const rt::FusedKernel &kernel : parsed.kernels) {
    EXPECT_NE(code->ptx.find(".entry " + kernel.name + "("), std::string::npos)
        << kernel.name << " is missing from the PTX";
    EXPECT_GT(kernel.cudaBlock, 0);
    EXPECT_GT(kernel.cudaGrid, 0);
  }
  EXPECT_EQ(ptxasErrors(code->ptx, "sm_90"), "");
}

// #0 and #1 compute one body on other inputs, #2 another (its constant): #0's body is
// rendered once as a device function, #0's and #1's entries call it, #2 is a kernel as usual;
// all three entries are in the PTX, with the launch their body was written for.
TEST(CudaCompile, EquivalentFusionsShareOneBody) {
  const char *body = R"(
  ^bb0(%a: tensor<4096xf32>, %b: tensor<4096xf32>):
    %c = smelt.constant dense<C> : tensor<4096xf32>
    %m = smelt.mul %a, %b : tensor<4096xf32>
    %s = smelt.add %m, %c : tensor<4096xf32>
    smelt.yield %s : tensor<4096xf32>
  })";
  auto fusion = [&](const std::string &result, const std::string &inputs, const char *c) {
    std::string text = body;
    text.replace(text.find("C>"), 1, c);
    return "  " + result + " = smelt.fusion loop (" + inputs +
           ") : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32> {" + text + "\n";
  };
  ParsedModule parsed = parseModule(
      "func.func @main(%x: tensor<4096xf32>, %y: tensor<4096xf32>) -> (tensor<4096xf32>, "
      "tensor<4096xf32>, tensor<4096xf32>) {\n" +
      fusion("%0", "%x, %y", "1.5") + fusion("%1", "%y, %0", "1.5") + fusion("%2", "%x, %1", "2.5") +
      "  return %0, %1, %2 : tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>\n}\n");
  ASSERT_TRUE(parsed.main);
  std::string source = render(parsed);
  auto count = [&](const std::string &part) {
    size_t n = 0;
    for (size_t at = source.find(part); at != std::string::npos; at = source.find(part, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("SMELT_SHARED_BODY void "), 1u) << source;
  EXPECT_EQ(count("SMELT_SHARED_BODY void main_fusion0_body("), 1u) << source;
  EXPECT_EQ(count("  main_fusion0_body(in0, in1, out0);\n"), 2u) << source;
  EXPECT_EQ(count("__global__ void __launch_bounds__("), 3u) << source;
  EXPECT_EQ(parsed.kernels[0].cudaGrid, parsed.kernels[1].cudaGrid);
  EXPECT_EQ(parsed.kernels[0].cudaBlock, parsed.kernels[1].cudaBlock);

  mlir::FailureOr<rt::CudaCode> code =
      codegen::compileCudaKernels(parsed.kernelOps, parsed.kernels, "sm_90");
  ASSERT_TRUE(mlir::succeeded(code));
  for (const rt::FusedKernel &kernel : parsed.kernels)
    EXPECT_NE(code->ptx.find(".entry " + kernel.name + "("), std::string::npos)
        << kernel.name << " is missing from the PTX";
  EXPECT_NE(code->ptx.find("main_fusion0_body"), std::string::npos) << code->ptx;
  EXPECT_EQ(ptxasErrors(code->ptx, "sm_90"), "");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaCompile, testing::ValuesIn(fusionCases()),
                         [](const testing::TestParamInfo<FusionCase> &info) {
                           return std::string(info.param.name);
                         });

/// The PTX of one case, for checks of what the CUDA compiler made of the source.
std::string ptxOf(const char *name) {
  for (const FusionCase &c : fusionCases())
    if (std::string(name) == c.name) {
      ParsedModule parsed = parseModule(c.mlir);
      mlir::FailureOr<rt::CudaCode> code =
          codegen::compileCudaKernels(parsed.kernelOps, parsed.kernels, "sm_90");
      return mlir::succeeded(code) ? code->ptx : "";
    }
  return "";
}

TEST(CudaCompile, VectorSourceBecomes16ByteLoadsAndStores) {
  std::string ptx = ptxOf("ElementwiseChain");
  EXPECT_NE(ptx.find("ld.global.nc.v4.f32"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("st.global.v4.f32"), std::string::npos) << ptx;
  ptx = ptxOf("HalfConverts");
  EXPECT_NE(ptx.find("ld.global.nc.v4"), std::string::npos) << "8 halves are 16 bytes\n" << ptx;
}

// --cuda-fmad: on (the default), a multiply feeding an add becomes one FMA, rounded once; off,
// NVRTC writes the product and the sum with explicit rounding (mul.rn, add.rn), which ptxas may
// not contract either, so each rounds as the CPU kernels round it.
TEST(CudaCompile, FmadDecidesWhetherAMultiplyAddBecomesOneFma) {
  auto ptx = [](bool fmad) {
    ParsedModule parsed = parseModule(R"mlir(
func.func @main(%x: tensor<256xf32>, %y: tensor<256xf32>, %z: tensor<256xf32>) -> tensor<256xf32> {
  %r = smelt.fusion loop (%x, %y, %z) : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32> {
  ^bb0(%a: tensor<256xf32>, %b: tensor<256xf32>, %c: tensor<256xf32>):
    %0 = smelt.mul %a, %b : tensor<256xf32>
    %1 = smelt.add %0, %c : tensor<256xf32>
    smelt.yield %1 : tensor<256xf32>
  }
  return %r : tensor<256xf32>
}
)mlir");
    mlir::FailureOr<rt::CudaCode> code =
        codegen::compileCudaKernels(parsed.kernelOps, parsed.kernels, "sm_90", fmad);
    return mlir::succeeded(code) ? code->ptx : "";
  };
  std::string contracted = ptx(true), rounded = ptx(false);
  EXPECT_NE(contracted.find("fma.rn.f32"), std::string::npos) << contracted;
  EXPECT_EQ(rounded.find("fma.rn.f32"), std::string::npos) << rounded;
  EXPECT_NE(rounded.find("mul.rn.f32"), std::string::npos) << rounded;
  EXPECT_NE(rounded.find("add.rn.f32"), std::string::npos) << rounded;
  EXPECT_EQ(ptxasErrors(rounded, "sm_90"), "");
}

TEST(CudaCompile, ReductionsShuffleWithinWarps) {
  EXPECT_NE(ptxOf("ReduceSumLastAxis").find("shfl.sync.down"), std::string::npos);
  EXPECT_NE(ptxOf("ReduceMaxLongRows").find("bar.sync"), std::string::npos);
}

// The entry point a model-level test uses: a function after the default pipeline, every fusion
// the fuse pass made compiled under the names buildExecutable gives them.
TEST(CudaCompile, EveryFusionOfAFunctionAfterTheDefaultPipeline) {
  ParsedModule parsed = parseModule(R"mlir(
func.func @main(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> (tensor<64x16xf32>, tensor<64xf32>) {
  %0 = smelt.matmul %x, %w : tensor<64x32xf32>, tensor<32x16xf32>
  %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<16xf32> -> tensor<64x16xf32>
  %2 = smelt.add %0, %1 : tensor<64x16xf32>
  %3 = smelt.relu %2 : tensor<64x16xf32>
  %4 = smelt.mul %3, %3 : tensor<64x16xf32>
  %5 = smelt.reduce sum %4 axes = [1] : tensor<64x16xf32>
  return %3, %5 : tensor<64x16xf32>, tensor<64xf32>
}
)mlir");
  ASSERT_TRUE(parsed.main);
  mlir::PassManager pm(parsed.context.get());
  PipelineOptions options;
  options.fuse = true;
  buildDefaultPipeline(pm, options);
  ASSERT_TRUE(mlir::succeeded(pm.run(*parsed.module)));
  mlir::FailureOr<codegen::CudaFunctionCode> compiled =
      codegen::compileCudaFunction(parsed.main, "sm_90");
  ASSERT_TRUE(mlir::succeeded(compiled));
  ASSERT_FALSE(compiled->kernels.empty()) << "the fuse pass made no fusion";
  for (auto [i, kernel] : llvm::enumerate(compiled->kernels)) {
    EXPECT_EQ(kernel.name, "main_fusion" + std::to_string(i));
    EXPECT_NE(compiled->code.ptx.find(".entry " + kernel.name + "("), std::string::npos);
  }
  EXPECT_EQ(ptxasErrors(compiled->code.ptx, "sm_90"), "");
}

TEST(CudaCompile, PtxOnlyForAVirtualArchitecture) {
  rt::Expected<rt::CudaCode> code =
      codegen::compileWithNvrtc("extern \"C\" __global__ void k() {}", "compute_90");
  ASSERT_TRUE(code.ok()) << code.message();
  EXPECT_TRUE(code->cubin.empty());
  EXPECT_NE(code->ptx.find(".entry k"), std::string::npos);
}

TEST(CudaCompile, AFailedCompileShowsNvrtcsLogAndTheNumberedSource) {
  rt::Expected<rt::CudaCode> code = codegen::compileWithNvrtc(
      "extern \"C\" __global__ void k(float *out) {\n  out[0] = undeclared;\n}\n", "sm_90");
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.message().find("could not compile the CUDA source for sm_90"), std::string::npos)
      << code.message();
  EXPECT_NE(code.message().find("identifier \"undeclared\" is undefined"), std::string::npos)
      << code.message();
  EXPECT_NE(code.message().find("    2    out[0] = undeclared;"), std::string::npos)
      << code.message();
}

// A machine with the wheels of scripts/setup.sh --cuda-wheels D and no toolkit: NVRTC's headers
// come from D/nvidia/cu13/include (the nvidia-cuda-runtime wheel), D named in
// SMELT_CUDA_LIBRARY_PATH.
TEST(CudaCompile, HeadersFromTheWheelsInSmeltCudaLibraryPath) {
  namespace fs = std::filesystem;
  fs::path wheels = fs::temp_directory_path() / ("smelt-wheels-" + std::to_string(getpid()));
  fs::create_directories(wheels / "nvidia/cu13/include");
  std::ofstream(wheels / "nvidia/cu13/include/cuda_fp16.h") << "// stand-in\n";
  {
    test::ScopedEnvironment include("SMELT_CUDA_INCLUDE", std::nullopt);
    test::ScopedEnvironment home("CUDA_HOME", std::nullopt);
    test::ScopedEnvironment path("CUDA_PATH", std::nullopt);
    test::ScopedEnvironment libraries("SMELT_CUDA_LIBRARY_PATH",
                                      "/nonexistent/smelt:" + wheels.string());
    rt::Expected<std::string> dir = codegen::cudaIncludeDir();
    ASSERT_TRUE(dir.ok()) << dir.message();
    EXPECT_EQ(*dir, (wheels / "nvidia/cu13/include").string());
  }
  fs::remove_all(wheels);
}

TEST(CudaCompile, NoFusionsGiveEmptyCode) {
  std::vector<rt::FusedKernel> none;
  mlir::FailureOr<rt::CudaCode> code = codegen::compileCudaKernels({}, none, "sm_90");
  ASSERT_TRUE(mlir::succeeded(code));
  EXPECT_TRUE(code->source.empty());
}

} // namespace
} // namespace smelt::cuda_test
