// Every kernel the seed models need, as the compiler makes them: the MLP and CNN training
// steps (forward, backward, softmax cross-entropy, Adam) and evaluation steps, in f32 and
// under both mixed-precision policies, fused by the default pipeline, rendered as one CUDA
// module per function, compiled by NVRTC for sm_90 and assembled by ptxas.
#include "CudaTestUtil.h"

namespace smelt::cuda_test {
namespace {

class CudaModelCorpus : public testing::TestWithParam<ModelCase> {};

TEST_P(CudaModelCorpus, EveryKernelCompilesAndAssembles) {
  mlir::MLIRContext context;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> steps = fusedModelSteps(context, GetParam());
  ASSERT_EQ(steps.size(), 2u) << "the default pipeline failed";
  size_t kernels = 0;
  for (mlir::OwningOpRef<mlir::ModuleOp> &module : steps)
    for (auto function : module->getOps<mlir::func::FuncOp>()) {
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

// Placed on a GPU, every op of a model's steps keeps a device through every rewrite after
// placement (fusion, epilogues, mixed precision's casts), and only the ops with no GPU kernel
// yet stay on the CPU. An op left without a device lands on cpu:0 later, and the step goes
// through the host (mixed precision's bias casts once did). argmax (the accuracy) and
// scatter_add (an embedding's gradient) run on the GPU, so a training step is one GPU segment.
TEST_P(CudaModelCorpus, EveryOpOfAGpuStepHasADeviceAndOnlyFallbacksAreOnTheCpu) {
  mlir::MLIRContext context;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> steps =
      fusedModelSteps(context, GetParam(), "cpu:0,gpu:0");
  ASSERT_EQ(steps.size(), 2u) << "the default pipeline failed";
  size_t onGpu = 0, ownKernels = 0;
  for (mlir::OwningOpRef<mlir::ModuleOp> &module : steps)
    for (auto function : module->getOps<mlir::func::FuncOp>())
      for (mlir::Operation &op : function.getBody().front().without_terminator()) {
        auto device = op.getAttrOfType<mlir::StringAttr>("smelt.device");
        std::string what = op.getName().getStringRef().str() + " in @" +
                           function.getSymName().str();
        ASSERT_TRUE(device) << what << " has no device";
        if (mlir::isa<ArgmaxOp, ScatterAddOp>(op))
          ++ownKernels;
        if (device.getValue() == "gpu:0") {
          ++onGpu;
          continue;
        }
        EXPECT_EQ(device.getValue(), "cpu:0") << what;
        // What has no GPU kernel yet (docs/ops.md), and the copies that feed it; the initial
        // weights (rng_normal in @train_step_init) are drawn on the GPU.
        EXPECT_TRUE((mlir::isa<ReplicaIdOp, CopyOp>(op)))
            << what << " is on the CPU: " << device.getValue().str();
      }
  EXPECT_GT(onGpu, 10u);
  // Every model's steps count their accuracy with argmax (the GPT's embedding gradients add
  // scatter_adds): the check above saw them on the GPU.
  EXPECT_GE(ownKernels, 1u);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaModelCorpus, testing::ValuesIn(modelCases()),
                         [](const testing::TestParamInfo<ModelCase> &info) {
                           return modelCaseName(info.param);
                         });

} // namespace
} // namespace smelt::cuda_test
