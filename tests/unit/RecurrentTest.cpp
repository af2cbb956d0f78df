// The unrolled LSTM (frontend/Recurrent.h): its hidden states against float64 loops, its
// gradients against central differences, and the gradient of its per-step slices built as
// one concat rather than one full-size pad per step (issue 35).
#include "TestUtil.h"

#include "frontend/Recurrent.h"
#include "ir/SmeltDialect.h"
#include "codegen/Compile.h"
#include "passes/Passes.h"
#include "train/BuiltinModels.h"
#include "train/Trainer.h"
#include "runtime/CpuExecutor.h"

#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

namespace smelt::test {
namespace {

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(Lstm, MatchesFloat64LoopsAndFiniteDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t B = 2, T = 3, D = 3, U = 2;
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {B, T, D}, DType::f64), r = g.input("r", {B, T, U}, DType::f64);
  Tensor out = lstm(x, U, "lstm");
  std::vector<Tensor> params = g.parameterTensors(); // kernel, recurrent_kernel, bias
  ASSERT_EQ(params.size(), 3u);
  std::vector<Tensor> wrt = {x, params[0], params[1], params[2]};
  std::optional<rt::CpuExecutor> cpu =
      compileLossAndGradients(g, reduceSum(mul(out, r), {0, 1, 2}), wrt, {out});
  ASSERT_TRUE(cpu);
  std::vector<rt::HostTensor> args = {randomTensor({B, T, D}, DType::f64),
                                      randomTensor({B, T, U}, DType::f64),
                                      randomTensor({D, 4 * U}, DType::f64),
                                      randomTensor({U, 4 * U}, DType::f64),
                                      randomTensor({4 * U}, DType::f64)};
  std::vector<rt::HostTensor> result;
  ASSERT_TRUE(cpu->run(args, result).ok());
  ASSERT_EQ(result.size(), 6u);

  std::vector<double> xs = args[0].toDoubles(), w = args[2].toDoubles(),
                      u = args[3].toDoubles(), bias = args[4].toDoubles(), want;
  std::vector<double> h(size_t(B * U), 0.0), c(size_t(B * U), 0.0), states(size_t(B * T * U));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> next(h.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < U; ++k) {
        double z[4];
        for (int64_t gate = 0; gate < 4; ++gate) {
          int64_t col = gate * U + k;
          double sum = bias[size_t(col)];
          for (int64_t d = 0; d < D; ++d)
            sum += xs[size_t((b * T + t) * D + d)] * w[size_t(d * 4 * U + col)];
          for (int64_t j = 0; j < U; ++j)
            sum += h[size_t(b * U + j)] * u[size_t(j * 4 * U + col)];
          z[gate] = sum;
        }
        double &cell = c[size_t(b * U + k)];
        cell = sigmoid(z[1]) * cell + sigmoid(z[0]) * std::tanh(z[2]);
        next[size_t(b * U + k)] = sigmoid(z[3]) * std::tanh(cell);
        states[size_t((b * T + t) * U + k)] = next[size_t(b * U + k)];
      }
    h = next;
  }
  EXPECT_LT(relError(result[5].toDoubles(), states), 1e-12);
  expectGradientsMatchDifferences(*cpu, args, {0, 2, 3, 4}, 1e-6,
                                  {"x", "lstm/kernel", "lstm/recurrent_kernel", "lstm/bias"});
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
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line);
       it != std::sregex_iterator(); ++it)
    sum += std::stoull((*it)[1].str());
  EXPECT_GT(sum, 0u) << text.substr(0, 2000);
  return sum;
}

/// The reachability questions smelt-fuse asked on the training step (forward, gradients,
/// Adam) of the char LSTM unrolled over `steps`, summed over its functions' reports.
uint64_t fuseQuestions(int64_t steps) {
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
  return sumInFuseReport(pm, graph->module(), path, "reachability: ([0-9]+) questions");
}

// smelt-fuse's work on an unrolled recurrence grows linearly with its steps: pairing every
// step's gradient kernels through the splat constants they all read made the questions grow
// with the square of the steps (issue 35), and each question walks at most a fixed number of
// ops. A count of the pass's work, not a timing.
TEST(Lstm, FuseAsksLinearlyManyQuestionsInTheSteps) {
  uint64_t q16 = fuseQuestions(16), q32 = fuseQuestions(32), q64 = fuseQuestions(64);
  EXPECT_LE(double(q32), 2.3 * double(q16)) << q16 << " -> " << q32;
  EXPECT_LE(double(q64), 2.3 * double(q32)) << q32 << " -> " << q64;
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
