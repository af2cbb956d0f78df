// How the Trainer's optimizer updates are put together (issue 33): gradient
// accumulation over k micro-batches against one k-times-larger batch, and
// parameter groups against each group's optimizer run alone on the whole model.
#include "TestUtil.h"
#include "TrainTestUtil.h"

#include "frontend/Layers.h"
#include "train/Trainer.h"

#include <map>
#include <random>

namespace smelt::test {
namespace {

/// `count` examples of 5 features with 3 classes from a fixed random linear
/// teacher; fresh features each call.
data::Dataset teacherData(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed), teacher(3);
  std::normal_distribution<double> normal;
  std::vector<double> w(15), x, y;
  for (double &v : w)
    v = normal(teacher);
  for (int64_t i = 0; i < count; ++i) {
    double best = -1e300;
    int label = 0;
    for (int f = 0; f < 5; ++f)
      x.push_back(normal(rng));
    for (int c = 0; c < 3; ++c) {
      double score = 0;
      for (int f = 0; f < 5; ++f)
        score += x[size_t(i * 5 + f)] * w[size_t(f * 3 + c)];
      if (score > best)
        best = score, label = c;
    }
    y.push_back(label);
  }
  return data::Dataset(rt::HostTensor::fromDoubles({rt::DType::f32, {count, 5}}, x),
                       rt::HostTensor::fromDoubles({rt::DType::i32, {count}}, y));
}

train::TrainConfig teacherConfig(int64_t batch) {
  train::TrainConfig config;
  config.model = train::ModelSpec("teacher", {{5}, DType::f32}, {{}, DType::i32},
                                  [](Graph &, const train::ModelInputs &in) {
                                    Tensor h = dense(in.examples, 12, "hidden", Activation::Tanh);
                                    return train::classification(dense(h, 3, "out"), in.labels);
                                  });
  config.batch = batch;
  config.seed = rngSeed();
  config.optimizer.learningRate = 0.01;
  return config;
}

/// The parameters by name after `epochs` epochs on `data`.
std::map<std::string, std::vector<double>> trained(const train::TrainConfig &config,
                                                   const data::Dataset &data, int64_t epochs,
                                                   int64_t *globalStep = nullptr) {
  std::unique_ptr<train::Trainer> trainer = trainedFor(config, data, epochs);
  if (!trainer)
    return {};
  if (globalStep)
    *globalStep = trainer->globalStep();
  std::map<std::string, std::vector<double>> out;
  for (size_t i = 0; i < trainer->parameters().size(); ++i)
    out[trainer->parameterNames()[i]] = trainer->parameters()[i].toDoubles();
  return out;
}

/// ||a - b|| / ||b - start|| over every parameter: the difference against how
/// far training moved them, so that a run which did not train cannot pass.
double relativeToMovement(const std::map<std::string, std::vector<double>> &a,
                          const std::map<std::string, std::vector<double>> &b,
                          const std::map<std::string, std::vector<double>> &start) {
  double diff = 0, moved = 0;
  for (const auto &[name, values] : b)
    for (size_t i = 0; i < values.size(); ++i) {
      double d = a.at(name)[i] - values[i], m = values[i] - start.at(name)[i];
      diff += d * d, moved += m * m;
    }
  return std::sqrt(diff / moved);
}

// Adam is nearly blind to the gradients' scale, so Momentum checks that the
// mean is taken.
TEST(GradientAccumulation, FourMicroBatchesEqualOneBatchFourTimesLarger) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  data::Dataset data = teacherData(96, rngSeed());
  for (OptimizerKind kind : {OptimizerKind::Adam, OptimizerKind::Momentum}) {
    SCOPED_TRACE(kind == OptimizerKind::Adam ? "adam" : "momentum");
    auto configured = [&](int64_t batch) {
      train::TrainConfig config = teacherConfig(batch);
      config.optimizer.kind = kind;
      // The schedule counts updates: a step decay every 3 updates meets the
      // same rates.
      config.optimizer.schedule = *LearningRateSchedule::parse("step:3:0.5");
      return config;
    };
    int64_t largeSteps = 0, accumulatedSteps = 0;
    auto start = trained(configured(32), data, 0);
    auto large = trained(configured(32), data, 2, &largeSteps);
    train::TrainConfig micro = configured(8);
    micro.accumulateSteps = 4;
    auto accumulated = trained(micro, data, 2, &accumulatedSteps);
    EXPECT_EQ(largeSteps, 6);
    EXPECT_EQ(accumulatedSteps, 24);
    EXPECT_LT(relativeToMovement(accumulated, large, start), 1e-4);
    // Without accumulation the same micro-batches train differently: the test
    // can fail.
    EXPECT_GT(relativeToMovement(trained(configured(8), data, 2), large, start), 0.1);
  }
}

TEST(GradientAccumulation, WorksUnderLossScalingAndRefusesZeroSteps) {
  data::Dataset data = teacherData(32, rngSeed());
  train::TrainConfig config = teacherConfig(8);
  config.accumulateSteps = 2;
  config.precision = PrecisionPolicy::mixed_f16;
  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  std::vector<rt::HostTensor> before = (*trainer)->parameters();
  rt::Expected<train::Metrics> m = (*trainer)->trainEpoch(data, 0);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(std::isfinite(m->loss));
  EXPECT_NE(before[0].toDoubles(), (*trainer)->parameters()[0].toDoubles());
  config.accumulateSteps = 0;
  auto refused = train::Trainer::create(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("accumulateSteps must be >= 1, got 0"), std::string::npos);
}

/// Expects the parameters of `got` whose names start with `prefix` to equal
/// `want`'s.
void expectGroupMatches(const std::map<std::string, std::vector<double>> &got,
                        const std::map<std::string, std::vector<double>> &want,
                        const std::string &prefix) {
  for (const auto &[name, values] : got) {
    if (name.rfind(prefix, 0) == 0) {
      EXPECT_LT(relError(values, want.at(name)), 1e-6) << name;
    }
  }
}

// Two Adams at two rates, and Momentum beside Adam: after one step from the
// same start on the same batch, each group's parameters are where its optimizer
// alone takes them. (After more steps they are not: the other group's
// parameters change the gradients.)
TEST(ParameterGroups, EachGroupStepsAsItsOptimizerAlone) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  data::Dataset data = teacherData(16, rngSeed());
  train::TrainConfig adamFast = teacherConfig(16), adamSlow = teacherConfig(16),
                     momentum = teacherConfig(16);
  adamSlow.optimizer.learningRate = 0.001;
  momentum.optimizer.kind = OptimizerKind::Momentum;
  momentum.optimizer.learningRate = 0.05;
  auto fast = trained(adamFast, data, 1), slow = trained(adamSlow, data, 1),
       moved = trained(momentum, data, 1);

  train::TrainConfig twoAdams = teacherConfig(16);
  twoAdams.parameterGroups = {{"head", namePrefix("out/"), adamSlow.optimizer}};
  auto grouped = trained(twoAdams, data, 1);
  expectGroupMatches(grouped, fast, "hidden/");
  expectGroupMatches(grouped, slow, "out/");
  EXPECT_GT(relError(grouped.at("out/kernel"), fast.at("out/kernel")), 1e-3)
      << "the group's rate made no difference";

  train::TrainConfig mixed = teacherConfig(16);
  mixed.parameterGroups = {{"head", namePrefix("out/"), momentum.optimizer}};
  auto both = trained(mixed, data, 1);
  expectGroupMatches(both, fast, "hidden/");
  expectGroupMatches(both, moved, "out/");
}

TEST(ParameterGroups, AGroupAtRateZeroStaysAndMistakesAreNamed) {
  data::Dataset data = teacherData(32, rngSeed());
  auto start = trained(teacherConfig(16), data, 0);
  train::TrainConfig frozen = teacherConfig(16);
  OptimizerConfig still;
  still.learningRate = 0;
  frozen.parameterGroups = {{"head", namePrefix("out/"), still}};
  auto after = trained(frozen, data, 2);
  EXPECT_EQ(after.at("out/kernel"), start.at("out/kernel"));
  EXPECT_EQ(after.at("out/bias"), start.at("out/bias"));
  EXPECT_NE(after.at("hidden/kernel"), start.at("hidden/kernel"));

  train::TrainConfig unmatched = teacherConfig(16);
  unmatched.parameterGroups = {{"decoder", namePrefix("decoder/"), still}};
  auto refused = train::Trainer::create(unmatched);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("parameter group 'decoder' matches no parameter"),
            std::string::npos)
      << refused.message();
  unmatched.parameterGroups = {{"a", namePrefix("out/"), still}, {"a", namePrefix("h"), still}};
  refused = train::Trainer::create(unmatched);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("two parameter groups are named 'a'"), std::string::npos)
      << refused.message();
}

// The average follows the parameters' trajectory (e1 = p1, then e = 0.5 e + 0.5 p with SGD, one
// step per epoch) and evaluation runs on it.
TEST(MovingAverage, FollowsTheParametersAndIsWhatEvaluationRuns) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  data::Dataset data = teacherData(16, rngSeed());
  train::TrainConfig config = teacherConfig(16);
  config.optimizer.kind = OptimizerKind::SGD;
  config.optimizer.learningRate = 0.5;
  config.emaMomentum = 0.5;
  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  std::vector<std::vector<double>> average;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    ASSERT_TRUE((*trainer)->trainEpoch(data, epoch).ok());
    const std::vector<rt::HostTensor> &params = (*trainer)->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      std::vector<double> p = params[i].toDoubles();
      if (epoch == 0) {
        average.push_back(p);
        continue;
      }
      for (size_t k = 0; k < p.size(); ++k)
        average[i][k] = 0.5 * average[i][k] + 0.5 * p[k];
    }
  }
  std::vector<rt::HostTensor> averaged = (*trainer)->averagedParameters();
  ASSERT_EQ(averaged.size(), average.size());
  for (size_t i = 0; i < averaged.size(); ++i) {
    EXPECT_LT(relError(averaged[i].toDoubles(), average[i]), 1e-6)
        << (*trainer)->parameterNames()[i];
    EXPECT_GT(relError((*trainer)->parameters()[i].toDoubles(), average[i]), 1e-3)
        << "the average is the parameters: the test cannot tell";
  }
  train::TrainConfig plainConfig = config;
  plainConfig.emaMomentum = 0;
  auto plain = train::Trainer::create(plainConfig);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*plain)->setParameters(averaged).ok());
  rt::Expected<train::Metrics> onAverage = (*trainer)->evaluate(data),
                               expected = (*plain)->evaluate(data);
  ASSERT_TRUE(onAverage.ok() && expected.ok());
  EXPECT_EQ(onAverage->loss, expected->loss);

  config.emaMomentum = 1;
  auto refused = train::Trainer::create(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("emaMomentum must be in [0, 1)"), std::string::npos);
}

} // namespace
} // namespace smelt::test
