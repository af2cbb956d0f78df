// smelt-assign-buffers against the executor: the peak bytes the pass works out at compile time
// equal what the CPU executor measures in a run, for the seed models' training steps (fused and
// unfused, f32 and mixed precision), and survive an AOT artifact's round trip.
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "train/Trainer.h"

#include <gtest/gtest.h>

#include <random>

namespace smelt::test {
namespace {

/// Fresh inputs of each argument's type: labels (integer tensors) in 0..9 so the loss reads a
/// real class, the step counter (an i64 scalar) 1, floats uniform.
std::vector<rt::HostTensor> randomInputs(const rt::Executable &exe) {
  std::mt19937_64 gen(rngSeed());
  std::uniform_int_distribution<int> label(0, 9);
  std::vector<rt::HostTensor> inputs;
  for (rt::BufferId id : exe.inputs) {
    const rt::TensorType &type = exe.buffers[id].type;
    std::vector<double> values(size_t(type.numElements()));
    bool integer = type.dtype == rt::DType::i32 || type.dtype == rt::DType::i64;
    for (double &v : values)
      v = integer ? (type.shape.empty() ? 1 : label(gen))
                  : std::uniform_real_distribution<double>(-1, 1)(gen);
    inputs.push_back(rt::HostTensor::fromDoubles(type, values));
  }
  return inputs;
}

struct Case {
  const char *model;
  bool fuse;
  PrecisionPolicy precision;
};

TEST(AssignBuffers, CompiledPeakEqualsTheMeasuredPeakOfARun) {
  const Case cases[] = {{"mlp", true, PrecisionPolicy::f32},
                        {"mlp", false, PrecisionPolicy::f32},
                        {"mlp", true, PrecisionPolicy::mixed_bf16},
                        {"cnn", true, PrecisionPolicy::f32},
                        {"cnn", false, PrecisionPolicy::mixed_f16}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.model) + (c.fuse ? " fused " : " unfused ") +
                 precisionPolicyName(c.precision).str());
    mlir::MLIRContext context;
    train::TrainConfig config;
    config.model = c.model;
    config.batch = 32;
    config.precision = c.precision;
    std::unique_ptr<Graph> graph = train::buildTrainStep(context, config);
    PipelineOptions options;
    options.fuse = c.fuse;
    mlir::FailureOr<rt::Executable> exe =
        codegen::compile(graph->module(), "train_step", options);
    ASSERT_TRUE(mlir::succeeded(exe));
    ASSERT_EQ(exe->peakBytes.size(), 1u);
    uint64_t predicted = exe->peakBytes.at("cpu:0");
    // More than the largest buffer, less than every buffer at once.
    uint64_t largest = 0, all = 0;
    for (const rt::BufferInfo &b : exe->buffers) {
      largest = std::max<uint64_t>(largest, b.type.byteSize());
      all += b.type.byteSize();
    }
    EXPECT_GT(predicted, largest);
    EXPECT_LT(predicted, all);

    rt::Expected<std::unique_ptr<rt::Executor>> executor = rt::Executor::create(*exe);
    ASSERT_TRUE(executor.ok()) << executor.message();
    std::vector<rt::HostTensor> inputs = randomInputs(*exe), outputs;
    ASSERT_TRUE((*executor)->run(inputs, outputs).ok());
    EXPECT_EQ((*executor)->lastRunPeakBytes(), predicted);
    // A second run writes into the first run's outputs: the same peak.
    ASSERT_TRUE((*executor)->run(inputs, outputs).ok());
    EXPECT_EQ((*executor)->lastRunPeakBytes(), predicted);
  }
}

TEST(AssignBuffers, AnArtifactCarriesThePrediction) {
  mlir::MLIRContext context;
  Graph g(context, "f");
  Tensor x = g.input("x", {64, 32});
  g.setOutputs({reduceSum(exp(x) * x, {1})});
  mlir::FailureOr<rt::Executable> exe = codegen::compile(g.module(), "f");
  ASSERT_TRUE(mlir::succeeded(exe));
  ASSERT_FALSE(exe->peakBytes.empty());
  rt::ArtifactExtras extras;
  extras.target = "cpu";
  extras.producer = "test";
  rt::Expected<std::vector<uint8_t>> bytes = rt::encodeArtifact(*exe, extras);
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  rt::Expected<rt::LoadedArtifact> loaded = rt::decodeArtifact(*bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->executable.peakBytes, exe->peakBytes);
}

} // namespace
} // namespace smelt::test
