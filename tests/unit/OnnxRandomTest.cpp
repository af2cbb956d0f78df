// ONNX's random ops (frontend/onnx/RandomOps.cpp): one-node models written with ONNX's protobuf
// classes, imported, compiled and run on the CPU. Draws cannot equal another generator's, so
// the checks are the distributions' known moments on 100,000 draws (within 6 standard errors),
// the support, the dtypes, Bernoulli's frequency at each probability, and which draws repeat:
// at inference a compiled model draws the same numbers every run; in importInto's steps each
// step draws afresh; nodes without a seed draw apart, nodes with one seed alike. Dropout
// exported in training mode drops at inference, with its mask.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "frontend/Ops.h"
#include "frontend/onnx/ImportInto.h"
#include "runtime/CpuExecutor.h"

#include <cmath>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;

/// One random node (and, with `twice`, a second one like it): `y` (and `z`), reading graph input
/// `x` of `xShape` and `xType` when the op is a *Like or Bernoulli.
struct RandomModel : TempModelFile {
  RandomModel(const std::string &op, const std::function<void(::onnx::NodeProto &)> &attributes,
              const Ints &xShape = {}, int xType = ::onnx::TensorProto::FLOAT, bool twice = false)
      : TempModelFile("smelt-random") {
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph = startModel(model, 20, "random");
    std::vector<std::string> inputs;
    if (!xShape.empty()) {
      addValueInfo(*graph.mutable_input(), "x", xShape, xType);
      inputs.push_back("x");
    }
    for (const char *out : {"y", "z"}) {
      if (std::string(out) == "z" && !twice)
        break;
      graph.add_output()->set_name(out);
      attributes(*addNode(graph, op, inputs, {out}));
    }
    write(model);
  }
};

/// The model's outputs for input `x` (none when `x` is empty), compiled and run `runs` times:
/// each run's outputs.
std::vector<std::vector<rt::HostTensor>>
runModel(const RandomModel &file, std::vector<rt::HostTensor> inputs, int runs = 1) {
  std::vector<std::vector<rt::HostTensor>> results;
  std::optional<rt::CpuExecutor> cpu = compileOnnxFile(file.path);
  if (!cpu)
    return results;
  for (int r = 0; r < runs; ++r) {
    std::vector<rt::HostTensor> outputs;
    rt::Status s = cpu->run(inputs, outputs);
    EXPECT_TRUE(s.ok()) << s.message();
    results.push_back(std::move(outputs));
  }
  return results;
}

struct Moments {
  double mean = 0, variance = 0, min = INFINITY, max = -INFINITY;
};
Moments momentsOf(const Values &v) {
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= double(v.size());
  for (double x : v)
    m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= double(v.size() - 1);
  return m;
}

const Ints kShape = {200, 500}; // 100,000 draws

TEST(OnnxRandom, RandomUniformAndNormalHaveTheirMoments) {
  RandomModel uniform("RandomUniform", [](::onnx::NodeProto &node) {
    addInts(node, "shape", kShape);
    addFloats(node, "low", {-2}, true);
    addFloats(node, "high", {3}, true);
  });
  auto u = runModel(uniform, {});
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0][0].type().str(), "tensor<200x500xf32>");
  Moments m = momentsOf(u[0][0].toDoubles());
  double n = 100000, variance = 25.0 / 12; // (high - low)^2 / 12
  EXPECT_GE(m.min, -2);
  EXPECT_LT(m.max, 3);
  EXPECT_NEAR(m.mean, 0.5, 6 * std::sqrt(variance / n));
  EXPECT_NEAR(m.variance, variance, 6 * variance * std::sqrt(0.8 / n)); // uniform's kurtosis 1.8

  RandomModel normal("RandomNormal", [](::onnx::NodeProto &node) {
    addInts(node, "shape", kShape);
    addFloats(node, "mean", {1.5}, true);
    addFloats(node, "scale", {0.5}, true);
    addInt(node, "dtype", ::onnx::TensorProto::DOUBLE);
  });
  auto z = runModel(normal, {});
  ASSERT_EQ(z.size(), 1u);
  ASSERT_EQ(z[0][0].type().str(), "tensor<200x500xf64>");
  Values draws = z[0][0].toDoubles();
  m = momentsOf(draws);
  EXPECT_NEAR(m.mean, 1.5, 6 * 0.5 / std::sqrt(n));
  EXPECT_NEAR(m.variance, 0.25, 6 * 0.25 * std::sqrt(2 / n));
  double withinOneScale = 0;
  for (double x : draws)
    withinOneScale += std::abs(x - 1.5) < 0.5;
  // P(|z| < 1) = erf(1 / sqrt 2) for a standard normal.
  double p = std::erf(1 / std::sqrt(2.0));
  EXPECT_NEAR(withinOneScale / n, p, 6 * std::sqrt(p * (1 - p) / n));
}

// The *Like ops draw in their input's shape and, without a dtype, its type.
TEST(OnnxRandom, LikeOpsTakeTheInputsShapeAndType) {
  RandomModel uniform(
      "RandomUniformLike", [](::onnx::NodeProto &) {}, kShape, ::onnx::TensorProto::FLOAT16);
  rt::HostTensor x = randomTensor(kShape, DType::f16);
  auto u = runModel(uniform, {x});
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0][0].type().str(), "tensor<200x500xf16>");
  Moments m = momentsOf(u[0][0].toDoubles());
  EXPECT_GE(m.min, 0);
  EXPECT_LE(m.max, 1); // f16 rounds draws just below 1 up to 1
  EXPECT_NEAR(m.mean, 0.5, 6 * std::sqrt(1.0 / 12 / 1e5) + 1e-3);

  RandomModel normal(
      "RandomNormalLike",
      [](::onnx::NodeProto &node) { addInt(node, "dtype", ::onnx::TensorProto::DOUBLE); }, kShape,
      ::onnx::TensorProto::FLOAT);
  auto z = runModel(normal, {randomTensor(kShape, DType::f32)});
  ASSERT_EQ(z.size(), 1u);
  ASSERT_EQ(z[0][0].type().str(), "tensor<200x500xf64>");
  m = momentsOf(z[0][0].toDoubles());
  EXPECT_NEAR(m.mean, 0, 6 / std::sqrt(1e5));
  EXPECT_NEAR(m.variance, 1, 6 * std::sqrt(2 / 1e5));
}

// Bernoulli: each probability's ones come at its frequency; 0 never and 1 always.
TEST(OnnxRandom, BernoulliHitsAtTheInputsProbability) {
  const Values probabilities = {0, 0.1, 0.5, 0.9, 1};
  const int64_t each = 20000;
  Values p;
  for (double q : probabilities)
    p.insert(p.end(), size_t(each), q);
  RandomModel model(
      "Bernoulli",
      [](::onnx::NodeProto &node) { addInt(node, "dtype", ::onnx::TensorProto::INT32); },
      {int64_t(probabilities.size()), each}, ::onnx::TensorProto::DOUBLE);
  auto y = runModel(model,
                    {rt::HostTensor::fromVector<double>({int64_t(probabilities.size()), each}, p)});
  ASSERT_EQ(y.size(), 1u);
  ASSERT_EQ(y[0][0].type().str(), "tensor<5x20000xi32>");
  Values hits = y[0][0].toDoubles();
  for (size_t i = 0; i < probabilities.size(); ++i) {
    double q = probabilities[i], count = 0;
    for (int64_t k = 0; k < each; ++k) {
      double v = hits[i * size_t(each) + size_t(k)];
      ASSERT_TRUE(v == 0 || v == 1) << v;
      count += v;
    }
    EXPECT_NEAR(count / double(each), q, 6 * std::sqrt(q * (1 - q) / double(each)) + 1e-12)
        << "p = " << q;
  }
}

// At inference a compiled model draws the same numbers every run; two nodes without a seed draw
// different ones, two with the same seed the same.
TEST(OnnxRandom, WhichDrawsRepeat) {
  auto shape = [](::onnx::NodeProto &node) { addInts(node, "shape", {64}); };
  RandomModel unseeded("RandomUniform", shape, {}, ::onnx::TensorProto::FLOAT, true);
  auto runs = runModel(unseeded, {}, 2);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0][0].toDoubles(), runs[1][0].toDoubles()) << "one model, two runs";
  EXPECT_NE(runs[0][0].toDoubles(), runs[0][1].toDoubles()) << "two unseeded nodes";
  RandomModel seeded(
      "RandomNormal",
      [&](::onnx::NodeProto &node) {
        shape(node);
        addFloats(node, "seed", {7}, true);
      },
      {}, ::onnx::TensorProto::FLOAT, true);
  auto both = runModel(seeded, {});
  ASSERT_EQ(both.size(), 1u);
  EXPECT_EQ(both[0][0].toDoubles(), both[0][1].toDoubles()) << "two nodes of seed 7";
}

// In importInto's steps the binding's step offsets the draws: each step draws afresh, and a step
// drawn again draws the same (a masked autoencoder trains on a new mask each step).
TEST(OnnxRandom, EachImportedStepDrawsAfresh) {
  RandomModel model("RandomUniformLike", [](::onnx::NodeProto &) {}, {8, 16});
  mlir::MLIRContext context;
  Graph g(context, "f");
  Tensor x = g.input("x", {8, 16}), step = g.input("step", {}, DType::i64);
  onnx::GraphBinding binding{{{"x", x}}, true, step, 42};
  onnx::ImportedGraph imported = onnx::importInto(g, model.path, binding);
  g.setOutputs({imported.output("y")});
  std::optional<rt::CpuExecutor> cpu = compileForCpu(g.module(), "f");
  ASSERT_TRUE(cpu);
  auto drawsAt = [&](int64_t s) {
    std::vector<rt::HostTensor> outputs;
    std::vector<rt::HostTensor> inputs = {randomTensor({8, 16}, DType::f32),
                                          rt::HostTensor::fromVector<int64_t>({}, {s})};
    rt::Status status = cpu->run(inputs, outputs);
    EXPECT_TRUE(status.ok()) << status.message();
    return outputs.empty() ? Values{} : outputs[0].toDoubles();
  };
  Values first = drawsAt(0), second = drawsAt(1);
  ASSERT_EQ(first.size(), 128u);
  EXPECT_NE(first, second);
  EXPECT_EQ(first, drawsAt(0));
}

// A Dropout exported in training mode (training_mode true) drops at inference too, as the graph
// says: the mask keeps about 1 - ratio of the elements, the output is the input over 1 - ratio
// where it keeps and 0 elsewhere, and the same mask is drawn every run.
TEST(OnnxRandom, TrainingModeDropoutDropsAtInference) {
  TempModelFile file("smelt-dropout");
  ::onnx::ModelProto model;
  ::onnx::GraphProto &graph = startModel(model, 13, "dropout");
  addValueInfo(*graph.mutable_input(), "x", kShape, ::onnx::TensorProto::FLOAT);
  addInitializer(graph, "ratio", {}, {0.3}, ::onnx::TensorProto::FLOAT);
  ::onnx::TensorProto *mode = graph.add_initializer();
  mode->set_name("training_mode");
  mode->set_data_type(::onnx::TensorProto::BOOL);
  mode->add_int32_data(1);
  graph.add_output()->set_name("y");
  graph.add_output()->set_name("mask");
  addNode(graph, "Dropout", {"x", "ratio", "training_mode"}, {"y", "mask"});
  file.write(model);
  std::optional<rt::CpuExecutor> cpu = compileOnnxFile(file.path);
  ASSERT_TRUE(cpu);
  rt::HostTensor x = randomTensor(kShape, DType::f32);
  std::vector<rt::HostTensor> inputs = {x}, first, second;
  ASSERT_TRUE(cpu->run(inputs, first).ok());
  ASSERT_TRUE(cpu->run(inputs, second).ok());
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(first[1].type().dtype, DType::i1);
  Values in = x.toDoubles(), y = first[0].toDoubles(), mask = first[1].toDoubles();
  double kept = 0;
  for (size_t k = 0; k < y.size(); ++k) {
    kept += mask[k];
    ASSERT_NEAR(y[k], mask[k] != 0 ? in[k] / 0.7 : 0.0, 1e-6 * std::abs(in[k]) + 1e-12) << k;
  }
  EXPECT_NEAR(kept / 1e5, 0.7, 6 * std::sqrt(0.7 * 0.3 / 1e5));
  EXPECT_EQ(mask, second[1].toDoubles());
}

TEST(OnnxRandom, RefusesWhatItCannotDraw) {
  RandomModel integers("RandomUniform",
                       [](::onnx::NodeProto &node) {
                         addInts(node, "shape", {4});
                         addInt(node, "dtype", ::onnx::TensorProto::INT32);
                       },
                       {});
  EXPECT_NE(importErrorOf(integers.path).find("random draws are float16, bfloat16"),
            std::string::npos);
}

} // namespace
} // namespace smelt::test
