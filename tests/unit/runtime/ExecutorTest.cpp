// The CpuExecutor: a multi-step Executable with constants run repeatedly, outputs that alias
// inputs, outputs written into the caller's tensors, per-step timings, and each validation
// error naming the step, buffer and shapes.
#include "RuntimeTestUtil.h"

#include "runtime/Executor.h"

#include <cstring>
#include <set>

namespace smelt::rt::test {
namespace {

using Ints = std::vector<int64_t>;

/// y = reduce_sum(x * c + x, axis 1), returning (y, x): c is a constant. The kernels are C++
/// stand-ins for codegen's (runtime tests run without MLIR).
Executable multiStep(const std::vector<float> &c) {
  Executable exe;
  exe.name = "multi";
  TensorType matrix{DType::f32, {2, 3}};
  BufferId x = appendBuffer(exe, matrix, "%arg0"), cst = appendBuffer(exe, matrix, "%cst");
  exe.inputs = {x};
  std::vector<uint8_t> bytes(24);
  std::memcpy(bytes.data(), c.data(), 24);
  Constant constant{cst, std::move(bytes)};
  exe.constants = {constant};
  BufferId product = appendKernelStep(exe, kernels::mul, "mul", {x, cst}, matrix, "m.mlir:2:3");
  BufferId sum = appendKernelStep(exe, kernels::add, "add", {product, x}, matrix, "m.mlir:3:3");
  BufferId rows =
      appendKernelStep(exe, kernels::sumRows<3>, "reduce", {sum}, {DType::f32, {2}}, "m.mlir:4:3");
  exe.outputs = {rows, x};
  // The schedule the compiler would give it: each product goes back after its last reader.
  exe.steps[1].frees = {product};
  exe.steps[2].frees = {sum};
  return exe;
}

/// multiStep's result in float64 from the f32 products and sums the kernels round to.
std::vector<double> multiStepReference(const HostTensor &x, const std::vector<float> &c) {
  std::vector<double> xv = x.toDoubles(), ref(2, 0.0);
  for (size_t i = 0; i < 6; ++i)
    ref[i / 3] += double(float(float(xv[i] * c[i]) + float(xv[i])));
  return ref;
}

/// The create() error of `exe`, or "" when it is valid.
std::string errorOf(const Executable &exe) {
  Expected<CpuExecutor> exec = CpuExecutor::create(exe);
  return exec ? std::string() : exec.message();
}

void expectError(const Executable &exe, const std::string &part) {
  std::string message = errorOf(exe);
  EXPECT_NE(message.find(part), std::string::npos) << "got: '" << message << "'";
}

/// Runs `exe`, multiStep(c) or a variant of it, on a fresh x: its rows against float64, and
/// the run's peak bytes against `peak`.
void expectMultiStepRun(const Executable &exe, const std::vector<float> &c, uint64_t peak,
                        const std::string &what) {
  Expected<CpuExecutor> exec = CpuExecutor::create(exe);
  ASSERT_TRUE(exec.ok()) << what << ": " << exec.message();
  HostTensor x = randomTensor(DType::f32, {2, 3});
  std::vector<HostTensor> outputs;
  ASSERT_TRUE(exec->run({x}, outputs).ok()) << what;
  expectClose(outputs[0], multiStepReference(x, c), what);
  EXPECT_EQ(exec->lastRunPeakBytes(), peak) << what;
}

TEST(Executor, RunsStepsInOrderWithConstantsAndIsReusable) {
  std::vector<float> c = {1, 2, 3, -1, -2, -3};
  Expected<CpuExecutor> exec = CpuExecutor::create(multiStep(c));
  ASSERT_TRUE(exec.ok()) << exec.message();
  for (int run = 0; run < 3; ++run) {
    HostTensor x = randomTensor(DType::f32, {2, 3});
    std::vector<HostTensor> outputs;
    ASSERT_TRUE(exec->run({x}, outputs).ok());
    ASSERT_EQ(outputs.size(), 2u);
    expectClose(outputs[0], multiStepReference(x, c), "run " + std::to_string(run));
    EXPECT_EQ(outputs[1].toDoubles(), x.toDoubles()) << "an input returned as an output";
    EXPECT_EQ(exec->lastStepMicros().size(), 3u);
  }
}

TEST(Executor, BuffersWithOffsetsShareOneArenaLaidOutSafely) {
  std::vector<float> c = {1, 2, 3, -1, -2, -3};
  // b2 = x * c lives at steps 0-1, b3 = b2 + x at 1-2, b4 = rows of b3 from 2 to the end: b4
  // may reuse b2's bytes, b3 may not.
  Executable exe = multiStep(c);
  exe.buffers[2].offset = 0;
  exe.buffers[3].offset = 64;
  exe.buffers[4].offset = 0;
  // The constant (24 bytes) and the arena, 64 + 24 bytes: one block, all run long.
  expectMultiStepRun(exe, c, 24u + 88u, "rows summed in the arena");

  Executable overlapping = exe;
  overlapping.buffers[3].offset = 0;
  Expected<CpuExecutor> bad = CpuExecutor::create(overlapping);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("buffers b2 (mul at m.mlir:2:3, tensor<2x3xf32>) and b3 (add at "
                               "m.mlir:3:3, tensor<2x3xf32>) share arena bytes [0, 24) while both "
                               "are live"),
            std::string::npos)
      << bad.message();
  Executable misaligned = exe;
  misaligned.buffers[3].offset = 72;
  bad = CpuExecutor::create(misaligned);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("arena offset 72 is not a multiple of 64"), std::string::npos)
      << bad.message();
}

TEST(Executor, BuffersGoBackWhereTheScheduleSays) {
  std::vector<float> c = {1, 2, 3, -1, -2, -3};
  // The constant (24 bytes) is held; x is the caller's. The products (24 bytes each) and the
  // rows (8) are taken as their steps come: with the schedule, b2 goes back after step 1
  // (peak 24 + 24 + 24) and b3 after step 2; without one, every buffer lives to the end.
  for (bool scheduled : {true, false}) {
    Executable exe = multiStep(c);
    if (!scheduled)
      for (Step &step : exe.steps)
        step.frees.clear();
    expectMultiStepRun(exe, c, scheduled ? 72u : 80u, scheduled ? "scheduled" : "unscheduled");
  }
}

TEST(Executor, CreateRejectsAScheduleThatGivesBackTooEarly) {
  Executable early = multiStep({1, 2, 3, 4, 5, 6});
  early.steps[0].frees = {2};
  expectError(early, "'fusion' (m.mlir:3:3): operand buffer 2 was given back by an earlier step");
  Executable twice = multiStep({1, 2, 3, 4, 5, 6});
  twice.steps[2].frees = {2, 3};
  expectError(twice, "'fusion' (m.mlir:4:3): gives back buffer 2, which an earlier step gave "
                     "back");
  Executable output = multiStep({1, 2, 3, 4, 5, 6});
  output.steps[2].frees = {3, 4};
  expectError(output, "output #0 (buffer 4) is given back before the end of the run");
  Executable unwritten = multiStep({1, 2, 3, 4, 5, 6});
  unwritten.steps[0].frees = {4};
  expectError(unwritten, "'fusion' (m.mlir:2:3): gives back buffer 4, which has no value yet");
  Executable outOfRange = multiStep({1, 2, 3, 4, 5, 6});
  outOfRange.steps[0].frees = {40};
  expectError(outOfRange, "gives back buffer 40, which is out of range");
  TensorType t{DType::f32, {4}};
  Executable reduced = oneStep("all_reduce", {t}, t);
  reduced.steps[0].frees = {0};
  expectError(reduced, "gives back buffer b0 (%arg0, tensor<4xf32>), which an all_reduce uses "
                       "until the run waits for it");
}

/// multiStep with its middle step (add) placed on gpu:0 and the compiler's schedule for it: x
/// and the product go to the GPU segment, the sum comes back.
Executable placedMultiStep(const std::vector<float> &c) {
  Executable exe = multiStep(c);
  exe.steps[1].device = "gpu:0";
  for (Step &step : exe.steps)
    step.frees.clear();
  exe.segments = {
      {"cpu:0", 0, 1, {0}, {2}}, {"gpu:0", 1, 2, {2, 0}, {3}}, {"cpu:0", 2, 3, {3}, {4}}};
  return exe;
}

/// The Executor over `exe`, its GPU segments run by the CPU's executor (no GPU here).
Expected<std::unique_ptr<Executor>> scheduledExecutor(const Executable &exe) {
  ExecutorOptions options;
  options.gpuRunner = cpuSegmentRunner;
  return Executor::create(exe, options);
}

TEST(Executor, RunsTheSegmentsOfTheCompilersSchedule) {
  std::vector<float> c = {1, 2, 3, -1, -2, -3};
  Expected<std::unique_ptr<Executor>> exec = scheduledExecutor(placedMultiStep(c));
  ASSERT_TRUE(exec.ok()) << exec.message();
  EXPECT_EQ((*exec)->segmentDevices(), (std::vector<std::string>{"cpu:0", "gpu:0", "cpu:0"}));
  HostTensor x = randomTensor(DType::f32, {2, 3});
  std::vector<HostTensor> outputs;
  ASSERT_TRUE((*exec)->run({&x}, outputs).ok());
  ASSERT_EQ(outputs.size(), 2u);
  expectClose(outputs[0], multiStepReference(x, c), "three segments");
  EXPECT_EQ(outputs[1].toDoubles(), x.toDoubles());
}

TEST(Executor, AnExecutableOfSeveralSegmentsRunWholeKeepsEveryBuffer) {
  // Its frees are each segment's: run as one (a GPU artifact benchmarked on the CPU), none is
  // followed, even one that would give back the product before the add reads it.
  std::vector<float> c = {1, 2, 3, -1, -2, -3};
  Executable exe = movedToCpu(placedMultiStep(c));
  exe.steps[0].frees = {2};
  expectMultiStepRun(exe, c, 24u + 24 + 24 + 8, "run whole");
}

TEST(Executor, CreateRejectsAMissingOrBrokenScheduleNamingTheSegment) {
  auto expectScheduleError = [](const Executable &exe, const std::string &part) {
    Expected<std::unique_ptr<Executor>> exec = scheduledExecutor(exe);
    ASSERT_FALSE(exec.ok()) << part;
    EXPECT_NE(exec.message().find(part), std::string::npos) << exec.message() << "\nwant: " << part;
  };
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  Executable none = placedMultiStep(c);
  none.segments.clear();
  expectScheduleError(none, "@multi: its steps run on several devices or move values between "
                            "them, and it has no schedule");
  Executable gap = placedMultiStep(c);
  gap.segments[1].begin = 2;
  expectScheduleError(gap, "@multi: schedule segment #1 (on gpu:0): steps [2, 2) do not follow "
                           "on from step 1");
  Executable short_ = placedMultiStep(c);
  short_.segments.pop_back();
  expectScheduleError(short_, "@multi: the schedule's segments end at step 2 of 3");
  Executable device = placedMultiStep(c);
  device.segments[1].device = "gpu:1";
  expectScheduleError(device, "schedule segment #1 (on gpu:1): step 1 ('fusion' at m.mlir:3:3) "
                              "runs on gpu:0");
  Executable early = placedMultiStep(c);
  early.segments[0].reads = {0, 3};
  expectScheduleError(early, "schedule segment #0 (on cpu:0): reads buffer 3, which is no input "
                             "and no earlier segment writes");
  Executable missing = placedMultiStep(c);
  missing.segments[1].reads = {2};
  expectScheduleError(missing, "schedule segment #1 (on gpu:0): step 1 ('fusion' at m.mlir:3:3) "
                               "reads b0 (%arg0, tensor<2x3xf32>), which the segment neither "
                               "reads nor computes before it");
  Executable unwritten = placedMultiStep(c);
  unwritten.segments[0].writes = {2, 4};
  expectScheduleError(unwritten, "schedule segment #0 (on cpu:0): says it writes b4");
  Executable lost = placedMultiStep(c);
  lost.segments[2].writes = {};
  expectScheduleError(lost, "@multi: output #0 (b4 (reduce at m.mlir:4:3, tensor<2xf32>)) is "
                            "written by no segment");
}

TEST(Executor, AnExecutableOfOnlyCopiesHasNoSegmentAndRuns) {
  // An imported model's initializer for a GPU: constants made on gpu:0 and moved to the host,
  // nothing computed, so the compiler's schedule has no segment (it failed as a schedule that
  // "ends at step 0 of 2"). An argument moved across is returned as given.
  Executable exe;
  exe.name = "init";
  TensorType vector{DType::f32, {3}};
  HostTensor values = randomTensor(DType::f32, {3});
  BufferId weights = appendBuffer(exe, vector, "%weights");
  exe.constants.push_back(
      {weights, std::vector<uint8_t>(values.data<uint8_t>(), values.data<uint8_t>() + 12)});
  BufferId x = appendBuffer(exe, vector, "%x");
  exe.inputs = {x};
  BufferId onHost = appendStep(exe, "copy", {weights}, vector);
  BufferId moved = appendStep(exe, "copy", {x}, vector);
  exe.steps[1].device = "gpu:0";
  exe.outputs = {onHost, moved, onHost};
  Expected<std::unique_ptr<Executor>> exec = scheduledExecutor(exe);
  ASSERT_TRUE(exec.ok()) << exec.message();
  EXPECT_TRUE((*exec)->segmentDevices().empty());
  HostTensor input = randomTensor(DType::f32, {3});
  std::vector<HostTensor> outputs;
  Status status = (*exec)->run({&input}, outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[0].toDoubles(), values.toDoubles());
  EXPECT_EQ(outputs[1].toDoubles(), input.toDoubles());
  EXPECT_EQ(outputs[2].toDoubles(), values.toDoubles());
}

TEST(Executor, OutputsMayBeTheInputsVector) {
  // A training loop feeds its state back: run(state, state) must read before it replaces.
  Expected<CpuExecutor> exec = CpuExecutor::create(multiStep({1, 1, 1, 1, 1, 1}));
  ASSERT_TRUE(exec.ok()) << exec.message();
  std::vector<HostTensor> state = {HostTensor::fromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6})};
  ASSERT_TRUE(exec->run(state, state).ok());
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].toDoubles(), (std::vector<double>{12, 30}));
  EXPECT_EQ(state[1].toDoubles(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

/// state' = state * x + x, returned as (state', state', sum of state' per row, x, total of
/// state'): a state update with an output returned twice, an input returned and a scalar.
Executable stateUpdate() {
  Executable exe;
  exe.name = "update";
  TensorType matrix{DType::f32, {4, 64}};
  BufferId state = appendBuffer(exe, matrix, "%state"), x = appendBuffer(exe, matrix, "%x");
  exe.inputs = {state, x};
  BufferId product = appendKernelStep(exe, kernels::mul, "mul", {state, x}, matrix, "u.mlir:2:3");
  BufferId next = appendKernelStep(exe, kernels::add, "add", {product, x}, matrix, "u.mlir:3:3");
  BufferId rows = appendKernelStep(exe, kernels::sumRows<64>, "reduce", {next},
                                   {DType::f32, {4}}, "u.mlir:4:3");
  BufferId total =
      appendKernelStep(exe, kernels::sumRows<4>, "reduce", {rows}, {DType::f32, {}}, "u.mlir:5:3");
  exe.outputs = {next, next, rows, x, total};
  return exe;
}

TEST(Executor, OutputsGoIntoTheCallersTensorsAndAStateLoopAllocatesNone) {
  Expected<CpuExecutor> exec = CpuExecutor::create(stateUpdate());
  ASSERT_TRUE(exec.ok()) << exec.message();
  HostTensor state = randomTensor(DType::f32, {4, 64});
  std::vector<double> ref = state.toDoubles();
  // The first run makes every output; later ones reuse what the loop swaps back.
  std::vector<HostTensor> outputs;
  std::set<const void *> storages;
  for (int run = 0; run < 5; ++run) {
    HostTensor x = randomTensor(DType::f32, {4, 64});
    std::vector<double> xv = x.toDoubles();
    for (size_t i = 0; i < ref.size(); ++i)
      ref[i] = double(float(float(ref[i] * xv[i]) + float(xv[i])));
    std::vector<const void *> before;
    for (const HostTensor &t : outputs)
      before.push_back(t.raw());
    ASSERT_TRUE(exec->run(std::vector<const HostTensor *>{&state, &x}, outputs).ok());
    ASSERT_EQ(outputs.size(), 5u);
    expectClose(outputs[0], ref, "state after run " + std::to_string(run));
    EXPECT_EQ(outputs[1].toDoubles(), outputs[0].toDoubles()) << "returned twice";
    EXPECT_EQ(outputs[3].toDoubles(), xv) << "the input returned";
    std::vector<double> rowSums(4, 0.0);
    for (size_t i = 0; i < ref.size(); ++i)
      rowSums[i / 64] += ref[i];
    expectClose(outputs[2], rowSums, "row sums after run " + std::to_string(run));
    // The total adds the row sums as the first reduction stored them, in f32: a total near
    // zero would otherwise show their rounding as a large relative error.
    double total = 0;
    for (double rowSum : rowSums)
      total += double(float(rowSum));
    expectClose(outputs[4], {total}, "total after run " + std::to_string(run));
    if (run > 0) {
      for (size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(outputs[i].raw(), before[i]) << "output " << i << " of run " << run
                                               << " is a fresh tensor";
      }
    }
    // The loop's state and its outputs trade places: two storages in turn, never a third.
    std::swap(state, outputs[0]);
    storages.insert(state.raw());
  }
  EXPECT_EQ(storages.size(), 2u);

  // A loop that moves its state out leaves moved-from tensors behind (no storage, and the
  // scalar's type still matches): they are not reused, and the run makes fresh ones.
  std::vector<HostTensor> taken;
  for (HostTensor &t : outputs)
    taken.push_back(std::move(t));
  ASSERT_TRUE(exec->run(std::vector<const HostTensor *>{&state, &taken[3]}, outputs).ok());
  ASSERT_EQ(outputs.size(), 5u);
  EXPECT_NE(outputs[4].raw(), nullptr);

  // A tensor of another type, or one an input shares, is replaced by a fresh one.
  HostTensor x = randomTensor(DType::f32, {4, 64});
  std::vector<HostTensor> mixed;
  mixed.push_back(HostTensor::zeros({DType::f32, {4, 63}}));
  mixed.push_back(HostTensor::zeros({DType::f32, {4, 64}}));
  const void *shared = mixed[1].raw();
  ASSERT_TRUE(exec->run(std::vector<const HostTensor *>{&mixed[1], &x}, mixed).ok());
  EXPECT_EQ(mixed[0].type(), (TensorType{DType::f32, {4, 64}}));
  EXPECT_NE(mixed[1].raw(), shared);
  EXPECT_EQ(mixed[1].toDoubles(), x.toDoubles()) << "0 * x + x";
}

TEST(Executor, RunRejectsWrongInputsNamingThem) {
  TensorType want{DType::f32, {256, 784}};
  Executable exe;
  exe.name = "add";
  exe.inputs = {appendBuffer(exe, want, "%arg0"), appendBuffer(exe, want, "%arg1")};
  exe.outputs = {appendKernelStep(exe, kernels::add, "add", exe.inputs, want, "a.mlir:1:1")};
  Expected<CpuExecutor> exec = CpuExecutor::create(exe);
  ASSERT_TRUE(exec.ok()) << exec.message();
  std::vector<HostTensor> outputs;
  HostTensor good = HostTensor::zeros(want), bad = HostTensor::zeros({DType::f32, {256, 783}});
  Status s = exec->run({good, bad}, outputs);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "input #1 (%arg1): expected tensor<256x784xf32>, got tensor<256x783xf32>");
  // Two inputs as a braced list of pointers (once ambiguous with an iterator pair).
  ASSERT_TRUE(exec->run({&good, &good}, outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  Status count = exec->run({good}, outputs);
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.message().find("takes 2 inputs, got 1"), std::string::npos) << count.message();
  Status dtype = exec->run({good, HostTensor::zeros({DType::f16, {256, 784}})}, outputs);
  EXPECT_NE(dtype.message().find("got tensor<256x784xf16>"), std::string::npos);
}

TEST(Executor, CreateRejectsBrokenDataflowNamingStepAndBuffer) {
  TensorType t{DType::f32, {4}};
  Executable base = oneStep("copy", {t}, t);
  ASSERT_EQ(errorOf(base), "");

  Executable missingProducer = base;
  missingProducer.buffers.push_back({t, "never written"});
  missingProducer.steps[0].operands = {2};
  expectError(missingProducer, "'copy' (test.mlir:1:1): operand buffer 2 is read before any step");

  Executable outOfRange = base;
  outOfRange.steps[0].operands = {7};
  expectError(outOfRange, "operand buffer 7 is out of range");

  Executable twice = base;
  twice.steps.push_back(twice.steps[0]);
  expectError(twice, "already has a value; each buffer is written once");

  Executable overwritesInput = base;
  overwritesInput.steps[0].results = {0};
  expectError(overwritesInput, "buffer b0 (%arg0, tensor<4xf32>) already has a value");

  Executable unknown = base;
  unknown.steps[0].op = StepOp(200);
  expectError(unknown, "step op #200 is not one the runtime knows");

  Executable mismatched = base;
  mismatched.steps[0].params = MatmulParams{};
  expectError(mismatched, "'copy' (test.mlir:1:1): its parameters are not those of 'copy'");

  Executable constant = base;
  constant.buffers.push_back({t, "%cst"});
  constant.constants.push_back({2, std::vector<uint8_t>(15)});
  expectError(constant, "constant b2 (%cst, tensor<4xf32>) has 15 bytes, its type needs 16");

  Executable unwritten = base;
  unwritten.buffers.push_back({t, "orphan"});
  unwritten.outputs.push_back(2);
  expectError(unwritten, "output #1 (buffer 2) is never written");

  Executable arity = base;
  arity.steps[0].operands = {0, 0};
  expectError(arity, "'copy' (test.mlir:1:1): wrong number of operands (2)");

  Executable negative = base;
  negative.buffers[1].type.shape = {-4};
  expectError(negative, "buffer b1 (copy at test.mlir:1:1): tensor<-4xf32> has a negative");

  Executable huge = base;
  huge.buffers[1].type.shape = {int64_t(1) << 40, int64_t(1) << 40};
  expectError(huge, "buffer b1 (copy at test.mlir:1:1): tensor<1099511627776x1099511627776xf32> "
                    "is too large to allocate");
}

TEST(Executor, CreateRejectsParametersThatDoNotFitTheOperands) {
  TensorType x{DType::f32, {2, 3}};
  std::string count = createError("slice", {x}, {DType::f32, {1, 3}},
                                  {{"start_indices", Ints{0}},
                                   {"limit_indices", Ints{1, 3}},
                                   {"strides", Ints{1, 1}}});
  EXPECT_NE(count.find("'slice' (test.mlir:1:1): start_indices = [0] needs 2 values"),
            std::string::npos)
      << count;
  std::string window = createError("max_pool2d", {{DType::f32, {1, 4, 4, 1}}},
                                   {DType::f32, {1, 2, 2, 1}},
                                   {{"window", Ints{2, 2, 2}},
                                    {"strides", Ints{2, 2}},
                                    {"padding", Ints{0, 0, 0, 0}}});
  EXPECT_NE(window.find("window = [2, 2, 2] needs 2 values"), std::string::npos) << window;
  // A scatter_add whose result's trailing shape is not its updates' (a damaged artifact).
  std::string scatter = createError("scatter_add", {{DType::f32, {4, 5}}, {DType::i32, {4}}},
                                    {DType::f32, {3, 6}});
  EXPECT_NE(scatter.find("'scatter_add' (test.mlir:1:1): result tensor<3x6xf32> is not a "
                         "scatter_add of updates tensor<4x5xf32> at indices tensor<4xi32>"),
            std::string::npos)
      << scatter;
}

TEST(Executor, ABufferPastTheMemoryLimitIsAnErrorNamingIt) {
  // 2^52 bytes passes the size check but exceeds any machine's memory, the cpu:0 limit.
  TensorType big{DType::f32, {int64_t(1) << 50}};
  std::string message = createError("copy", {big}, big);
  EXPECT_NE(message.find("cpu:0: buffer b1 (copy at test.mlir:1:1, tensor<1125899906842624xf32>) needs "
                         "4096.00 TiB, more than the device's memory limit of"),
            std::string::npos)
      << message;
}

} // namespace
} // namespace smelt::rt::test
