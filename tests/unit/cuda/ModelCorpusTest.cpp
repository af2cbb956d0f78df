// Every kernel the seed models need, as the compiler makes them: the MLP and CNN training
// steps (forward, backward, softmax cross-entropy, Adam) and evaluation steps, in f32 and
// under both mixed-precision policies, fused by the default pipeline, rendered as one CUDA
// module per function, compiled by NVRTC for sm_90 and assembled by ptxas.
#include "CudaTestUtil.h"

#include "passes/Passes.h"
#include "train/Trainer.h"

#include "mlir/Pass/PassManager.h"

namespace smelt::cuda_test {
namespace {

struct ModelCase {
  const char *model;
  PrecisionPolicy precision;
};

class CudaModelCorpus : public testing::TestWithParam<ModelCase> {};

TEST_P(CudaModelCorpus, EveryKernelCompilesAndAssembles) {
  mlir::MLIRContext context;
  train::TrainConfig config;
  config.model = GetParam().model;
  config.precision = GetParam().precision;
  std::unique_ptr<Graph> graph = train::buildTrainStep(context, config);
  mlir::PassManager pm(&context);
  buildDefaultPipeline(pm, PipelineOptions{});
  ASSERT_TRUE(mlir::succeeded(pm.run(graph->module())));
  size_t kernels = 0;
  for (auto function : graph->module().getOps<mlir::func::FuncOp>()) {
    // Appended rather than "@" + ...: GCC 12 warns there (-Wrestrict, a false positive).
    SCOPED_TRACE(std::string("@").append(function.getSymName()));
    mlir::FailureOr<codegen::CudaFunctionCode> compiled =
        codegen::compileCudaFunction(function, "sm_90");
    ASSERT_TRUE(mlir::succeeded(compiled));
    for (const rt::FusedKernel &kernel : compiled->kernels) {
      EXPECT_NE(compiled->code.ptx.find(".entry " + kernel.name + "("), std::string::npos)
          << kernel.name << " (" << kernel.ops << ") is missing from the PTX";
      EXPECT_GT(kernel.cudaGrid, 0) << kernel.name;
    }
    if (!compiled->kernels.empty()) {
      EXPECT_FALSE(compiled->code.cubin.empty());
      EXPECT_EQ(ptxasErrors(compiled->code.ptx, "sm_90"), "");
    }
    kernels += compiled->kernels.size();
  }
  // The training step alone fuses into a few dozen kernels; none would mean fusion is off.
  EXPECT_GE(kernels, 10u);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaModelCorpus,
                         testing::Values(ModelCase{"mlp", PrecisionPolicy::f32},
                                         ModelCase{"mlp", PrecisionPolicy::mixed_bf16},
                                         ModelCase{"mlp", PrecisionPolicy::mixed_f16},
                                         ModelCase{"cnn", PrecisionPolicy::f32},
                                         ModelCase{"cnn", PrecisionPolicy::mixed_bf16}),
                         [](const testing::TestParamInfo<ModelCase> &info) {
                           return std::string(info.param.model) + "_" +
                                  precisionPolicyName(info.param.precision).str();
                         });

} // namespace
} // namespace smelt::cuda_test
