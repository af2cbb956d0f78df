// How much smelt-fuse removes from the seed models' training steps: kernels (Executable steps)
// with and without fusion, and the shapes of the kernels it forms.
#include "tests/unit/KernelOps.h"
#include "codegen/BuildExecutable.h"
#include "passes/Passes.h"
#include "train/Trainer.h"

#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

namespace smelt::test {
namespace {

/// The training step's Executable after the default pipeline, with or without fusion. ASSERTs
/// need a void function: a failed pipeline or build stops the test before *exe is read.
void compileTrainStep(const std::string &model, bool fuse, rt::Executable &result) {
  mlir::MLIRContext context;
  train::TrainConfig config;
  config.model = model;
  std::unique_ptr<Graph> graph = train::buildTrainStep(context, config);
  mlir::PassManager pm(&context);
  PipelineOptions options;
  options.fuse = fuse;
  buildDefaultPipeline(pm, options);
  ASSERT_TRUE(mlir::succeeded(pm.run(graph->module())));
  auto function = graph->module().lookupSymbol<mlir::func::FuncOp>("train_step");
  ASSERT_TRUE(function) << "no train_step in the " << model << " module";
  mlir::FailureOr<rt::Executable> exe = codegen::buildExecutable(function);
  ASSERT_TRUE(mlir::succeeded(exe));
  result = std::move(*exe);
}

TEST(FusionCount, MlpTrainStepRunsAtLeastThreeTimesFewerKernels) {
  rt::Executable unfused, fused;
  ASSERT_NO_FATAL_FAILURE(compileTrainStep("mlp", false, unfused));
  ASSERT_NO_FATAL_FAILURE(compileTrainStep("mlp", true, fused));
  // Unfused, every elementwise, shape and reduce op is a kernel of its own.
  for (const rt::FusedKernel &kernel : unfused.kernels)
    EXPECT_LE(opsBeyondSources(kernel), 1) << kernel.ops;
  EXPECT_FALSE(fused.kernels.empty());
  size_t library = 0;
  for (const rt::Step &step : fused.steps)
    library += step.op != rt::StepOp::Fusion;
  std::printf("mlp train step: %zu kernels unfused, %zu fused (%zu fusions + %zu other steps)\n",
              unfused.steps.size(), fused.steps.size(), fused.kernels.size(), library);
  EXPECT_GE(unfused.steps.size(), 3 * fused.steps.size());
  // Adam updates each parameter, its two moments in one kernel: no loop kernel per slot.
  size_t multiOutput = 0;
  for (const rt::Step &step : fused.steps)
    multiOutput += step.op == rt::StepOp::Fusion && step.results.size() >= 3;
  EXPECT_GE(multiOutput, 6u) << "one Adam kernel per parameter (6 in the MLP)";
}

TEST(FusionCount, CnnTrainStepFusesToo) {
  rt::Executable unfused, fused;
  ASSERT_NO_FATAL_FAILURE(compileTrainStep("cnn", false, unfused));
  ASSERT_NO_FATAL_FAILURE(compileTrainStep("cnn", true, fused));
  std::printf("cnn train step: %zu kernels unfused, %zu fused\n", unfused.steps.size(),
              fused.steps.size());
  EXPECT_GE(unfused.steps.size(), 2 * fused.steps.size());
}

} // namespace
} // namespace smelt::test
