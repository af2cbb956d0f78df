// smelt-assign-buffers against the executor: the peak bytes the pass works out at compile time
// equal what the CPU executor measures in a run, for the seed models' training steps (fused and
// unfused, f32 and mixed precision); the arena layout checked against an independent liveness
// walk; and both survive an AOT artifact's round trip. The placement (passes/ArenaPlacement.h)
// against the scan over every placed value it replaced, and its work per value bounded on an
// unrolled LSTM.
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "passes/ArenaPlacement.h"
#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "train/BuiltinModels.h"
#include "train/Trainer.h"

#include <gtest/gtest.h>

#include <numeric>
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

/// The steps' results and when each is live: from its step to its last reader (to the end,
/// steps.size(), for outputs and all_reduce buffers).
struct Lifetimes {
  std::vector<rt::BufferId> results;
  std::vector<size_t> first, last; ///< By buffer id.
};

Lifetimes lifetimes(const rt::Executable &exe) {
  size_t steps = exe.steps.size();
  Lifetimes live;
  live.first.assign(exe.buffers.size(), 0);
  live.last.assign(exe.buffers.size(), 0);
  for (size_t s = 0; s < steps; ++s) {
    bool collective = exe.steps[s].op == rt::StepOp::AllReduce;
    for (rt::BufferId id : exe.steps[s].results) {
      live.first[id] = s;
      live.last[id] = collective ? steps : s;
      live.results.push_back(id);
    }
    for (rt::BufferId id : exe.steps[s].operands)
      live.last[id] = collective ? steps : std::max(live.last[id], s);
  }
  for (rt::BufferId id : exe.outputs)
    live.last[id] = steps;
  return live;
}

/// Walks the steps (lifetimes()); checks the offsets and measures the arena and the most bytes
/// live at once. Failures are test failures.
ArenaCheck checkArena(const rt::Executable &exe) {
  size_t steps = exe.steps.size();
  Lifetimes times = lifetimes(exe);
  const std::vector<size_t> &first = times.first, &last = times.last;
  const std::vector<rt::BufferId> &results = times.results;
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

/// The placement smelt-assign-buffers made before ArenaPlacement: for each value (the largest
/// first, ties the earlier), every placed value live with it, sorted by offset, scanned for the
/// lowest aligned gap.
ArenaLayout scanEveryPlacedValue(llvm::ArrayRef<LiveValue> values, int64_t alignment) {
  std::vector<unsigned> order(values.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return values[a].bytes != values[b].bytes ? values[a].bytes > values[b].bytes
                                              : values[a].first < values[b].first;
  });
  ArenaLayout layout;
  layout.offsets.assign(values.size(), 0);
  std::vector<unsigned> placed;
  for (unsigned v : order) {
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (unsigned other : placed) {
      ++layout.work;
      if (values[other].first <= values[v].last && values[v].first <= values[other].last)
        taken.push_back({layout.offsets[other], layout.offsets[other] + values[other].bytes});
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + values[v].bytes <= begin)
        break;
      offset = std::max(offset, (end + alignment - 1) / alignment * alignment);
    }
    layout.offsets[v] = offset;
    layout.extent = std::max(layout.extent, offset + values[v].bytes);
    placed.push_back(v);
  }
  return layout;
}

// Random lifetimes (short, long, to the end; nested like activations kept for a backward pass)
// and sizes (empty, unaligned, equal ones for ties): the same offsets as the scan.
TEST(AssignBuffers, PlacementEqualsTheScanOverEveryPlacedValue) {
  std::mt19937_64 gen(rngSeed());
  const int64_t sizes[] = {0, 1, 4, 60, 64, 65, 128, 200, 1000, 4096};
  for (int round = 0; round < 40; ++round) {
    int64_t steps = 1 + int64_t(gen() % 300), alignment = round % 4 == 3 ? 1 : 64;
    std::vector<LiveValue> values;
    for (int i = 0, n = 1 + int(gen() % 400); i < n; ++i) {
      int64_t first = int64_t(gen() % uint64_t(steps)), last = first;
      switch (gen() % 4) {
      case 0: // short
        last = std::min(steps, first + int64_t(gen() % 4));
        break;
      case 1: // any
        last = first + int64_t(gen() % uint64_t(steps - first + 1));
        break;
      case 2: // nested about the middle
        first = int64_t(gen() % uint64_t(steps / 2 + 1));
        last = steps - first;
        break;
      default: // to the end
        last = steps;
      }
      int64_t bytes = gen() % 3 ? sizes[gen() % std::size(sizes)] : int64_t(gen() % 5000);
      values.push_back({first, last, bytes});
    }
    SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(values.size()) +
                 " values over " + std::to_string(steps) + " steps");
    ArenaLayout expected = scanEveryPlacedValue(values, alignment);
    ArenaLayout layout = placeInArena(values, alignment);
    EXPECT_EQ(layout.offsets, expected.offsets);
    EXPECT_EQ(layout.extent, expected.extent);
  }
}

/// The char LSTM's training step (forward, gradients, Adam) unrolled over `steps`, compiled:
/// its arena's values placed again, which must give the compiled offsets and the scan's; the
/// scan's work in `scanWork`.
ArenaLayout placeLstmTrainStep(int64_t steps, size_t &numValues, uint64_t &scanWork) {
  mlir::MLIRContext context;
  train::TrainConfig config;
  config.model = train::lstmModel({.vocab = 10, .context = steps, .width = 8, .hidden = 8});
  config.batch = 4;
  std::unique_ptr<Graph> graph = train::buildTrainStep(context, config);
  mlir::FailureOr<rt::Executable> exe = codegen::compile(graph->module(), "train_step");
  EXPECT_TRUE(mlir::succeeded(exe));
  if (mlir::failed(exe))
    return {};
  Lifetimes times = lifetimes(*exe);
  std::vector<LiveValue> values;
  for (rt::BufferId id : times.results)
    values.push_back({int64_t(times.first[id]), int64_t(times.last[id]),
                      int64_t(exe->buffers[id].type.byteSize())});
  ArenaLayout layout = placeInArena(values, 64), scan = scanEveryPlacedValue(values, 64);
  for (auto [id, offset] : llvm::zip_equal(times.results, layout.offsets))
    EXPECT_EQ(exe->buffers[id].offset, offset) << exe->buffers[id].name;
  EXPECT_EQ(layout.offsets, scan.offsets);
  numValues = values.size();
  scanWork = scan.work;
  return layout;
}

// The placement's work per value stays about flat as an unrolled recurrence gets longer. Each
// value used to scan every placed value live with it, and the forward activations kept for the
// backward pass are all live at once: quadratic work, 3.4 s of a 7 s compile at 1,024 steps
// (the scan's count here: 343 placed values looked at per value at 32 steps, 663 at 64). Now
// a value searches O(log steps) unions of arena ranges: 40 at 32 steps, 47 at 64 (58 at 1,024).
// A count of the placement's work, not a timing.
TEST(AssignBuffers, PlacementWorkPerValueStaysFlatOnAnUnrolledLstm) {
  size_t values32 = 0, values64 = 0;
  uint64_t scan32 = 0, scan64 = 0;
  uint64_t work32 = placeLstmTrainStep(32, values32, scan32).work,
           work64 = placeLstmTrainStep(64, values64, scan64).work;
  ASSERT_GT(values32, 0u);
  ASSERT_GT(values64, 0u);
  double perValue32 = double(work32) / double(values32),
         perValue64 = double(work64) / double(values64);
  std::printf("placement work per value: %.1f at 32 steps (%zu values; the scan %.1f), %.1f at "
              "64 (%zu; the scan %.1f)\n",
              perValue32, values32, double(scan32) / double(values32), perValue64, values64,
              double(scan64) / double(values64));
  EXPECT_LE(perValue64, 1.4 * perValue32);
  EXPECT_LE(perValue64, 100.0);
}

} // namespace
} // namespace smelt::test
