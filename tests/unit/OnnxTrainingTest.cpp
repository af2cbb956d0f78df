// Training an imported ONNX model (onnx::importInto, issue 33): BatchNormalization in training
// mode against float64 loops and central differences, its running statistics as variables that
// the training step assigns and evaluation reads, Dropout's masks, the Trainer fine-tuning from
// the file's weights, and the binding's mistakes. The models are written here with ONNX's
// protobuf classes, as an exporter writes them.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "frontend/onnx/ImportInto.h"
#include "train/Trainer.h"

#include "onnx/onnx_pb.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace smelt::test {
namespace {

const int64_t C = 3, H = 4, W = 2, K = 5; // channels, height, width, classes

void setAttribute(::onnx::NodeProto &node, const std::string &name, double value) {
  ::onnx::AttributeProto *a = node.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(float(value));
}

/// The initial weights of the model, fresh random values each run.
struct Weights {
  std::vector<double> scale, bias, mean, variance, fcWeight, fcBias;
  /// A 1x1 convolution's [C, C] filter before the BatchNormalization, or none when empty.
  std::vector<double> conv;
  Weights()
      : scale(positive(C)), bias(values(C)), mean(values(C)), variance(positive(C)),
        fcWeight(values(K * C)), fcBias(values(K)) {}
  static std::vector<double> values(int64_t n) {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(double(float(draw(-1, 1))));
    return v;
  }
  static std::vector<double> positive(int64_t n) {
    std::vector<double> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(double(float(draw(0.5, 2))));
    return v;
  }
};

/// x [batch, C, H, W] [-> Conv 1x1] -> BatchNormalization -> Relu [-> Dropout] -> GlobalAveragePool
/// -> Flatten -> Gemm (a [K, C] weight, transB as PyTorch's Linear exports) -> logits [batch, K],
/// written to a file of its own; removed with the object.
struct BatchNormModel {
  std::string path;
  BatchNormModel(const Weights &w, int elemType, double momentum, double epsilon,
                 double dropout = 0) {
    path =
        (std::filesystem::temp_directory_path() / ("smelt-onnx-bn-" + std::to_string(::getpid()) +
                                                   "-" + std::to_string(counter()++) + ".onnx"))
            .string();
    ::onnx::ModelProto model;
    model.set_ir_version(8);
    ::onnx::OperatorSetIdProto *opset = model.add_opset_import();
    opset->set_domain("");
    opset->set_version(15);
    ::onnx::GraphProto &graph = *model.mutable_graph();
    graph.set_name("bn_classifier");
    addValueInfo(*graph.mutable_input(), "x", {-1, C, H, W}, elemType);
    addValueInfo(*graph.mutable_output(), "logits", {-1, K}, elemType);
    std::string normalized = "x";
    if (!w.conv.empty()) {
      // Smelt's convolutions are NHWC: the import puts the BatchNormalization on the NCHW
      // transpose of the convolution's result.
      addInitializer(graph, "conv.weight", {C, C, 1, 1}, w.conv, elemType);
      addNode(graph, "Conv", {"x", "conv.weight"}, {"z"});
      normalized = "z";
    }
    addInitializer(graph, "bn.scale", {C}, w.scale, elemType);
    addInitializer(graph, "bn.bias", {C}, w.bias, elemType);
    addInitializer(graph, "bn.running_mean", {C}, w.mean, elemType);
    addInitializer(graph, "bn.running_var", {C}, w.variance, elemType);
    addInitializer(graph, "fc.weight", {K, C}, w.fcWeight, elemType);
    addInitializer(graph, "fc.bias", {K}, w.fcBias, elemType);
    ::onnx::NodeProto *bn =
        addNode(graph, "BatchNormalization",
                {normalized, "bn.scale", "bn.bias", "bn.running_mean", "bn.running_var"}, {"y"});
    setAttribute(*bn, "momentum", momentum);
    setAttribute(*bn, "epsilon", epsilon);
    addNode(graph, "Relu", {"y"}, {"r"});
    std::string pooledInput = "r";
    if (dropout > 0) {
      addInitializer(graph, "ratio", {}, {dropout}, elemType);
      addNode(graph, "Dropout", {"r", "ratio"}, {"dropped"});
      pooledInput = "dropped";
    }
    addNode(graph, "GlobalAveragePool", {pooledInput}, {"pooled"});
    addNode(graph, "Flatten", {"pooled"}, {"flat"});
    ::onnx::NodeProto *gemm = addNode(graph, "Gemm", {"flat", "fc.weight", "fc.bias"}, {"logits"});
    ::onnx::AttributeProto *transB = gemm->add_attribute();
    transB->set_name("transB");
    transB->set_type(::onnx::AttributeProto::INT);
    transB->set_i(1);
    std::ofstream(path, std::ios::binary) << model.SerializeAsString();
  }
  ~BatchNormModel() { std::filesystem::remove(path); }
  static int &counter() {
    static int n = 0;
    return n;
  }
};

/// What the BatchNormalization reads: x [n, C, H, W], through the 1x1 convolution if any.
std::vector<double> normalizedInput(const std::vector<double> &x, int64_t n, const Weights &w) {
  if (w.conv.empty())
    return x;
  std::vector<double> z(x.size(), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t out = 0; out < C; ++out)
      for (int64_t in = 0; in < C; ++in)
        for (int64_t p = 0; p < H * W; ++p)
          z[size_t((i * C + out) * H * W + p)] +=
              w.conv[size_t(out * C + in)] * x[size_t((i * C + in) * H * W + p)];
  return z;
}

/// The model in float64: logits [n, K] of the BatchNormalization's input x [n, C, H, W]
/// normalized with `mean` and `variance`.
std::vector<double> referenceLogits(const std::vector<double> &x, int64_t n, const Weights &w,
                                    const std::vector<double> &mean,
                                    const std::vector<double> &variance, double epsilon) {
  std::vector<double> logits(size_t(n * K));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> pooled(C, 0.0);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p) {
        double v = x[size_t((i * C + c) * H * W + p)];
        double y =
            w.scale[size_t(c)] * (v - mean[size_t(c)]) / std::sqrt(variance[size_t(c)] + epsilon) +
            w.bias[size_t(c)];
        pooled[size_t(c)] += std::max(y, 0.0) / double(H * W);
      }
    for (int64_t k = 0; k < K; ++k) {
      double sum = w.fcBias[size_t(k)];
      for (int64_t c = 0; c < C; ++c)
        sum += pooled[size_t(c)] * w.fcWeight[size_t(k * C + c)];
      logits[size_t(i * K + k)] = sum;
    }
  }
  return logits;
}

/// Per-channel mean and population variance of x [n, C, H, W].
void batchMoments(const std::vector<double> &x, int64_t n, std::vector<double> &mean,
                  std::vector<double> &variance) {
  mean.assign(C, 0.0);
  variance.assign(C, 0.0);
  double count = double(n * H * W);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p)
        mean[size_t(c)] += x[size_t((i * C + c) * H * W + p)] / count;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p) {
        double d = x[size_t((i * C + c) * H * W + p)] - mean[size_t(c)];
        variance[size_t(c)] += d * d / count;
      }
}

/// Examples with a mean far from zero against their spread, as after a ReLU.
rt::HostTensor shiftedExamples(int64_t n, DType dtype) {
  return randomTensor({n, C, H, W}, dtype, [] { return 4 + draw(-2, 2); });
}

// Directly on the input (channels first), and after a convolution (the import normalizes the
// convolution's channels-last result and transposes back).
TEST(OnnxTraining, BatchNormTrainsAgainstFloat64AndFiniteDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t B = 4;
  // ONNX's float attributes are f32: the reference uses the values the file holds.
  const double momentum = double(0.8f), epsilon = double(1e-3f);
  for (bool afterConv : {false, true}) {
    SCOPED_TRACE(afterConv ? "after a convolution" : "on the input");
    Weights w;
    if (afterConv)
      w.conv = Weights::values(C * C);
    BatchNormModel file(w, ::onnx::TensorProto::DOUBLE, momentum, epsilon);
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    Tensor x = g.input("x", {B, C, H, W}, DType::f64), r = g.input("r", {B, K}, DType::f64);
    std::map<std::string, rt::HostTensor> values;
    onnx::ImportOptions options;
    options.parameterValues = &values;
    onnx::ImportedGraph model =
        onnx::importInto(g, file.path, {{{"x", x}}, /*training=*/true}, options);
    Tensor logits = model.output("logits");
    // Arguments: x, r, then the initializers in the file's order.
    std::vector<Tensor> params = g.parameterTensors(), variables = g.variableTensors();
    ASSERT_EQ(params.size(), afterConv ? 5u : 4u);
    ASSERT_EQ(variables.size(), 2u);
    std::vector<Tensor> wrt = {x};
    wrt.insert(wrt.end(), params.begin(), params.end());
    std::optional<rt::CpuExecutor> cpu = compileLossAndGradients(
        g, reduceSum(mul(logits, r), {0, 1}), wrt,
        {logits, g.assignedValue(variables[0]), g.assignedValue(variables[1])});
    ASSERT_TRUE(cpu);
    std::vector<rt::HostTensor> args = {shiftedExamples(B, DType::f64),
                                        randomTensor({B, K}, DType::f64)};
    std::vector<std::string> names = {"bn.scale",       "bn.bias",   "bn.running_mean",
                                      "bn.running_var", "fc.weight", "fc.bias"};
    if (afterConv)
      names.insert(names.begin(), "conv.weight");
    for (const std::string &name : names)
      args.push_back(values.at(name));
    std::vector<rt::HostTensor> result;
    ASSERT_TRUE(cpu->run(args, result).ok());
    size_t first = 1 + wrt.size(); // after the loss and the gradients
    ASSERT_EQ(result.size(), first + 3);

    std::vector<double> z = normalizedInput(args[0].toDoubles(), B, w), mean, variance;
    batchMoments(z, B, mean, variance);
    EXPECT_LT(
        relError(result[first].toDoubles(), referenceLogits(z, B, w, mean, variance, epsilon)),
        1e-12);
    std::vector<double> wantMean(C), wantVariance(C);
    for (size_t c = 0; c < size_t(C); ++c) {
      wantMean[c] = momentum * w.mean[c] + (1 - momentum) * mean[c];
      wantVariance[c] = momentum * w.variance[c] + (1 - momentum) * variance[c];
    }
    EXPECT_LT(relError(result[first + 1].toDoubles(), wantMean), 1e-12);
    EXPECT_LT(relError(result[first + 2].toDoubles(), wantVariance), 1e-12);
    // The gradients of x and of every parameter (the statistics' variables have none).
    std::vector<size_t> checked = {0};
    std::vector<std::string> checkedNames = {"x"};
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i].find("running") == std::string::npos) {
        checked.push_back(2 + i);
        checkedNames.push_back(names[i]);
      }
    expectGradientsMatchDifferences(*cpu, args, checked, 1e-6, checkedNames);
  }
}

TEST(OnnxTraining, InferenceModeNormalizesWithTheRunningStatisticsAndAssignsNothing) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t B = 3;
  Weights w;
  BatchNormModel file(w, ::onnx::TensorProto::DOUBLE, 0.9, 1e-5);
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {B, C, H, W}, DType::f64);
  std::map<std::string, rt::HostTensor> values;
  onnx::ImportOptions options;
  options.parameterValues = &values;
  onnx::ImportedGraph model = onnx::importInto(g, file.path, {{{"x", x}}}, options);
  for (Tensor v : g.variableTensors())
    EXPECT_EQ(g.assignedValue(v).value(), v.value());
  g.setOutputs({model.output("logits")});
  std::vector<rt::HostTensor> args = {shiftedExamples(B, DType::f64)};
  for (const char *name :
       {"bn.scale", "bn.bias", "bn.running_mean", "bn.running_var", "fc.weight", "fc.bias"})
    args.push_back(values.at(name));
  std::vector<rt::HostTensor> out = run(g, args);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LT(relError(out[0].toDoubles(),
                     referenceLogits(args[0].toDoubles(), B, w, w.mean, w.variance, double(1e-5f))),
            1e-12);
}

TEST(OnnxTraining, DropoutDrawsMasksWhileTrainingOnly) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  // Dropout alone: x -> Dropout(ratio 0.25) -> y.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("smelt-onnx-dropout-" + std::to_string(::getpid()) + ".onnx"))
                         .string();
  ::onnx::ModelProto proto;
  proto.set_ir_version(8);
  proto.add_opset_import()->set_version(15);
  ::onnx::GraphProto &graph = *proto.mutable_graph();
  addValueInfo(*graph.mutable_input(), "x", {-1, 1024}, ::onnx::TensorProto::FLOAT);
  addValueInfo(*graph.mutable_output(), "y", {-1, 1024}, ::onnx::TensorProto::FLOAT);
  addInitializer(graph, "ratio", {}, {0.25}, ::onnx::TensorProto::FLOAT);
  addNode(graph, "Dropout", {"x", "ratio"}, {"y"});
  std::ofstream(path, std::ios::binary) << proto.SerializeAsString();
  rt::HostTensor xs = randomTensor({4, 1024}, DType::f32);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    mlir::MLIRContext ctx;
    Graph g(ctx, "f");
    Tensor x = g.input("x", {4, 1024}), step = g.input("step", {}, DType::i64);
    onnx::ImportedGraph model = onnx::importInto(g, path, {{{"x", x}}, training, step, rngSeed()});
    g.setOutputs({model.output("y")});
    std::vector<rt::HostTensor> args = {xs, rt::HostTensor::fromDoubles({rt::DType::i64, {}}, {3})};
    // The unused ratio parameter is an argument too (it is read at import time).
    args.push_back(rt::HostTensor::fromDoubles({rt::DType::f32, {}}, {0.25}));
    std::vector<rt::HostTensor> out = run(g, args);
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> in = xs.toDoubles(), got = out[0].toDoubles();
    int64_t dropped = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      if (got[i] == 0) {
        ++dropped;
        continue;
      }
      EXPECT_NEAR(got[i], training ? in[i] / 0.75 : in[i], 1e-6 * std::abs(in[i])) << i;
    }
    if (training) // 4096 draws: 1024 expected, 5 standard deviations is +-139
      EXPECT_NEAR(double(dropped), 1024, 139);
    else
      EXPECT_EQ(dropped, 0);
  }
  std::filesystem::remove(path);
}

// Fine-tuning through the Trainer: the run starts from the file's weights, one training step
// over the whole dataset moves the running statistics to momentum * file's + (1 - momentum) *
// the batch's (the BatchNormalization reads the examples, so whatever the optimizer did), and
// evaluation normalizes with them (no dropout).
TEST(OnnxTraining, TrainerFineTunesFromTheFileAndUpdatesTheRunningStatistics) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const int64_t N = 16;
  const double momentum = double(0.7f), epsilon = double(1e-5f);
  Weights w;
  BatchNormModel file(w, ::onnx::TensorProto::FLOAT, momentum, epsilon, /*dropout=*/0.5);
  auto values = std::make_shared<std::map<std::string, rt::HostTensor>>();
  train::TrainConfig config;
  std::string path = file.path;
  config.model = train::ModelSpec(
      "imported", {{C, H, W}, DType::f32}, {{}, DType::i32},
      [path, values](Graph &g, const train::ModelInputs &in) {
        onnx::ImportOptions options;
        options.parameterValues = values.get();
        onnx::GraphBinding binding{{{"x", in.examples}}, in.training, in.step, in.seed};
        return train::classification(onnx::importInto(g, path, binding, options).output("logits"),
                                     in.labels);
      });
  config.batch = N;
  config.evalBatch = N;
  config.seed = rngSeed();
  rt::HostTensor examples = shiftedExamples(N, DType::f32);
  std::vector<double> labels;
  for (int64_t i = 0; i < N; ++i)
    labels.push_back(double(i % K));
  data::Dataset data(examples, rt::HostTensor::fromDoubles({rt::DType::i32, {N}}, labels));

  auto trainer = train::Trainer::create(config);
  ASSERT_TRUE(trainer.ok()) << trainer.message();
  EXPECT_EQ((*trainer)->variableNames(),
            (std::vector<std::string>{"bn.running_mean", "bn.running_var"}));
  ASSERT_TRUE((*trainer)->initParameters(*values, path).ok());
  EXPECT_EQ((*trainer)->parameters()[0].toDoubles(), w.scale);
  EXPECT_EQ((*trainer)->variables()[1].toDoubles(), w.variance);
  ASSERT_TRUE((*trainer)->trainEpoch(data, 0).ok());

  std::vector<double> xs = examples.toDoubles(), mean, variance;
  batchMoments(xs, N, mean, variance);
  std::vector<double> gotMean = (*trainer)->variables()[0].toDoubles(),
                      gotVariance = (*trainer)->variables()[1].toDoubles();
  for (size_t c = 0; c < size_t(C); ++c) {
    EXPECT_NEAR(gotMean[c], momentum * w.mean[c] + (1 - momentum) * mean[c], 1e-5) << c;
    EXPECT_NEAR(gotVariance[c], momentum * w.variance[c] + (1 - momentum) * variance[c], 1e-5) << c;
  }
  // Evaluation in float64 with the trained parameters and the new statistics.
  const std::vector<rt::HostTensor> &p = (*trainer)->parameters();
  ASSERT_EQ(p.size(), 5u); // the four weights and Dropout's ratio
  Weights trained = w;
  trained.scale = p[0].toDoubles(), trained.bias = p[1].toDoubles();
  trained.fcWeight = p[2].toDoubles(), trained.fcBias = p[3].toDoubles();
  EXPECT_NE(trained.fcWeight, w.fcWeight) << "the step trained the imported weights";
  std::vector<double> logits = referenceLogits(xs, N, trained, gotMean, gotVariance, epsilon);
  double loss = 0;
  for (int64_t i = 0; i < N; ++i) {
    double top = *std::max_element(&logits[size_t(i * K)], &logits[size_t(i * K + K)]), sum = 0;
    for (int64_t k = 0; k < K; ++k)
      sum += std::exp(logits[size_t(i * K + k)] - top);
    loss += (top + std::log(sum) - logits[size_t(i * K) + size_t(labels[size_t(i)])]) / double(N);
  }
  rt::Expected<train::Metrics> evaluated = (*trainer)->evaluate(data);
  ASSERT_TRUE(evaluated.ok()) << evaluated.message();
  EXPECT_NEAR(evaluated->loss, loss, 1e-5 * std::max(1.0, loss));

  std::map<std::string, rt::HostTensor> wrong = *values;
  wrong.erase("fc.bias");
  rt::Status missing = (*trainer)->initParameters(wrong, "weights");
  EXPECT_NE(missing.message().find("weights: parameter 'fc.bias' of model 'imported' is missing"),
            std::string::npos)
      << missing.message();
}

TEST(OnnxTraining, BindingMistakesAreBuildErrorsThatLeaveTheGraphAsItWas) {
  Weights w;
  BatchNormModel file(w, ::onnx::TensorProto::FLOAT, 0.9, 1e-5);
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {2, C, H, W}), wide = g.input("wide", {2, C + 1, H, W});
  Tensor ints = g.input("ints", {2, C, H, W}, DType::i32);
  expectBuildError([&] { onnx::importInto(g, file.path, {}); },
                   "input 'x' of the model is not bound (the binding names none)");
  expectBuildError(
      [&] {
        onnx::importInto(g, file.path, {{{"x", wide}}});
      },
      "input 'x' is [batchx3x4x2] in the model, the bound tensor [2, 4, 4, 2]");
  expectBuildError(
      [&] {
        onnx::importInto(g, file.path, {{{"x", ints}}});
      },
      "input 'x' is f32 in the model, the bound tensor i32");
  expectBuildError(
      [&] {
        onnx::importInto(g, file.path, {{{"x", x}, {"y", x}}});
      },
      "the binding names 'y', which is not an input of the model's graph");
  expectBuildError(
      [&] {
        onnx::importInto(g, "/nonexistent/model.onnx", {{{"x", x}}});
      },
      "/nonexistent/model.onnx: cannot read the file");
  EXPECT_TRUE(g.parameters().empty()) << "a failed import leaves no parameter or variable";
  onnx::ImportedGraph model = onnx::importInto(g, file.path, {{{"x", x}}});
  expectBuildError([&] { model.output("probabilities"); },
                   "the imported model has no output 'probabilities' (its outputs: 'logits')");
}

} // namespace
} // namespace smelt::test
