// The unrolled LSTM and GRU (frontend/Recurrent.h): their hidden states against float64 loops,
// their gradients against central differences, unit_forget_bias through the init function, and the gradient of its per-step slices built as
// one concat rather than one full-size pad per step (issue 35).
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "frontend/Recurrent.h"
#include "ir/SmeltDialect.h"
#include "passes/Passes.h"
#include "runtime/CpuExecutor.h"
#include "train/BuiltinModels.h"
#include "train/Trainer.h"

#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

namespace smelt::test {
namespace {

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// The float64 checks' sizes: batch, time, features, units.
constexpr int64_t B = 2, T = 3, D = 3, U = 2;

/// A layer's states [B, T, U] in float64 loops, from x [B, T, D], W [D, gates U], U [U, gates U],
/// its bias and a mask [B, T] (empty: every step counts; 0: the step keeps the states).
using Reference = std::function<std::vector<double>(
    const std::vector<double> &x, const std::vector<double> &w, const std::vector<double> &u,
    const std::vector<double> &bias, const std::vector<double> &mask)>;

/// A recurrent layer under test: x, its units and its options.
using Layer = std::function<Tensor(Tensor, int64_t, const RecurrentOptions &)>;

/// Builds `layer` (`name`, `gates` gates of U units, a bias of `biasShape`) on an f64 input,
/// runs it on fresh random inputs and weights, and checks its states against `reference` and
/// its gradients (of sum(states * r), r random) against central differences; with `masked`,
/// under a mask that skips a middle step of one sequence and the last of the other.
void expectLayerMatches(const std::string &name, const Layer &layer, int64_t gates,
                        const std::vector<int64_t> &biasShape, const Reference &reference,
                        bool masked) {
  SCOPED_TRACE(name + (masked ? " masked" : "") + " SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {B, T, D}, DType::f64), r = g.input("r", {B, T, U}, DType::f64);
  std::vector<double> mask;
  RecurrentOptions options;
  if (masked) {
    mask = {1, 0, 1, 1, 1, 0};
    options.mask = constant(g, mask, {B, T}, DType::f32);
  }
  Tensor out = layer(x, U, options);
  std::vector<Tensor> params = g.parameterTensors(); // kernel, recurrent_kernel, bias
  ASSERT_EQ(params.size(), 3u);
  std::vector<Tensor> wrt = {x, params[0], params[1], params[2]};
  std::optional<rt::CpuExecutor> cpu =
      compileLossAndGradients(g, reduceSum(mul(out, r), {0, 1, 2}), wrt, {out});
  ASSERT_TRUE(cpu);
  std::vector<rt::HostTensor> args = {
      randomTensor({B, T, D}, DType::f64), randomTensor({B, T, U}, DType::f64),
      randomTensor({D, gates * U}, DType::f64), randomTensor({U, gates * U}, DType::f64),
      randomTensor(biasShape, DType::f64)};
  std::vector<rt::HostTensor> result;
  ASSERT_TRUE(cpu->run(args, result).ok());
  ASSERT_EQ(result.size(), 6u);
  std::vector<double> states = reference(args[0].toDoubles(), args[2].toDoubles(),
                                         args[3].toDoubles(), args[4].toDoubles(), mask);
  EXPECT_LT(relError(result[5].toDoubles(), states), 1e-12);
  expectGradientsMatchDifferences(
      *cpu, args, {0, 2, 3, 4}, 1e-6,
      {"x", name + "/kernel", name + "/recurrent_kernel", name + "/bias"});
}

/// sum_d x[b, t, d] w[d, col] + sum_j h[b, j] u[j, col] + bias[col] for every gate column.
struct GateSums {
  std::vector<double> fromInput, fromState;
};
GateSums gateSums(const std::vector<double> &x, const std::vector<double> &w,
                  const std::vector<double> &u, const std::vector<double> &h, int64_t b, int64_t t,
                  int64_t gates) {
  GateSums sums{std::vector<double>(size_t(gates * U)), std::vector<double>(size_t(gates * U))};
  for (int64_t col = 0; col < gates * U; ++col) {
    for (int64_t d = 0; d < D; ++d)
      sums.fromInput[size_t(col)] +=
          x[size_t((b * T + t) * D + d)] * w[size_t(d * gates * U + col)];
    for (int64_t j = 0; j < U; ++j)
      sums.fromState[size_t(col)] += h[size_t(b * U + j)] * u[size_t(j * gates * U + col)];
  }
  return sums;
}

TEST(Lstm, MatchesFloat64LoopsAndFiniteDifferences) {
  auto reference = [](const std::vector<double> &x, const std::vector<double> &w,
                      const std::vector<double> &u, const std::vector<double> &bias,
                      const std::vector<double> &mask) {
    std::vector<double> h(size_t(B * U), 0.0), c(size_t(B * U), 0.0), states(size_t(B * T * U));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> next(h.size());
      for (int64_t b = 0; b < B; ++b) {
        GateSums sums = gateSums(x, w, u, h, b, t, 4);
        for (int64_t k = 0; k < U; ++k) {
          double z[4];
          for (int64_t gate = 0; gate < 4; ++gate) {
            size_t col = size_t(gate * U + k);
            z[gate] = sums.fromInput[col] + sums.fromState[col] + bias[col];
          }
          double &cell = c[size_t(b * U + k)];
          bool skipped = !mask.empty() && mask[size_t(b * T + t)] == 0;
          if (!skipped)
            cell = sigmoid(z[1]) * cell + sigmoid(z[0]) * std::tanh(z[2]);
          next[size_t(b * U + k)] =
              skipped ? h[size_t(b * U + k)] : sigmoid(z[3]) * std::tanh(cell);
          states[size_t((b * T + t) * U + k)] = next[size_t(b * U + k)];
        }
      }
      h = next;
    }
    return states;
  };
  for (bool masked : {false, true})
    expectLayerMatches(
        "lstm",
        [](Tensor x, int64_t units, const RecurrentOptions &options) {
          return lstm(x, units, "lstm", options);
        },
        4, {4 * U}, reference, masked);
}

TEST(Gru, MatchesFloat64LoopsAndFiniteDifferences) {
  auto reference = [](const std::vector<double> &x, const std::vector<double> &w,
                      const std::vector<double> &u, const std::vector<double> &bias,
                      const std::vector<double> &mask) {
    std::vector<double> h(size_t(B * U), 0.0), states(size_t(B * T * U));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> next(h.size());
      for (int64_t b = 0; b < B; ++b) {
        GateSums sums = gateSums(x, w, u, h, b, t, 3);
        for (int64_t k = 0; k < U; ++k) {
          // bias row 0 adds to the input's sums, row 1 to the state's (reset_after).
          auto in = [&](int64_t gate) {
            return sums.fromInput[size_t(gate * U + k)] + bias[size_t(gate * U + k)];
          };
          auto st = [&](int64_t gate) {
            return sums.fromState[size_t(gate * U + k)] + bias[size_t(3 * U + gate * U + k)];
          };
          double z = sigmoid(in(0) + st(0)), reset = sigmoid(in(1) + st(1));
          double n = std::tanh(in(2) + reset * st(2));
          bool skipped = !mask.empty() && mask[size_t(b * T + t)] == 0;
          next[size_t(b * U + k)] =
              skipped ? h[size_t(b * U + k)] : z * h[size_t(b * U + k)] + (1 - z) * n;
          states[size_t((b * T + t) * U + k)] = next[size_t(b * U + k)];
        }
      }
      h = next;
    }
    return states;
  };
  for (bool masked : {false, true})
    expectLayerMatches(
        "gru",
        [](Tensor x, int64_t units, const RecurrentOptions &options) {
          return gru(x, units, "gru", options);
        },
        3, {2, 3 * U}, reference, masked);
}

// unit_forget_bias: the bias starts at 1 on the forget gate's slice only, through the init
// function; without returnSequences the layer gives the last step's state; a mask of another
// shape is an error naming both.
TEST(Lstm, UnitForgetBiasAndTheLastState) {
  const int64_t B = 2, T = 4, D = 3, U = 3;
  mlir::MLIRContext ctx;
  Graph g(ctx, "f", /*seed=*/rngSeed());
  Tensor x = g.input("x", {B, T, D});
  RecurrentOptions lastOnly;
  lastOnly.returnSequences = false;
  Tensor sequence = lstm(x, U, "seq"), last = lstm(x, U, "last", lastOnly);
  EXPECT_EQ(last.shape(), (std::vector<int64_t>{B, U}));
  g.setOutputs({sequence, last});
  g.buildInitializer();
  std::vector<rt::HostTensor> initial = run(g, {}, "f_init");
  ASSERT_EQ(initial.size(), 6u);
  std::vector<double> bias = initial[2].toDoubles(), want(size_t(4 * U), 0.0);
  std::fill(want.begin() + U, want.begin() + 2 * U, 1.0);
  EXPECT_EQ(bias, want);
  // Both layers with the "seq" weights: the last state is the sequence's last step.
  std::vector<rt::HostTensor> args = {randomTensor({B, T, D}, DType::f32)};
  for (int copy = 0; copy < 2; ++copy)
    for (int i = 0; i < 3; ++i)
      args.push_back(initial[size_t(i)]);
  std::vector<rt::HostTensor> out = run(g, args);
  std::vector<double> states = out[0].toDoubles(), lastState;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < U; ++k)
      lastState.push_back(states[size_t((b * T + T - 1) * U + k)]);
  EXPECT_LT(relError(out[1].toDoubles(), lastState), 1e-6);

  Graph other(ctx, "other");
  RecurrentOptions badMask;
  badMask.mask = other.input("mask", {B, T + 1});
  expectBuildError([&] { gru(other.input("x", {B, T, D}), U, "g", badMask); },
                   "gru layer 'g': the mask must be [2, 4] (batch, time), got [2, 5]");
  expectBuildError(
      [&] { g.parameter("b", {4}, Initializer::zeros().withConstantSlice(2, 6, 1.0)); },
      "a constant slice [2, 6) must be a non-empty range of its last axis");
}

// The gradient of the projected inputs [B, T, 4U] gathers one [B, 1, 4U] piece per step, and
// each step's gate gradient four [B, U] pieces: concats, with no pad left in the function.
TEST(Lstm, StepSliceGradientsJoinIntoConcats) {
  const int64_t B = 2, T = 16, D = 3, U = 4;
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {B, T, D}, DType::f32);
  Tensor loss = reduceSum(lstm(x, U, "lstm"), {0, 1, 2});
  std::vector<Tensor> grads = g.gradients(loss, g.parameterTensors());
  g.setOutputs({loss, grads[0], grads[1], grads[2]});
  int pads = 0, stepConcats = 0, gateConcats = 0;
  g.module().walk([&](mlir::Operation *op) {
    if (mlir::isa<PadOp>(op))
      ++pads;
    if (auto concat = mlir::dyn_cast<ConcatOp>(op)) {
      auto type = mlir::cast<mlir::RankedTensorType>(concat.getType());
      stepConcats += type.getShape() == llvm::ArrayRef<int64_t>{B, T, 4 * U};
      gateConcats += type.getShape() == llvm::ArrayRef<int64_t>{B, 4 * U};
    }
  });
  EXPECT_EQ(pads, 0);
  EXPECT_EQ(stepConcats, 1);
  EXPECT_EQ(gateConcats, T);
}

/// Runs `pm` on `module` with smelt-fuse's report written to `path`, and sums the number the
/// first group of `pattern` captures on every match in the report.
uint64_t sumInFuseReport(mlir::PassManager &pm, mlir::ModuleOp module, const std::string &path,
                         const std::string &pattern) {
  EXPECT_TRUE(mlir::succeeded(pm.run(module)));
  std::ifstream file(path);
  std::stringstream report;
  report << file.rdbuf();
  std::string text = report.str();
  uint64_t sum = 0;
  std::regex line(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it)
    sum += std::stoull((*it)[1].str());
  EXPECT_GT(sum, 0u) << text.substr(0, 2000);
  return sum;
}

/// What the report's line "reachability: N questions, M ops walked" counts (`pattern`
/// captures N or M) for the training step (forward, gradients, Adam) of the char LSTM unrolled
/// over `steps`, summed over its functions' reports.
uint64_t fuseReachability(int64_t steps, const std::string &pattern) {
  mlir::MLIRContext ctx;
  codegen::loadDialects(ctx);
  train::TrainConfig config;
  config.model = train::lstmModel({.vocab = 10, .context = steps, .width = 8, .hidden = 8});
  config.batch = 4;
  std::unique_ptr<Graph> graph = train::buildTrainStep(ctx, config);
  std::string path = ::testing::TempDir() + "/lstm-fuse-" + std::to_string(steps) + ".txt";
  mlir::PassManager pm(&ctx);
  PipelineOptions options;
  options.fusionReport = path;
  buildDefaultPipeline(pm, options);
  return sumInFuseReport(pm, graph->module(), path, pattern);
}

// smelt-fuse's work on an unrolled recurrence grows linearly with its steps: pairing every
// step's gradient kernels through the splat constants they all read made the questions grow
// with the square of the steps (issue 35), and the walks that answer them, from a step's
// forward ops through the later steps and back into its gradient kernels, grew with the steps
// each (issue 33: hundreds of ops a question at 32 steps, then a cap of 4,096 that lost
// fusions). Now a walk stays within a few ops of where it starts, and this stays so from 512
// steps to 1,024 (~2.6 ops a question). A count of the pass's work, not a timing.
TEST(Lstm, FuseAsksLinearlyManyQuestionsInTheSteps) {
  const std::string questions = "reachability: ([0-9]+) questions",
                    walked = "questions, ([0-9]+) ops walked";
  uint64_t q16 = fuseReachability(16, questions), q32 = fuseReachability(32, questions),
           q64 = fuseReachability(64, questions);
  EXPECT_LE(double(q32), 2.3 * double(q16)) << q16 << " -> " << q32;
  EXPECT_LE(double(q64), 2.3 * double(q32)) << q32 << " -> " << q64;
  uint64_t w64 = fuseReachability(64, walked);
  EXPECT_LE(w64, 4 * q64) << w64 << " ops walked for " << q64 << " questions";
}

/// The ops smelt-fuse put in kernels for an LSTM's forward pass over `steps` (an evaluation
/// step), summed from its report's "fusion N (..., K ops)" lines.
uint64_t forwardFusedOps(int64_t steps) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {4, steps, 3}, DType::f32);
  g.setOutputs({lstm(x, 8, "lstm")});
  std::string path = ::testing::TempDir() + "/lstm-forward-" + std::to_string(steps) + ".txt";
  mlir::PassManager pm(&ctx);
  FuseOptions options;
  options.reportPath = path;
  pm.addPass(createFuse(options));
  return sumInFuseReport(pm, g.module(), path, "fusion [0-9]+ \\(.*, ([0-9]+) ops\\)");
}

// The cell state c_t = f c_{t-1} + i g is cheap, so smelt-fuse copies it into the kernels
// that read it; copying the copies' operands too recomputed every earlier step in each step's
// kernel (kernels of 6, 12, ... 186 ops at 32 steps: quadratic work, and 4 s of LLVM). Each
// op is now copied into at most 16 kernels, so past 16 steps the kernels stop growing.
TEST(Lstm, ForwardKernelsDoNotRecomputeEarlierSteps) {
  uint64_t ops32 = forwardFusedOps(32), ops64 = forwardFusedOps(64);
  // Linear with a ramp (the first 16 steps copy less): 1102 -> 2611; quadratic was 3.8x.
  EXPECT_LE(double(ops64), 2.6 * double(ops32)) << ops32 << " -> " << ops64;
}

} // namespace
} // namespace smelt::test
