// fit() and the Trainer with a user's model: the short last batch trains (or is counted when
// dropped), the learning-rate schedule reaches the steps, metrics by name, early stopping and
// checkpoints, and a model that breaks its contract is an error naming it.
#include "TestUtil.h"

#include "frontend/Layers.h"
#include "train/BuiltinModels.h"
#include "train/Fit.h"

#include <filesystem>
#include <random>

namespace smelt::test {
namespace {

/// `count` examples of 6 features, labelled by the argmax of a fixed random linear map into
/// 4 classes: learnable, and fresh random features every call.
data::Dataset teacherData(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> w(24), x, y;
  std::mt19937_64 teacher(7);
  for (double &v : w)
    v = std::normal_distribution<double>()(teacher);
  for (int64_t i = 0; i < count; ++i) {
    double best = -1e300;
    int label = 0;
    std::vector<double> row(6);
    for (double &v : row)
      v = normal(rng);
    for (int c = 0; c < 4; ++c) {
      double score = 0;
      for (int f = 0; f < 6; ++f)
        score += row[size_t(f)] * w[size_t(f * 4 + c)];
      if (score > best)
        best = score, label = c;
    }
    x.insert(x.end(), row.begin(), row.end());
    y.push_back(label);
  }
  return data::Dataset(rt::HostTensor::fromDoubles({rt::DType::f32, {count, 6}}, x),
                       rt::HostTensor::fromDoubles({rt::DType::i32, {count}}, y));
}

/// A user's classifier for teacherData, reporting accuracy and top-2 and top-4 accuracy.
train::ModelSpec userModel() {
  return train::ModelSpec("teacher", {{6}, DType::f32}, {{}, DType::i32},
                          [](Graph &, const train::ModelInputs &in) {
                            Tensor h = dense(in.examples, 16, "hidden", Activation::Tanh);
                            return train::classification(dense(h, 4, "out"), in.labels, {2, 4});
                          });
}

train::TrainConfig userConfig() {
  train::TrainConfig config;
  config.model = userModel();
  config.batch = 32;
  config.evalBatch = 64;
  config.optimizer.kind = OptimizerKind::Adam;
  config.optimizer.learningRate = 0.02;
  config.seed = rngSeed();
  return config;
}

TEST(Fit, UserModelTrainsWithItsMetricsAndTheShortLastBatch) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  auto trainer = train::Trainer::create(userConfig());
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  EXPECT_EQ((*trainer)->metricNames(),
            (std::vector<std::string>{"accuracy", "top2_accuracy", "top4_accuracy"}));
  // 100 examples in batches of 32: three full steps and one of 4.
  data::Dataset data = teacherData(100, rngSeed()), held = teacherData(300, rngSeed() + 1);
  train::FitOptions options;
  options.epochs = 12;
  options.validation = &held;
  rt::Expected<train::History> history = train::fit(**trainer, data, options);
  ASSERT_TRUE(history.ok()) << history.message();
  const train::EpochLogs &last = history->epochs.back();
  EXPECT_EQ(last.train.examples, 100);
  EXPECT_EQ(last.train.steps, 4);
  EXPECT_EQ(last.train.droppedExamples, 0);
  EXPECT_EQ((*trainer)->globalStep(), 12 * 4);
  EXPECT_LT(last.value("loss"), history->epochs.front().value("loss"));
  EXPECT_GE(last.value("val_accuracy"), 0.8);
  // Every class is among the top 4 of 4; the top 2 hold at least the top 1.
  EXPECT_EQ(last.value("val_top4_accuracy"), 1.0);
  EXPECT_GE(last.value("val_top2_accuracy"), last.value("val_accuracy"));
  EXPECT_TRUE(std::isnan(last.value("val_precision")));

  // dropRemainder: three steps, and the 4 left out are counted.
  train::TrainConfig config = userConfig();
  config.dropRemainder = true;
  auto dropping = train::Trainer::create(config);
  ASSERT_TRUE(dropping.ok()) << dropping.message();
  rt::Expected<train::Metrics> epoch = (*dropping)->trainEpoch(data, 0);
  ASSERT_TRUE(epoch.ok()) << epoch.message();
  EXPECT_EQ(epoch->examples, 96);
  EXPECT_EQ(epoch->steps, 3);
  EXPECT_EQ(epoch->droppedExamples, 4);
  EXPECT_EQ((*dropping)->globalStep(), 3);
}

// One-step epochs: the second epoch's step gets the schedule's second rate, so it ends where a
// constant rate of that value, started from the first epoch's parameters, ends (SGD has no
// state that could differ).
TEST(Fit, TheScheduleSetsEachStepsRate) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  data::Dataset data = teacherData(32, rngSeed());
  train::TrainConfig config = userConfig();
  config.optimizer.kind = OptimizerKind::SGD;
  config.optimizer.learningRate = 0.5;
  config.optimizer.schedule.kind = LearningRateSchedule::Kind::step;
  config.optimizer.schedule.every = 1;
  config.optimizer.schedule.factor = 0.25;
  auto scheduled = train::Trainer::create(config);
  ASSERT_TRUE(scheduled.ok()) << scheduled.message();
  ASSERT_TRUE((*scheduled)->trainEpoch(data, 0).ok());
  std::vector<rt::HostTensor> afterFirst = (*scheduled)->parameters();
  EXPECT_DOUBLE_EQ((*scheduled)->learningRate(), 0.5 * 0.25);
  ASSERT_TRUE((*scheduled)->trainEpoch(data, 1).ok());

  config.optimizer.schedule = LearningRateSchedule();
  config.optimizer.learningRate = 0.5 * 0.25;
  auto constant = train::Trainer::create(config);
  ASSERT_TRUE(constant.ok()) << constant.message();
  ASSERT_TRUE((*constant)->setParameters(afterFirst).ok());
  ASSERT_TRUE((*constant)->trainEpoch(data, 1).ok());
  for (size_t i = 0; i < afterFirst.size(); ++i) {
    EXPECT_EQ((*scheduled)->parameters()[i].toDoubles(), (*constant)->parameters()[i].toDoubles())
        << (*constant)->parameterNames()[i];
    EXPECT_NE((*scheduled)->parameters()[i].toDoubles(), afterFirst[i].toDoubles());
  }
}

TEST(Fit, EarlyStoppingAndCheckpoints) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  data::Dataset data = teacherData(64, rngSeed());
  // A rate of 0: the loss cannot improve, so patience 1 stops after the third epoch.
  train::TrainConfig config = userConfig();
  config.optimizer.kind = OptimizerKind::SGD;
  config.optimizer.learningRate = 0;
  auto frozen = train::Trainer::create(config);
  ASSERT_TRUE(frozen.ok()) << frozen.message();
  std::string dir = ::testing::TempDir() + "/fit-" + std::to_string(rngSeed());
  std::filesystem::create_directories(dir);
  train::EarlyStopping early("loss", /*patience=*/1, /*minDelta=*/1e-6);
  train::ModelCheckpoint everyEpoch(dir + "/every.safetensors");
  train::FitOptions options;
  options.epochs = 10;
  options.callbacks = {&everyEpoch, &early};
  rt::Expected<train::History> history = train::fit(**frozen, data, options);
  ASSERT_TRUE(history.ok()) << history.message();
  EXPECT_TRUE(history->stoppedEarly);
  EXPECT_EQ(history->epochs.size(), 3u);
  EXPECT_EQ(early.stoppedEpoch(), 2);
  rt::Expected<int64_t> done = (*frozen)->load(dir + "/every.safetensors");
  ASSERT_TRUE(done.ok()) << done.message();
  EXPECT_EQ(*done, 3);

  // A monitor the logs do not have is an error naming what they have.
  train::EarlyStopping typo("val_acuracy");
  options.callbacks = {&typo};
  options.epochs = 1;
  rt::Expected<train::History> failed = train::fit(**frozen, data, options);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("cannot monitor 'val_acuracy'"), std::string::npos)
      << failed.message();
  std::filesystem::remove_all(dir);
}

TEST(Fit, ModelsThatBreakTheContractAreErrors) {
  train::TrainConfig config = userConfig();
  config.model = train::ModelSpec("vector-loss", {{6}, DType::f32}, {{}, DType::i32},
                                  [](Graph &, const train::ModelInputs &in) {
                                    Tensor logits = dense(in.examples, 4, "out");
                                    return train::ModelOutputs{reduceSum(logits, {1}), {}};
                                  });
  auto bad = train::Trainer::create(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("model 'vector-loss': its loss is [32], it must be a rank-0"),
            std::string::npos)
      << bad.message();
  // A value larger than every device's memory, though fused into a sum it would never be
  // stored: refused when the step is compiled (before, the step ran for minutes), naming it.
  config.model = train::ModelSpec(
      "huge-noise", {{6}, DType::f32}, {{}, DType::i32},
      [](Graph &g, const train::ModelInputs &in) {
        Tensor noise = rngUniform(g, {100000, 1000000}, 1, 0, 1);
        Tensor logits = dense(in.examples, 4, "out") + reduceSum(noise, {0, 1}) * 0.0;
        return train::classification(logits, in.labels);
      });
  auto huge = train::Trainer::create(config);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.message().find("'smelt.rng_uniform' op computes 'tensor<100000x1000000xf32>' "
                                "(372.53 GiB), more than the memory limit of any device (cpu:0"),
            std::string::npos)
      << huge.message();
  config.model = "vgg";
  auto unknown = train::Trainer::create(config);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("unknown model 'vgg'"), std::string::npos)
      << unknown.message();
}

} // namespace
} // namespace smelt::test
