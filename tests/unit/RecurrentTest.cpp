// The unrolled LSTM (frontend/Recurrent.h): its hidden states against float64 loops, its
// gradients against central differences, and the gradient of its per-step slices built as
// one concat rather than one full-size pad per step (issue 35).
#include "TestUtil.h"

#include "frontend/Recurrent.h"
#include "ir/SmeltDialect.h"
#include "runtime/CpuExecutor.h"

#include <cmath>

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

} // namespace
} // namespace smelt::test
