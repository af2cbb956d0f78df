// Optimizers against float64 formulas: each update rule with a constant and a fed learning
// rate, clipping by the global norm, AdamW's decay mask, and the schedules' values.
#include "TestUtil.h"

#include "frontend/Optimizers.h"

#include <cmath>

namespace smelt::test {
namespace {

/// Runs two optimizer steps on p with gradients g1, g2 through the graph and returns p.
/// With `rates`, the learning rate is the step's input and takes rates[0], then rates[1].
std::vector<double> twoSteps(const OptimizerConfig &config, const rt::HostTensor &p0,
                             const rt::HostTensor &g1, const rt::HostTensor &g2,
                             std::vector<double> rates = {}) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "step");
  Tensor p = g.parameter("p", p0.type().shape, Initializer::zeros(), DType::f64);
  Tensor grad = g.input("g", p0.type().shape, DType::f64);
  std::optional<Tensor> rate;
  if (!rates.empty())
    rate = g.input("learning_rate", {}, DType::f64);
  OptimizerUpdate u = applyOptimizer(g, config, {p}, {grad}, rate);
  std::vector<Tensor> outs = u.newParams;
  outs.insert(outs.end(), u.newState.begin(), u.newState.end());
  g.setOutputs(outs);
  // State inputs start at zero, in their f64 (or f32 for Adam's step) types.
  std::vector<rt::HostTensor> state;
  for (const Tensor &s : u.stateInputs)
    state.push_back(rt::HostTensor::zeros({toRt(s.dtype()), s.shape()}));
  rt::HostTensor param = p0;
  for (int t = 0; t < 2; ++t) {
    std::vector<rt::HostTensor> args = {param, t ? g2 : g1};
    if (rate)
      args.push_back(rt::HostTensor::fromDoubles({rt::DType::f64, {}}, {rates[size_t(t)]}));
    args.insert(args.end(), state.begin(), state.end());
    std::vector<rt::HostTensor> out = run(g, args);
    param = out[0];
    for (size_t i = 0; i < state.size(); ++i)
      state[i] = out[1 + i];
  }
  return param.toDoubles();
}

TEST(Optimizers, TwoStepsMatchFloat64Formulas) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  rt::HostTensor p0 = randomTensor({7}, DType::f64), g1 = randomTensor({7}, DType::f64),
                 g2 = randomTensor({7}, DType::f64);
  std::vector<double> p = p0.toDoubles(), a = g1.toDoubles(), b = g2.toDoubles();
  // A constant rate, and one fed per step as a schedule feeds it.
  for (std::vector<double> rates : {std::vector<double>{}, std::vector<double>{0.05, 0.02}})
    for (OptimizerKind kind : {OptimizerKind::SGD, OptimizerKind::Momentum,
                               OptimizerKind::Adam, OptimizerKind::AdamW}) {
      OptimizerConfig config;
      config.kind = kind;
      config.learningRate = 0.05;
      // p is rank 1, which AdamW leaves alone by default (biases, norm gains): decay it.
      config.decays = [](const std::string &, const std::vector<int64_t> &) { return true; };
      std::vector<double> ref = p, m(7, 0), v(7, 0);
      for (int t = 1; t <= 2; ++t) {
        const std::vector<double> &gr = t == 1 ? a : b;
        double lr = rates.empty() ? 0.05 : rates[size_t(t - 1)];
        double alpha = lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
        for (int i = 0; i < 7; ++i) {
          double old = ref[i];
          switch (kind) {
          case OptimizerKind::SGD:
            ref[i] -= lr * gr[i];
            break;
          case OptimizerKind::Momentum:
            m[i] = 0.9 * m[i] - lr * gr[i];
            ref[i] += m[i];
            break;
          case OptimizerKind::Adam:
          case OptimizerKind::AdamW:
            m[i] = 0.9 * m[i] + 0.1 * gr[i];
            v[i] = 0.999 * v[i] + 0.001 * gr[i] * gr[i];
            ref[i] -= alpha * m[i] / (std::sqrt(v[i]) + 1e-7);
            if (kind == OptimizerKind::AdamW)
              ref[i] -= lr * 0.004 * old;
            break;
          }
        }
      }
      EXPECT_LE(relError(twoSteps(config, p0, g1, g2, rates), ref), 1e-13)
          << "optimizer " << int(kind) << (rates.empty() ? "" : ", fed rates");
    }
}

TEST(Optimizers, ClipByGlobalNormScalesAllGradientsTogether) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  rt::HostTensor a = randomTensor({3, 4}, DType::f64), b = randomTensor({5}, DType::f64);
  double squares = 0;
  for (const rt::HostTensor *t : {&a, &b})
    for (double x : t->toDoubles())
      squares += x * x;
  double norm = std::sqrt(squares);
  // Below the norm every gradient shrinks by clip / norm; above it nothing changes.
  for (double clip : {0.5 * norm, 2 * norm}) {
    mlir::MLIRContext ctx;
    Graph g(ctx, "clip");
    Tensor ga = g.input("a", {3, 4}, DType::f64), gb = g.input("b", {5}, DType::f64);
    g.setOutputs(clipByGlobalNorm({ga, gb}, clip));
    std::vector<rt::HostTensor> out = run(g, {a, b});
    double scale = clip / std::max(norm, clip);
    for (size_t k = 0; k < 2; ++k) {
      std::vector<double> want = (k ? b : a).toDoubles();
      for (double &x : want)
        x *= scale;
      EXPECT_LE(relError(out[k].toDoubles(), want), 1e-14) << "clip " << clip << ", #" << k;
    }
  }
  // Through the optimizer: SGD with clipping moves p by lr * clipped gradient.
  OptimizerConfig config;
  config.kind = OptimizerKind::SGD;
  config.learningRate = 0.1;
  config.clipGlobalNorm = 0.25;
  rt::HostTensor p0 = randomTensor({5}, DType::f64);
  std::vector<double> want = p0.toDoubles(), gb = b.toDoubles();
  double bNorm = 0;
  for (double x : gb)
    bNorm += x * x;
  bNorm = std::sqrt(bNorm);
  for (int t = 0; t < 2; ++t)
    for (size_t i = 0; i < want.size(); ++i)
      want[i] -= 0.1 * gb[i] * 0.25 / std::max(bNorm, 0.25);
  EXPECT_LE(relError(twoSteps(config, p0, b, b), want), 1e-13);
}

TEST(Optimizers, AdamWDecaysKernelsNotBiasesUnlessTold) {
  // Zero gradients leave Adam's own step at 0, so what moves is the decay alone.
  auto decayed = [](const OptimizerConfig &config) {
    mlir::MLIRContext ctx;
    Graph g(ctx, "step");
    Tensor kernel = g.parameter("layer/kernel", {2, 3}, Initializer::zeros(), DType::f64);
    Tensor bias = g.parameter("layer/bias", {3}, Initializer::zeros(), DType::f64);
    Tensor zero2 = constant(g, 0.0, {2, 3}, DType::f64), zero1 = constant(g, 0.0, {3}, DType::f64);
    OptimizerUpdate u = applyOptimizer(g, config, {kernel, bias}, {zero2, zero1});
    g.setOutputs(u.newParams);
    std::vector<rt::HostTensor> args = {
        rt::HostTensor::fromDoubles({rt::DType::f64, {2, 3}}, std::vector<double>(6, 2.0)),
        rt::HostTensor::fromDoubles({rt::DType::f64, {3}}, std::vector<double>(3, 2.0))};
    for (const Tensor &s : u.stateInputs)
      args.push_back(rt::HostTensor::zeros({toRt(s.dtype()), s.shape()}));
    std::vector<rt::HostTensor> out = run(g, args);
    return std::pair<double, double>{out[0].at(0), out[1].at(0)};
  };
  OptimizerConfig config;
  config.kind = OptimizerKind::AdamW;
  config.learningRate = 0.5;
  config.weightDecay = 0.1;
  auto [kernel, bias] = decayed(config);
  EXPECT_DOUBLE_EQ(kernel, 2.0 * (1 - 0.5 * 0.1));
  EXPECT_DOUBLE_EQ(bias, 2.0);
  // A mask by name: decay the bias only.
  config.decays = [](const std::string &name, const std::vector<int64_t> &) {
    return name == "layer/bias";
  };
  std::tie(kernel, bias) = decayed(config);
  EXPECT_DOUBLE_EQ(kernel, 2.0);
  EXPECT_DOUBLE_EQ(bias, 2.0 * (1 - 0.5 * 0.1));
}

TEST(Schedules, KnownValues) {
  LearningRateSchedule step;
  step.kind = LearningRateSchedule::Kind::step;
  step.every = 10;
  step.factor = 0.5;
  EXPECT_DOUBLE_EQ(step.at(0.1, 0), 0.1);
  EXPECT_DOUBLE_EQ(step.at(0.1, 9), 0.1);
  EXPECT_DOUBLE_EQ(step.at(0.1, 10), 0.05);
  EXPECT_DOUBLE_EQ(step.at(0.1, 25), 0.025);
  LearningRateSchedule exponential = step;
  exponential.kind = LearningRateSchedule::Kind::exponential;
  EXPECT_DOUBLE_EQ(exponential.at(0.1, 5), 0.1 * std::sqrt(0.5));
  LearningRateSchedule cosine;
  cosine.kind = LearningRateSchedule::Kind::warmupCosine;
  cosine.warmupSteps = 4;
  cosine.totalSteps = 14;
  cosine.finalFraction = 0.1;
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 0), 0.25);
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 3), 1.0);
  EXPECT_DOUBLE_EQ(cosine.at(1.0, 4), 1.0);
  EXPECT_NEAR(cosine.at(1.0, 9), 0.1 + 0.9 * 0.5, 1e-15);
  EXPECT_NEAR(cosine.at(1.0, 14), 0.1, 1e-15);
  EXPECT_NEAR(cosine.at(1.0, 100), 0.1, 1e-15);

  std::optional<LearningRateSchedule> parsed = LearningRateSchedule::parse("cosine:4:14:0.1");
  ASSERT_TRUE(parsed);
  EXPECT_DOUBLE_EQ(parsed->at(1.0, 9), cosine.at(1.0, 9));
  ASSERT_TRUE(LearningRateSchedule::parse("step:10:0.5"));
  EXPECT_DOUBLE_EQ(LearningRateSchedule::parse("step:10:0.5")->at(0.1, 25), 0.025);
  EXPECT_TRUE(LearningRateSchedule::parse("constant"));
  for (const char *bad : {"", "cosine", "cosine:10:5", "step:0:0.5", "step:10:2", "step:10:x",
                          "exponential:1.5:0.5", "constant:1", "linear:1:2", "step:10:nan"})
    EXPECT_FALSE(LearningRateSchedule::parse(bad)) << bad;
}

} // namespace
} // namespace smelt::test
