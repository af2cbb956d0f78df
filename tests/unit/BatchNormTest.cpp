// Batch normalization (frontend/Normalization.h) and the variables under it:
// the layer against float64 loops and central differences, in both modes;
// Graph::assign's rules; and the Trainer carrying variables through steps,
// replicas, evaluation and checkpoints (issue 33).
#include "TestUtil.h"

#include "frontend/Normalization.h"
#include "train/Checkpoint.h"
#include "train/Trainer.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

namespace smelt::test {
namespace {

/// Per-channel mean and population variance of rows [n, channels] of `x`, rows
/// first..last.
void channelMoments(const std::vector<double> &x, int64_t channels, int64_t first, int64_t last,
                    std::vector<double> &mean, std::vector<double> &variance) {
  mean.assign(size_t(channels), 0.0);
  variance.assign(size_t(channels), 0.0);
  double n = double(last - first);
  for (int64_t row = first; row < last; ++row)
    for (int64_t c = 0; c < channels; ++c)
      mean[size_t(c)] += x[size_t(row * channels + c)] / n;
  for (int64_t row = first; row < last; ++row)
    for (int64_t c = 0; c < channels; ++c) {
      double d = x[size_t(row * channels + c)] - mean[size_t(c)];
      variance[size_t(c)] += d * d / n;
    }
}

TEST(BatchNorm, TrainingMatchesFloat64AndFiniteDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t B = 4, H = 3, W = 2, C = 5;
  const double momentum = 0.8, epsilon = 1e-3;
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {B, H, W, C}, DType::f64), r = g.input("r", {B, H, W, C}, DType::f64);
  Tensor y = batchNormalization(x, /*training=*/true, "bn", {momentum, epsilon});
  // x, r, then gamma, beta, moving_mean, moving_variance.
  std::vector<Tensor> params = g.parameterTensors(), variables = g.variableTensors();
  ASSERT_EQ(params.size(), 2u);
  ASSERT_EQ(variables.size(), 2u);
  std::optional<rt::CpuExecutor> cpu =
      compileLossAndGradients(g, reduceSum(mul(y, r), {0, 1, 2, 3}), {x, params[0], params[1]},
                              {y, g.assignedValue(variables[0]), g.assignedValue(variables[1])});
  ASSERT_TRUE(cpu);
  // A mean far from zero against the spread, as after a ReLU: the statistics
  // must not cancel.
  std::vector<rt::HostTensor> args = {
      randomTensor({B, H, W, C}, DType::f64, [] { return 50 + draw(-2, 2); }),
      randomTensor({B, H, W, C}, DType::f64),
      randomTensor({C}, DType::f64, [] { return draw(0.5, 2); }),
      randomTensor({C}, DType::f64),
      randomTensor({C}, DType::f64),
      randomTensor({C}, DType::f64, [] { return draw(0.5, 2); })};
  std::vector<rt::HostTensor> result;
  ASSERT_TRUE(cpu->run(args, result).ok());
  ASSERT_EQ(result.size(), 7u);

  std::vector<double> xs = args[0].toDoubles(), gamma = args[2].toDoubles(),
                      beta = args[3].toDoubles(), mm = args[4].toDoubles(),
                      mv = args[5].toDoubles(), mean, variance;
  channelMoments(xs, C, 0, B * H * W, mean, variance);
  std::vector<double> want(xs.size()), wantMean(mean.size()), wantVariance(mean.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t c = i % size_t(C);
    want[i] = gamma[c] * (xs[i] - mean[c]) / std::sqrt(variance[c] + epsilon) + beta[c];
  }
  for (size_t c = 0; c < size_t(C); ++c) {
    wantMean[c] = momentum * mm[c] + (1 - momentum) * mean[c];
    wantVariance[c] = momentum * mv[c] + (1 - momentum) * variance[c];
  }
  EXPECT_LT(relError(result[4].toDoubles(), want), 1e-12);
  EXPECT_LT(relError(result[5].toDoubles(), wantMean), 1e-12);
  EXPECT_LT(relError(result[6].toDoubles(), wantVariance), 1e-12);
  expectGradientsMatchDifferences(*cpu, args, {0, 2, 3}, 1e-6, {"x", "bn/gamma", "bn/beta"});
}

TEST(BatchNorm, InferenceNormalizesWithTheMovingAveragesAndAssignsNothing) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t B = 6, C = 3;
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {B, C}, DType::f64);
  BatchNormOptions options;
  options.center = false; // gamma only: no bn/beta
  Tensor y = batchNormalization(x, /*training=*/false, "bn", options);
  std::vector<Tensor> variables = g.variableTensors();
  ASSERT_EQ(g.parameterTensors().size(), 1u);
  ASSERT_EQ(variables.size(), 2u);
  EXPECT_EQ(g.assignedValue(variables[0]).value(), variables[0].value());
  EXPECT_EQ(g.assignedValue(variables[1]).value(), variables[1].value());
  g.setOutputs({y});
  std::vector<rt::HostTensor> args = {randomTensor({B, C}, DType::f64),
                                      randomTensor({C}, DType::f64), randomTensor({C}, DType::f64),
                                      randomTensor({C}, DType::f64, [] { return draw(0.5, 2); })};
  std::vector<rt::HostTensor> out = run(g, args);
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> xs = args[0].toDoubles(), gamma = args[1].toDoubles(),
                      mm = args[2].toDoubles(), mv = args[3].toDoubles(), want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t c = i % size_t(C);
    want[i] = gamma[c] * (xs[i] - mm[c]) / std::sqrt(mv[c] + 1e-3);
  }
  EXPECT_LT(relError(out[0].toDoubles(), want), 1e-12);
}

TEST(BatchNorm, MistakesAreBuildErrorsThatSayWhatIsWrong) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor v = g.input("v", {4});
  expectBuildError([&] { batchNormalization(v, true, "bn"); },
                   "batch normalization 'bn' needs [batch, ..., channels], got [4]");
  Tensor ids = g.input("ids", {4, 2}, DType::i32);
  expectBuildError([&] { batchNormalization(ids, true, "bn"); }, "needs a float input, got i32");
  Tensor x = g.input("x", {4, 2});
  expectBuildError([&] { batchNormalization(x, true, "bn", {1.5}); }, "momentum must be in [0, 1]");
  EXPECT_TRUE(g.parameters().empty()) << "a failed layer leaves no parameter or variable";

  Tensor counter = g.variable("counter", {}, Initializer::zeros(), DType::i64);
  expectBuildError([&] { g.assign(x, x); }, "is not a variable (Graph::variable)");
  expectBuildError([&] { g.assign(counter, scalarLike(x, 1)); },
                   "variable 'counter' is [] i64, its new value [] f32");
  Tensor next = add(counter, scalarLike(counter, 1));
  g.assign(counter, next);
  EXPECT_EQ(g.assignedValue(counter).value(), next.value());
  expectBuildError([&] { g.assign(counter, next); }, "already has its next value");
}

/// Rows of 3 features far from zero mean, labelled by the sign of their sum
/// about the mean.
struct Shifted {
  std::vector<double> x, y;
  data::Dataset dataset() const {
    int64_t count = int64_t(y.size());
    return data::Dataset(rt::HostTensor::fromDoubles({rt::DType::f32, {count, 3}}, x),
                         rt::HostTensor::fromDoubles({rt::DType::i32, {count}}, y));
  }
};

/// `count` such rows: fresh random data each call.
Shifted shiftedData(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x, y;
  for (int64_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int f = 0; f < 3; ++f) {
      double v = normal(rng);
      sum += v;
      x.push_back(3 + 2 * f + (f + 1) * v);
    }
    y.push_back(sum > 0);
  }
  // The examples are stored as f32: the references use the values the model
  // sees.
  for (double &v : x)
    v = double(float(v));
  return {x, y};
}

train::TrainConfig batchNormConfig(int64_t batch, int64_t replicas) {
  train::TrainConfig config;
  config.model = train::ModelSpec(
      "bn-probe", {{3}, DType::f32}, {{}, DType::i32}, [](Graph &, const train::ModelInputs &in) {
        Tensor z = batchNormalization(in.examples, in.training, "bn", {/*momentum=*/0.9});
        return train::classification(dense(z, 2, "out"), in.labels);
      });
  config.batch = batch;
  config.evalBatch = batch;
  config.replicas = replicas;
  config.seed = rngSeed();
  return config;
}

// With the whole dataset as the batch, the moving averages after k steps are
// known whatever the order: mean * (1 - 0.9^k), and 0.9^k + variance * (1 -
// 0.9^k), where two replicas each see half the batch and their variances are
// averaged. Evaluation then normalizes with them.
TEST(BatchNorm, TrainerCarriesMovingAveragesThroughStepsReplicasAndEvaluation) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t N = 64;
  Shifted shifted = shiftedData(N, rngSeed());
  data::Dataset data = shifted.dataset();
  const std::vector<double> &xs = shifted.x, &labels = shifted.y;
  for (int64_t replicas : {1, 2}) {
    SCOPED_TRACE(std::to_string(replicas) + " replicas");
    auto trainer = train::Trainer::create(batchNormConfig(N, replicas));
    ASSERT_TRUE(trainer.ok()) << trainer.message();
    EXPECT_EQ((*trainer)->variableNames(),
              (std::vector<std::string>{"bn/moving_mean", "bn/moving_variance"}));
    EXPECT_EQ((*trainer)->parameterNames(),
              (std::vector<std::string>{"bn/gamma", "bn/beta", "out/kernel", "out/bias"}));
    for (int64_t epoch = 0; epoch < 2; ++epoch)
      ASSERT_TRUE((*trainer)->trainEpoch(data, epoch).ok());
    // Each replica's share is one half of the shuffled order; the mean is the
    // same either way, and the averaged half-variances are checked against
    // their bounds below.
    std::vector<double> mean, variance;
    channelMoments(xs, 3, 0, N, mean, variance);
    double kept = 0.9 * 0.9;
    std::vector<double> gotMean = (*trainer)->variables()[0].toDoubles(),
                        gotVariance = (*trainer)->variables()[1].toDoubles();
    for (size_t c = 0; c < 3; ++c) {
      EXPECT_NEAR(gotMean[c], mean[c] * (1 - kept), 1e-5 * std::abs(mean[c])) << c;
      if (replicas == 1)
        EXPECT_NEAR(gotVariance[c], kept + variance[c] * (1 - kept), 1e-5 * variance[c]) << c;
      else // the mean of two halves' variances is below the whole's (it lacks
           // the between-half term)
        EXPECT_LE(gotVariance[c], kept + variance[c] * (1 - kept) + 1e-5) << c;
    }

    // Evaluation: the model with the moving averages, in float64.
    const auto &p = (*trainer)->parameters();
    std::vector<double> gamma = p[0].toDoubles(), beta = p[1].toDoubles(),
                        kernel = p[2].toDoubles(), bias = p[3].toDoubles();
    double loss = 0;
    for (int64_t i = 0; i < N; ++i) {
      double logits[2] = {bias[0], bias[1]};
      for (size_t c = 0; c < 3; ++c) {
        double z =
            gamma[c] * (xs[size_t(i) * 3 + c] - gotMean[c]) / std::sqrt(gotVariance[c] + 1e-3) +
            beta[c];
        logits[0] += z * kernel[c * 2], logits[1] += z * kernel[c * 2 + 1];
      }
      double top = std::max(logits[0], logits[1]);
      double logSum = top + std::log(std::exp(logits[0] - top) + std::exp(logits[1] - top));
      loss += (logSum - logits[size_t(labels[size_t(i)])]) / double(N);
    }
    rt::Expected<train::Metrics> evaluated = (*trainer)->evaluate(data);
    ASSERT_TRUE(evaluated.ok()) << evaluated.message();
    EXPECT_NEAR(evaluated->loss, loss, 1e-5 * std::max(1.0, loss));
  }
}

/// Trains one epoch, saves, trains another; a new trainer loads the save and trains the second
/// epoch: its parameters and moving averages must equal the uninterrupted run's, bit for bit.
void checkResumeBitForBit(int replicas) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  data::Dataset data = shiftedData(100, rngSeed()).dataset();
  train::TrainConfig config = batchNormConfig(16, replicas);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("smelt-bn-resume-" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  auto uninterrupted = train::Trainer::create(config);
  ASSERT_TRUE(uninterrupted.ok()) << uninterrupted.message();
  ASSERT_TRUE((*uninterrupted)->trainEpoch(data, 0).ok());
  ASSERT_TRUE((*uninterrupted)->save(path, 1).ok());
  ASSERT_TRUE((*uninterrupted)->trainEpoch(data, 1).ok());

  rt::Expected<train::LoadedCheckpoint> saved = train::loadCheckpoint(path);
  ASSERT_TRUE(saved.ok()) << saved.message();
  bool holdsMean = false;
  for (const data::NamedTensor &t : saved->tensors)
    holdsMean |= t.name == "bn/moving_mean";
  EXPECT_TRUE(holdsMean);

  auto resumed = train::Trainer::create(config);
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->load(path).ok());
  ASSERT_TRUE((*resumed)->trainEpoch(data, 1).ok());
  const auto &a = (*uninterrupted)->variables(), &b = (*resumed)->variables();
  ASSERT_EQ(a.size(), 2u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].byteSize()), 0)
        << (*resumed)->variableNames()[i];
  std::vector<rt::HostTensor> pa = (*uninterrupted)->parameters(), pb = (*resumed)->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(std::memcmp(pa[i].raw(), pb[i].raw(), pa[i].byteSize()), 0) << "parameter " << i;
  // The moving averages moved: a run that never updated them would also resume
  // equal.
  EXPECT_NE(a[0].toDoubles()[0], 0.0);
  std::filesystem::remove(path);
}

// With two replicas too: the restored values are each replica's (the last one takes the
// checkpoint's tensors, the others copies), or the resumed run's gradients would differ.
TEST(BatchNorm, CheckpointsHoldTheVariablesAndResumeBitForBit) {
  for (int replicas : {1, 2}) {
    SCOPED_TRACE("replicas " + std::to_string(replicas));
    checkResumeBitForBit(replicas);
  }
}

TEST(BatchNorm, ModelsThatBreakTheVariableContractAreRefusedByName) {
  train::TrainConfig config = batchNormConfig(16, 1);
  config.model.build = [](Graph &g, const train::ModelInputs &in) {
    Tensor mask = g.input("mask", {16, 3});
    return train::classification(dense(mul(in.examples, mask), 2, "out"), in.labels);
  };
  auto stray = train::Trainer::create(config);
  ASSERT_FALSE(stray.ok());
  EXPECT_NE(stray.message().find("its function made the graph input 'mask'"), std::string::npos)
      << stray.message();
  EXPECT_NE(stray.message().find("Graph::variable"), std::string::npos) << stray.message();

  config.model.build = [](Graph &g, const train::ModelInputs &in) {
    if (in.training)
      g.variable("seen", {}, Initializer::zeros());
    return train::classification(dense(in.examples, 2, "out"), in.labels);
  };
  auto trainingOnly = train::Trainer::create(config);
  ASSERT_TRUE(trainingOnly.ok()) << trainingOnly.message();
  rt::Expected<train::Metrics> evaluated = (*trainingOnly)->evaluate(shiftedData(16, 1).dataset());
  ASSERT_FALSE(evaluated.ok());
  EXPECT_NE(evaluated.message().find("builds other parameters or variables for evaluation"),
            std::string::npos)
      << evaluated.message();
}

} // namespace
} // namespace smelt::test
