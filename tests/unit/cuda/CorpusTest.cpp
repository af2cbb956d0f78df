// The op x dtype corpus (OpCorpus.cpp) rendered as one NVRTC program, compiled for sm_90 and
// assembled by ptxas.
#include "CudaTestUtil.h"

#include <chrono>
#include <iostream>

namespace smelt::cuda_test {
namespace {

TEST(CudaCorpus, EveryOpInEveryDtypeCompilesAndAssembles) {
  OpCorpus corpus = everyOpInEveryDtype();
  ParsedModule parsed = parseModule(corpus.mlir);
  ASSERT_TRUE(parsed.main);
  ASSERT_EQ(int(parsed.fusions.size()), corpus.fusions);

  auto start = std::chrono::steady_clock::now();
  mlir::FailureOr<rt::CudaCode> code =
      codegen::compileCudaKernels(parsed.kernelOps, parsed.kernels, "sm_90");
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(mlir::succeeded(code));
  std::cout << "NVRTC rendered and compiled " << corpus.fusions << " kernels ("
            << code->source.size() / 1024 << " KiB of CUDA, " << code->cubin.size() / 1024
            << " KiB of CUBIN) for sm_90 in " << int(ms) << " ms\n";
  RecordProperty("nvrtc_ms", int(ms));
  for (const rt::FusedKernel &kernel : parsed.kernels)
    EXPECT_NE(code->ptx.find(".entry " + kernel.name + "("), std::string::npos) << kernel.name;
  EXPECT_EQ(ptxasErrors(code->ptx, "sm_90"), "");
}

} // namespace
} // namespace smelt::cuda_test
