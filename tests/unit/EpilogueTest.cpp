// Matmul and conv2d epilogues (smelt-fuse folds the bias add and activation into the oneDNN
// call): on fresh random inputs, the folded step gives the unfolded pipeline's results and a
// float64 reference's, in f32 and bf16, for each activation; an MLP's gradients through folded
// layers match central differences in float64 and the float64 reference in f32 and bf16.
#include "TestUtil.h"

#include <numeric>

#include "frontend/Ops.h"

#include <cmath>

namespace smelt::test {
namespace {

enum class Act { None, Relu, Tanh, Logistic };

Tensor activate(Tensor x, Act act) {
  switch (act) {
  case Act::None:
    return x;
  case Act::Relu:
    return relu(x);
  case Act::Tanh:
    return tanh(x);
  case Act::Logistic:
    return logistic(x);
  }
  return x;
}

const char *name(Act act) {
  return act == Act::None ? "none" : act == Act::Relu ? "relu" : act == Act::Tanh ? "tanh" : "logistic";
}

/// `exe`'s contraction steps that have an epilogue.
int foldedSteps(const rt::Executable &exe) {
  int folded = 0;
  for (const rt::Step &step : exe.steps)
    folded += step.epilogue().any();
  return folded;
}

/// With `epilogues`, conv2d's too (the default); without, neither.
rt::Executable compileWith(Graph &g, bool epilogues) {
  PipelineOptions options;
  options.epilogues = epilogues;
  options.convEpilogues = epilogues;
  mlir::FailureOr<rt::Executable> exe = codegen::compile(g.module(), g.name(), options);
  EXPECT_TRUE(mlir::succeeded(exe));
  return mlir::succeeded(exe) ? std::move(*exe) : rt::Executable{};
}

std::vector<rt::HostTensor> runExe(const rt::Executable &exe,
                                   const std::vector<rt::HostTensor> &inputs) {
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(exe);
  EXPECT_TRUE(cpu.ok()) << cpu.message();
  std::vector<rt::HostTensor> outputs;
  if (cpu.ok())
    if (rt::Status s = cpu->run(inputs, outputs); !s.ok())
      ADD_FAILURE() << s.message();
  return outputs;
}

/// The same values in f64, for the reference.
std::vector<rt::HostTensor> inF64(const std::vector<rt::HostTensor> &inputs) {
  std::vector<rt::HostTensor> out;
  for (const rt::HostTensor &t : inputs)
    out.push_back(rt::HostTensor::fromDoubles({rt::DType::f64, t.type().shape}, t.toDoubles()));
  return out;
}

using Build = std::function<std::vector<Tensor>(Graph &, DType)>;

/// Builds `build` in `dtype` and in f64; runs the dtype graph with epilogues folded (expecting
/// `folded` steps with one) and without, and the f64 graph without, on the same fresh inputs
/// (drawn in `dtype`, so all three read the same values); compares each output with float64,
/// and in f32 with the unfolded pipeline too.
void expectFoldedMatches(const std::string &what, DType dtype, int folded, Build build,
                         const std::vector<std::vector<int64_t>> &shapes, double tol = 0) {
  tol = tol > 0 ? tol : tolerance(dtype);
  SCOPED_TRACE(what + " SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext context, context64;
  Graph g(context, "f"), g64(context64, "f");
  g.setOutputs(build(g, dtype));
  g64.setOutputs(build(g64, DType::f64));
  rt::Executable on = compileWith(g, true), off = compileWith(g, false);
  rt::Executable reference = compileWith(g64, false);
  EXPECT_EQ(foldedSteps(on), folded) << on.str();
  EXPECT_EQ(foldedSteps(off), 0);
  std::vector<rt::HostTensor> inputs;
  for (const std::vector<int64_t> &shape : shapes)
    inputs.push_back(randomTensor(shape, dtype));
  std::vector<rt::HostTensor> got = runExe(on, inputs), unfolded = runExe(off, inputs),
                              want = runExe(reference, inF64(inputs));
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(unfolded.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(relError(got[i].toDoubles(), want[i].toDoubles()), tol)
        << "output #" << i << " against float64";
    // In bf16 the unfolded pipeline rounds the matmul, the bias add and the activation each to
    // bf16 where the fold rounds once, so it can be the further of the two from float64, by
    // more than `tol`: for the MLP's bias gradients (tanh's derivative 1 - y^2 cancels), seed
    // 9548760213660388748 put the unfolded 18% from float64 and the folded 4.7%. Float64 is
    // the reference there; in f32 both round alike and must agree closely.
    if (dtype == DType::f32) {
      EXPECT_LE(relError(got[i].toDoubles(), unfolded[i].toDoubles()), 2 * tol)
          << "output #" << i << " against the unfolded pipeline";
    }
  }
}

TEST(Epilogues, DenseLayerMatchesUnfoldedAndFloat64) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (Act act : {Act::None, Act::Relu, Act::Tanh, Act::Logistic})
      expectFoldedMatches(
          std::string("dense ") + name(act), dtype, 2,
          [act](Graph &g, DType t) -> std::vector<Tensor> {
            Tensor x = g.input("x", {24, 40}, t), w = g.input("w", {40, 17}, t),
                   b = g.input("b", {17}, t), xs = g.input("xs", {3, 5, 40}, t),
                   ws = g.input("ws", {3, 17, 40}, t);
            // A plain layer, and a batched one with its rhs transposed.
            return {activate(add(matmul(x, w), b), act),
                    activate(add(matmul(xs, ws, false, true), b), act)};
          },
          {{24, 40}, {40, 17}, {17}, {3, 5, 40}, {3, 17, 40}});
}

TEST(Epilogues, ActivationWithoutBiasAndBiasWithoutActivation) {
  for (DType dtype : {DType::f32, DType::bf16})
    expectFoldedMatches(
        "relu alone, bias alone", dtype, 2,
        [](Graph &g, DType t) -> std::vector<Tensor> {
          Tensor x = g.input("x", {16, 32}, t), w = g.input("w", {32, 8}, t),
                 v = g.input("v", {32, 8}, t), b = g.input("b", {8}, t);
          Tensor logits = add(matmul(x, w), b); // two users: only the bias folds
          return {relu(matmul(x, v)), logits, neg(logits)};
        },
        {{16, 32}, {32, 8}, {32, 8}, {8}});
}

TEST(Epilogues, ConvLayerMatchesUnfoldedAndFloat64) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (Act act : {Act::None, Act::Relu, Act::Tanh, Act::Logistic})
      expectFoldedMatches(
          std::string("conv2d ") + name(act), dtype, 1,
          [act](Graph &g, DType t) -> std::vector<Tensor> {
            Tensor x = g.input("x", {2, 9, 8, 3}, t), w = g.input("w", {3, 2, 3, 6}, t),
                   b = g.input("b", {6}, t);
            return {activate(add(conv2d(x, w, {2, 1}, {1, 1, 0, 1}, {1, 2}), b), act)};
          },
          {{2, 9, 8, 3}, {3, 2, 3, 6}, {6}});
}

/// An MLP's loss sum(mlp(x) * r) and its gradients with respect to every weight and bias.
std::vector<Tensor> mlpGradients(Graph &g, DType t) {
  Tensor x = g.input("x", {12, 10}, t), w1 = g.input("w1", {10, 16}, t),
         b1 = g.input("b1", {16}, t), w2 = g.input("w2", {16, 8}, t), b2 = g.input("b2", {8}, t),
         w3 = g.input("w3", {8, 5}, t), b3 = g.input("b3", {5}, t), r = g.input("r", {12, 5}, t);
  Tensor h = relu(add(matmul(x, w1), b1));
  h = tanh(add(matmul(h, w2), b2));
  Tensor y = add(matmul(h, w3), b3);
  Tensor terms = y * r;
  Tensor loss = reduceSum(terms, {0, 1});
  // The loss's terms rather than their sum: terms of both signs can cancel to a sum near 0,
  // whose relative error in bf16 says nothing (it missed 10% in about 3% of seeds).
  std::vector<Tensor> outputs = {terms};
  for (Tensor grad : g.gradients(loss, {w1, b1, w2, b2, w3, b3}))
    outputs.push_back(grad);
  return outputs;
}

const std::vector<std::vector<int64_t>> kMlpShapes = {{12, 10}, {10, 16}, {16}, {16, 8},
                                                      {8},      {8, 5},   {5},  {12, 5}};

TEST(Epilogues, MlpGradientsMatchUnfoldedAndFloat64) {
  // The three forward layers fold (bias+relu, bias+tanh, bias); backward matmuls do not. In
  // bf16 every op of the backward pass rounds (unfolded too): the gradients land within a few
  // percent of float64, not within one rounding; the first layer's, through two layers of
  // rounded gradients, reached 12-14% in 3 of about 150 seeds, so the bound there is 20%; a
  // lost bias or a wrong activation moves them by far more.
  expectFoldedMatches("mlp gradients", DType::f32, 3, mlpGradients, kMlpShapes, 2e-5);
  expectFoldedMatches("mlp gradients", DType::bf16, 3, mlpGradients, kMlpShapes, 0.2);
}

TEST(Epilogues, MlpGradientsMatchCentralDifferencesInFloat64) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext context;
  Graph g(context, "f");
  g.setOutputs(mlpGradients(g, DType::f64));
  rt::Executable exe = compileWith(g, true);
  ASSERT_EQ(foldedSteps(exe), 3) << exe.str();
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(exe);
  ASSERT_TRUE(cpu.ok()) << cpu.message();
  std::vector<rt::HostTensor> args;
  for (const std::vector<int64_t> &shape : kMlpShapes)
    args.push_back(randomTensor(shape, DType::f64, [] { return draw(-1, 1, 0.05); }));
  std::vector<rt::HostTensor> out;
  ASSERT_TRUE(cpu->run(args, out).ok());
  auto lossAt = [&] {
    std::vector<rt::HostTensor> o;
    EXPECT_TRUE(cpu->run(args, o).ok());
    std::vector<double> terms = o[0].toDoubles();
    return std::accumulate(terms.begin(), terms.end(), 0.0);
  };
  for (size_t p = 1; p <= 6; ++p) // w1 b1 w2 b2 w3 b3: arguments 1..6, gradients 1..6
    EXPECT_LE(relError(out[p].toDoubles(),
                       centralDifferences(args[p].data<double>(), args[p].type().numElements(),
                                          lossAt)),
              1e-6)
        << "gradient #" << p;
}

} // namespace
} // namespace smelt::test
