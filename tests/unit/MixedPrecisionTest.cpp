// Mixed precision end to end on the CPU: the bf16 MLP forward against f32 on real images,
// one epoch of Fashion-MNIST under each policy against f32, and dynamic loss scaling that
// skips (and counts) steps whose f16 gradients overflow.
#include "TestUtil.h"

#include "frontend/Models.h"
#include "data/Mnist.h"
#include "train/Trainer.h"

#include <cmath>
#include <cstring>

namespace smelt::test {
namespace {

TEST(MixedPrecision, Bf16MlpForwardIsWithinOnePercentOfF32) {
  rt::Expected<data::MnistSplit> data = data::loadMnist("/usr/share/datasets/fashion-mnist", "t10k");
  ASSERT_TRUE(data.ok()) << data.message();
  const int64_t batch = 256;
  uint64_t seed = rngSeed() % 100000;
  SCOPED_TRACE("parameter seed " + std::to_string(seed));
  mlir::MLIRContext ctx;
  auto build = [&](Graph &g, PrecisionPolicy policy) {
    Tensor logits = mlpClassifier(g, g.input("images", {batch, 784}), {784, 512, 512, 10});
    g.applyPrecision(policy);
    g.setOutputs({logits});
    g.buildInitializer();
  };
  Graph f32(ctx, "forward", seed), bf16(ctx, "forward", seed);
  build(f32, PrecisionPolicy::f32);
  build(bf16, PrecisionPolicy::mixed_bf16);
  std::string ir;
  llvm::raw_string_ostream os(ir);
  bf16.function().print(os);
  EXPECT_NE(ir.find("tensor<256x784xbf16>, tensor<784x512xbf16>"), std::string::npos) << ir;

  std::vector<rt::HostTensor> inputs = {rt::HostTensor::zeros({rt::DType::f32, {batch, 784}})};
  int64_t start = int64_t(rngSeed() % uint64_t(10000 - batch));
  std::memcpy(inputs[0].raw(), data->images.data<float>() + start * 784, inputs[0].byteSize());
  for (rt::HostTensor &p : run(f32, {}, "forward_init"))
    inputs.push_back(std::move(p));
  std::vector<double> want = run(f32, inputs)[0].toDoubles();
  std::vector<double> got = run(bf16, inputs)[0].toDoubles();
  double error = relError(got, want);
  EXPECT_LE(error, 1e-2);
  EXPECT_GT(error, 1e-6) << "bf16 arithmetic should differ from f32 at all";
}

/// Test accuracy after one epoch of the MLP under `policy`, with a fixed seed so the three
/// policies start from the same weights and see the same batches.
double oneEpochAccuracy(PrecisionPolicy policy) {
  train::TrainConfig config;
  config.precision = policy;
  auto trainer = train::Trainer::create(config);
  EXPECT_TRUE(trainer.ok()) << trainer.message();
  rt::Expected<train::Metrics> epoch = (*trainer)->trainEpoch(fashion("train"), 0);
  EXPECT_TRUE(epoch.ok()) << epoch.message();
  rt::Expected<train::Metrics> test = (*trainer)->evaluate(fashion("t10k"));
  EXPECT_TRUE(test.ok()) << test.message();
  return test->accuracy();
}

TEST(MixedPrecision, EachPolicyTrainsWithinOnePointOfF32) {
  double f32 = oneEpochAccuracy(PrecisionPolicy::f32);
  double bf16 = oneEpochAccuracy(PrecisionPolicy::mixed_bf16);
  double f16 = oneEpochAccuracy(PrecisionPolicy::mixed_f16);
  std::printf("test accuracy after one epoch: f32 %.4f, mixed_bf16 %.4f, mixed_f16 %.4f\n", f32,
              bf16, f16);
  EXPECT_GE(f32, 0.80);
  EXPECT_NEAR(bf16, f32, 0.01);
  EXPECT_NEAR(f16, f32, 0.01);
}

TEST(MixedPrecision, OverflowingF16StepsAreSkippedAndCounted) {
  train::TrainConfig config;
  config.seed = rngSeed() % 1000;
  SCOPED_TRACE("seed " + std::to_string(config.seed));
  config.batch = 64;
  config.precision = PrecisionPolicy::mixed_f16;
  config.lossScale.initialScale = std::ldexp(1.0, 40); // f16 tops out at 65504: overflows
  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  std::vector<rt::HostTensor> initial = (*trainer)->parameters();

  data::Dataset data = fashion("train", 64 * 60);
  int64_t skippedAfterFirst = -1;
  rt::Expected<train::Metrics> epoch = (*trainer)->trainEpoch(
      data, 0, [&](int64_t step, int64_t, const train::Metrics &m) {
        if (step == 1)
          skippedAfterFirst = m.skippedSteps;
      });
  ASSERT_TRUE(epoch.ok()) << epoch.message();
  EXPECT_EQ(skippedAfterFirst, 1) << "the first step overflows";
  // Every skip halves the scale; no growth happens within 60 steps.
  EXPECT_GE(epoch->skippedSteps, 10);
  EXPECT_LT(epoch->skippedSteps, 60) << "the scale must come down far enough to train";
  EXPECT_EQ(epoch->lossScale, std::ldexp(1.0, 40 - int(epoch->skippedSteps)));
  EXPECT_TRUE(std::isfinite(epoch->loss));
  // Steps after the scale recovered did update the parameters.
  bool changed = false;
  for (size_t i = 0; i < initial.size(); ++i)
    changed |= initial[i].toDoubles() != (*trainer)->parameters()[i].toDoubles();
  EXPECT_TRUE(changed);
}

TEST(MixedPrecision, SkippedStepLeavesParametersAndStateUnchanged) {
  train::TrainConfig config;
  config.batch = 32;
  config.precision = PrecisionPolicy::mixed_f16;
  config.lossScale.initialScale = std::ldexp(1.0, 100);
  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  std::vector<rt::HostTensor> before = (*trainer)->parameters();
  rt::Expected<train::Metrics> epoch = (*trainer)->trainEpoch(fashion("train", 32), 0);
  ASSERT_TRUE(epoch.ok()) << epoch.message();
  EXPECT_EQ(epoch->skippedSteps, 1);
  EXPECT_EQ(epoch->lossScale, std::ldexp(1.0, 99));
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(before[i].toDoubles(), (*trainer)->parameters()[i].toDoubles()) << "parameter " << i;
}

} // namespace
} // namespace smelt::test
