// The GPT: its training step's gradients against float64 central differences, attention's
// gradients, and a tiny one trained with fit() to reverse sequences.
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "frontend/Gpt.h"
#include "runtime/CpuExecutor.h"
#include "train/BuiltinModels.h"
#include "train/Fit.h"

#include <random>

namespace smelt::test {
namespace {

// Every parameter's gradient of the GPT's next-token loss, through autodiff, against central
// differences, all in f64, on random tokens and random parameters (not the initial zeros and
// ones of biases and norms).
TEST(Gpt, LossGradientsMatchFiniteDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  GptConfig config{.vocab = 5, .context = 4, .width = 8, .layers = 1, .heads = 2, .dropout = 0,
                   .dtype = DType::f64};
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor tokens = g.input("tokens", {2, 4}, DType::i32);
  Tensor labels = g.input("labels", {2, 4}, DType::i32);
  Tensor loss = sparseSoftmaxCrossEntropy(gptLogits(tokens, config, false), labels);
  std::vector<Tensor> params = g.parameterTensors();
  std::optional<rt::CpuExecutor> cpu = compileLossAndGradients(g, loss, params);
  ASSERT_TRUE(cpu);

  std::mt19937_64 rng(rngSeed());
  std::vector<double> ids(8), next(8);
  for (size_t i = 0; i < 8; ++i)
    ids[i] = double(rng() % 5), next[i] = double(rng() % 5);
  std::vector<rt::HostTensor> args = {rt::HostTensor::fromDoubles({rt::DType::i32, {2, 4}}, ids),
                                      rt::HostTensor::fromDoubles({rt::DType::i32, {2, 4}}, next)};
  for (const Tensor &p : params)
    args.push_back(randomTensor(p.shape(), DType::f64, [] { return draw(-0.7, 0.7, 0.05); }));
  std::vector<size_t> wrt;
  std::vector<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    wrt.push_back(2 + i);
    names.push_back(g.parameters()[i].name);
  }
  expectGradientsMatchDifferences(*cpu, args, wrt, 1e-6, names);
}

// Scaled dot-product attention against loops in float64, with and without the causal mask,
// over [2, 3] leading dimensions; and its gradients against central differences.
TEST(Attention, MatchesFloat64AndFiniteDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t B = 6, T = 5, D = 4, E = 3;
  for (bool causal : {false, true}) {
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    Tensor q = g.input("q", {2, 3, T, D}, DType::f64), k = g.input("k", {2, 3, T, D}, DType::f64);
    Tensor v = g.input("v", {2, 3, T, E}, DType::f64);
    AttentionOptions options;
    options.causal = causal;
    Tensor out = scaledDotProductAttention(q, k, v, options);
    Tensor r = g.input("r", out.shape(), DType::f64);
    // `out` after what expectGradientsMatchDifferences reads.
    std::optional<rt::CpuExecutor> cpu =
        compileLossAndGradients(g, reduceSum(mul(out, r), {0, 1, 2, 3}), {q, k, v}, {out});
    ASSERT_TRUE(cpu);
    std::vector<rt::HostTensor> args = {randomTensor({2, 3, T, D}, DType::f64),
                                        randomTensor({2, 3, T, D}, DType::f64),
                                        randomTensor({2, 3, T, E}, DType::f64),
                                        randomTensor({2, 3, T, E}, DType::f64)};
    std::vector<rt::HostTensor> result;
    ASSERT_TRUE(cpu->run(args, result).ok());
    std::vector<double> qs = args[0].toDoubles(), ks = args[1].toDoubles(),
                        vs = args[2].toDoubles(), want;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> p(size_t(T), 0.0);
        double top = -1e300, sum = 0;
        int64_t seen = causal ? i + 1 : T;
        for (int64_t j = 0; j < seen; ++j) {
          for (int64_t d = 0; d < D; ++d)
            p[size_t(j)] += qs[size_t((b * T + i) * D + d)] * ks[size_t((b * T + j) * D + d)];
          p[size_t(j)] /= std::sqrt(double(D));
          top = std::max(top, p[size_t(j)]);
        }
        for (int64_t j = 0; j < seen; ++j)
          sum += p[size_t(j)] = std::exp(p[size_t(j)] - top);
        for (int64_t e = 0; e < E; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < seen; ++j)
            acc += p[size_t(j)] / sum * vs[size_t((b * T + j) * E + e)];
          want.push_back(acc);
        }
      }
    EXPECT_LE(relError(result.back().toDoubles(), want), 1e-13) << (causal ? "causal" : "full");
    expectGradientsMatchDifferences(*cpu, args, {0, 1, 2}, 1e-7,
                                    {causal ? "q (causal)" : "q", "k", "v"});
  }
}

// The layer: parameters by name, the width split over heads, and the shape errors.
TEST(Attention, MultiHeadLayerMakesItsParametersAndChecksShapes) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2, 5, 8});
  Tensor y = multiHeadAttention(x, 2, "mha", {true});
  EXPECT_EQ(y.shape(), x.shape());
  std::vector<std::string> names;
  for (const ParameterSpec &p : g.parameters())
    names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"mha/query/kernel", "mha/query/bias",
                                             "mha/key/kernel", "mha/key/bias",
                                             "mha/value/kernel", "mha/value/bias",
                                             "mha/output/kernel", "mha/output/bias"}));
  EXPECT_THROW(multiHeadAttention(x, 3, "odd"), BuildError);
  EXPECT_THROW(multiHeadAttention(g.input("flat", {2, 8}), 2, "flat"), BuildError);
  EXPECT_EQ(g.parameters().size(), 8u) << "a failed layer leaves no parameters";
}

/// Sequences a1..an SEP an..a1 of digits 0-9 (SEP = 10) as next-token windows: example the
/// first 2n tokens, labels the 2n after the first.
data::Dataset reversals(int64_t count, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> examples, labels;
  for (int64_t s = 0; s < count; ++s) {
    std::vector<double> seq;
    for (int64_t i = 0; i < n; ++i)
      seq.push_back(double(rng() % 10));
    seq.push_back(10);
    for (int64_t i = n - 1; i >= 0; --i)
      seq.push_back(seq[size_t(i)]);
    examples.insert(examples.end(), seq.begin(), seq.end() - 1);
    labels.insert(labels.end(), seq.begin() + 1, seq.end());
  }
  return data::Dataset(rt::HostTensor::fromDoubles({rt::DType::i32, {count, 2 * n}}, examples),
                       rt::HostTensor::fromDoubles({rt::DType::i32, {count, 2 * n}}, labels));
}

// A user's model through fit(): the GPT's logits, with the loss and token accuracy taken over
// the predictable half only (the reversed digits; the first half is random).
TEST(Gpt, TinyGptLearnsToReverseSequences) {
  const int64_t n = 6;
  GptConfig gpt{.vocab = 11, .context = 2 * n, .width = 64, .layers = 2, .heads = 4,
                .dropout = 0};
  train::ModelSpec model(
      "reverser", {{2 * n}, DType::i32}, {{2 * n}, DType::i32},
      [&](Graph &, const train::ModelInputs &in) {
        Tensor logits = gptLogits(in.examples, gpt, in.training, in.seed, in.step);
        int64_t batch = logits.dim(0);
        Tensor answer = slice(logits, {0, n, 0}, {batch, 2 * n, gpt.vocab});
        Tensor expected = slice(in.labels, {0, n}, {batch, 2 * n});
        return train::classification(answer, expected);
      });
  train::TrainConfig config;
  config.model = model;
  config.batch = 64;
  config.optimizer.kind = OptimizerKind::AdamW;
  config.optimizer.learningRate = 3e-3;
  config.optimizer.schedule.kind = LearningRateSchedule::Kind::warmupCosine;
  config.optimizer.schedule.warmupSteps = 30;
  config.optimizer.schedule.totalSteps = 300;
  config.optimizer.clipGlobalNorm = 1.0;
  config.seed = rngSeed();
  // It failed once in about 14 runs (val_accuracy under 0.99): the seed replays a failure.
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  data::Dataset data = reversals(64 * 100, n, rngSeed()), heldOut = reversals(1000, n, rngSeed() + 1);
  train::FitOptions options;
  options.epochs = 3;
  options.validation = &heldOut;
  options.out = &std::cout;
  rt::Expected<train::History> history = train::fit(**trainer, data, options);
  ASSERT_TRUE(history.ok()) << history.message();
  EXPECT_GE(history->epochs.back().value("val_accuracy"), 0.99);
}

} // namespace
} // namespace smelt::test
