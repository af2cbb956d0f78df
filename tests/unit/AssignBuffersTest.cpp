// smelt-assign-buffers against the executor: the peak bytes the pass works out at compile time
// equal what the CPU executor measures in a run, for the seed models' training steps (fused and
// unfused, f32 and mixed precision); the arena layout checked against an independent liveness
// walk; and both survive an AOT artifact's round trip.
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

struct ArenaCheck {
  uint64_t extent = 0, mostLive = 0;
};

/// Walks the steps: a step's results live from it to their last reader (to the end for
/// outputs and all_reduce buffers); checks the offsets and measures the arena and the most
/// bytes live at once. Failures are test failures.
ArenaCheck checkArena(const rt::Executable &exe) {
  size_t steps = exe.steps.size();
  std::vector<size_t> first(exe.buffers.size(), 0), last(exe.buffers.size(), 0);
  std::vector<rt::BufferId> results;
  for (size_t s = 0; s < steps; ++s) {
    bool collective = exe.steps[s].op == rt::StepOp::AllReduce;
    for (rt::BufferId id : exe.steps[s].results) {
      first[id] = s;
      last[id] = collective ? steps : s;
      results.push_back(id);
    }
    for (rt::BufferId id : exe.steps[s].operands)
      last[id] = collective ? steps : std::max(last[id], s);
  }
  for (rt::BufferId id : exe.outputs)
    last[id] = steps;
  ArenaCheck check;
  for (rt::BufferId id : results) {
    const rt::BufferInfo &b = exe.buffers[id];
    EXPECT_GE(b.offset, 0) << b.name;
    EXPECT_EQ(b.offset % 64, 0) << b.name;
    check.extent = std::max(check.extent, uint64_t(b.offset) + b.type.byteSize());
  }
  for (size_t i = 0; i < results.size(); ++i)
    for (size_t j = i + 1; j < results.size(); ++j) {
      const rt::BufferInfo &a = exe.buffers[results[i]], &b = exe.buffers[results[j]];
      bool together = first[results[i]] <= last[results[j]] && first[results[j]] <= last[results[i]];
      bool share = a.offset < b.offset + int64_t(b.type.byteSize()) &&
                   b.offset < a.offset + int64_t(a.type.byteSize());
      EXPECT_FALSE(together && share) << a.name << " and " << b.name;
    }
  for (size_t s = 0; s < steps; ++s) {
    uint64_t live = 0;
    for (rt::BufferId id : results)
      if (first[id] <= s && s <= last[id])
        live += exe.buffers[id].type.byteSize();
    check.mostLive = std::max(check.mostLive, live);
  }
  return check;
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
    // The arena against a liveness walk of the steps (independent of the pass): each result
    // has an aligned offset, no two values live at one step share a byte, and the arena is at
    // least the most bytes live at once and wastes little beyond it.
    ArenaCheck arena = checkArena(*exe);
    uint64_t constants = 0;
    for (const rt::Constant &constant : exe->constants)
      constants += constant.bytes.size();
    EXPECT_EQ(predicted, constants + arena.extent);
    EXPECT_GE(arena.extent, arena.mostLive);
    EXPECT_LE(double(arena.extent), 1.25 * double(arena.mostLive));
    std::printf("%s %s %s: arena %llu B, most live %llu B\n", c.model,
                c.fuse ? "fused" : "unfused", precisionPolicyName(c.precision).str().c_str(),
                static_cast<unsigned long long>(arena.extent),
                static_cast<unsigned long long>(arena.mostLive));

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
  for (size_t i = 0; i < exe->buffers.size(); ++i)
    EXPECT_EQ(loaded->executable.buffers[i].offset, exe->buffers[i].offset) << "buffer " << i;
}

} // namespace
} // namespace smelt::test
