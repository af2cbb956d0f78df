// ONNX's RNN, GRU and LSTM (frontend/onnx/RecurrentOps.cpp unrolls them over the sequence):
// one node models written with ONNX's protobuf classes, imported, compiled and run on the CPU,
// against float64 loops written from the spec on fresh random inputs. The cases cover the three
// directions, both layouts, sequence lengths given at run time, initial states, clip,
// peepholes, input_forget, linear_before_reset both ways and activations with alpha and beta;
// and the gradients through them (imported for training, in float64) against central
// differences.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "frontend/Ops.h"
#include "frontend/onnx/ImportInto.h"
#include "runtime/CpuExecutor.h"

#include "onnx/onnx_pb.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;

/// One node's attributes and the test's inputs (ONNX's shapes, row-major).
struct Case {
  std::string op; // RNN, GRU or LSTM
  int64_t seq = 4, batch = 3, input = 5, hidden = 4;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initialStates = false, peepholes = false, lengths = false;
  double clip = 0; // none when 0
  int64_t inputForget = 0, linearBeforeReset = 0;
  std::vector<std::string> activations; // the op's defaults when empty
  Values alphas, betas;
  Values x, w, r, b, h0, c0, p;
  std::vector<int32_t> sequenceLengths;

  int64_t gates() const { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }
  int64_t directions() const { return direction == "bidirectional" ? 2 : 1; }
  Ints xShape() const { return layout ? Ints{batch, seq, input} : Ints{seq, batch, input}; }
  Ints stateShape() const {
    return layout ? Ints{batch, directions(), hidden} : Ints{directions(), batch, hidden};
  }
  Ints yShape() const {
    return layout ? Ints{batch, seq, directions(), hidden} : Ints{seq, directions(), batch, hidden};
  }
};

/// Values as float32 holds them, so that the reference reads what the model reads.
Values random(int64_t count, double scale = 1) {
  Values v(static_cast<size_t>(count));
  for (double &x : v)
    x = double(float(draw(-scale, scale)));
  return v;
}

/// The case with fresh random inputs; sequence lengths from 0 to seq, the last one whole.
Case withInputs(Case c) {
  int64_t g = c.gates(), d = c.directions(), h = c.hidden;
  c.x = random(c.seq * c.batch * c.input);
  c.w = random(d * g * h * c.input, 0.6);
  c.r = random(d * g * h * h, 0.6);
  if (c.bias)
    c.b = random(d * 2 * g * h, 0.5);
  if (c.initialStates) {
    c.h0 = random(d * c.batch * h);
    c.c0 = random(d * c.batch * h);
  }
  if (c.peepholes)
    c.p = random(d * 3 * h, 0.5);
  if (c.lengths) {
    c.sequenceLengths.clear();
    for (int64_t b = 0; b < c.batch; ++b)
      c.sequenceLengths.push_back(b + 1 == c.batch
                                      ? int32_t(c.seq)
                                      : int32_t(std::floor(draw(0, double(c.seq) + 0.99, 0))));
  }
  return c;
}

/// The case's node as a model file of `elemType` (FLOAT or DOUBLE), removed with the object.
/// X, sequence_lens and the initial states are graph inputs; W, R, B and P initializers.
struct ModelFile : TempModelFile {
  ModelFile(const Case &c, int elemType) : TempModelFile("smelt-recurrent") {
    ::onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(14);
    ::onnx::GraphProto &graph = *model.mutable_graph();
    graph.set_name("recurrent");
    int64_t g = c.gates(), d = c.directions(), h = c.hidden;
    addValueInfo(*graph.mutable_input(), "x", c.xShape(), elemType);
    addInitializer(graph, "W", {d, g * h, c.input}, c.w, elemType);
    addInitializer(graph, "R", {d, g * h, h}, c.r, elemType);
    std::vector<std::string> inputs = {"x", "W", "R", c.bias ? "B" : ""};
    if (c.bias)
      addInitializer(graph, "B", {d, 2 * g * h}, c.b, elemType);
    inputs.push_back(c.lengths ? "lens" : "");
    if (c.lengths)
      addValueInfo(*graph.mutable_input(), "lens", {c.batch}, ::onnx::TensorProto::INT32);
    inputs.push_back(c.initialStates ? "h0" : "");
    if (c.initialStates)
      addValueInfo(*graph.mutable_input(), "h0", c.stateShape(), elemType);
    if (c.op == "LSTM") {
      inputs.push_back(c.initialStates ? "c0" : "");
      if (c.initialStates)
        addValueInfo(*graph.mutable_input(), "c0", c.stateShape(), elemType);
      inputs.push_back(c.peepholes ? "P" : "");
      if (c.peepholes)
        addInitializer(graph, "P", {d, 3 * h}, c.p, elemType);
    }
    while (inputs.back().empty())
      inputs.pop_back();
    std::vector<std::string> outputs = {"y", "y_h"};
    if (c.op == "LSTM")
      outputs.push_back("y_c");
    for (const std::string &out : outputs)
      graph.add_output()->set_name(out);
    ::onnx::NodeProto *node = addNode(graph, c.op, inputs, outputs);
    addInt(*node, "hidden_size", h);
    addInt(*node, "layout", c.layout);
    addString(*node, "direction", c.direction);
    if (c.clip > 0)
      addFloats(*node, "clip", {c.clip}, /*single=*/true);
    if (c.op == "LSTM")
      addInt(*node, "input_forget", c.inputForget);
    if (c.op == "GRU")
      addInt(*node, "linear_before_reset", c.linearBeforeReset);
    if (!c.activations.empty())
      addStrings(*node, "activations", c.activations);
    if (!c.alphas.empty())
      addFloats(*node, "activation_alpha", c.alphas);
    if (!c.betas.empty())
      addFloats(*node, "activation_beta", c.betas);
    write(model);
  }
};

/// The case's run-time inputs in the graph's order.
std::vector<rt::HostTensor> inputsOf(const Case &c) {
  auto floats = [](const Values &v) { return std::vector<float>(v.begin(), v.end()); };
  std::vector<rt::HostTensor> inputs = {rt::HostTensor::fromVector<float>(c.xShape(), floats(c.x))};
  if (c.lengths)
    inputs.push_back(rt::HostTensor::fromVector<int32_t>({c.batch}, c.sequenceLengths));
  if (c.initialStates) {
    inputs.push_back(rt::HostTensor::fromVector<float>(c.stateShape(), floats(c.h0)));
    if (c.op == "LSTM")
      inputs.push_back(rt::HostTensor::fromVector<float>(c.stateShape(), floats(c.c0)));
  }
  return inputs;
}

/// The case's node imported, compiled and run in float32: Y, Y_h (and Y_c).
std::vector<Values> runImported(const Case &c) {
  ModelFile file(c, ::onnx::TensorProto::FLOAT);
  std::optional<rt::CpuExecutor> cpu = compileOnnxFile(file.path);
  if (!cpu)
    return {};
  std::vector<rt::HostTensor> inputs = inputsOf(c), outputs;
  rt::Status s = cpu->run(inputs, outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<Values> results;
  for (rt::HostTensor &t : outputs)
    results.push_back(t.toDoubles());
  return results;
}

/// A named activation as the spec defines it; alpha and beta as the case gives them.
double activate(const std::string &name, double x, double alpha, double beta) {
  if (name == "Sigmoid")
    return 1 / (1 + std::exp(-x));
  if (name == "Tanh")
    return std::tanh(x);
  if (name == "Relu")
    return std::max(0.0, x);
  if (name == "Affine")
    return alpha * x + beta;
  if (name == "LeakyRelu")
    return x >= 0 ? x : alpha * x;
  if (name == "ThresholdedRelu")
    return x > alpha ? x : 0;
  if (name == "ScaledTanh")
    return alpha * std::tanh(beta * x);
  if (name == "HardSigmoid")
    return std::min(std::max(alpha * x + beta, 0.0), 1.0);
  if (name == "Elu")
    return x >= 0 ? x : alpha * (std::exp(x) - 1);
  if (name == "Softsign")
    return x / (1 + std::abs(x));
  if (name == "Softplus")
    return std::log(1 + std::exp(x));
  ADD_FAILURE() << "no activation " << name;
  return 0;
}

/// The case's activations, per direction, with the alphas and betas consumed in order by the
/// functions that take them (ONNX Runtime's reading of the spec).
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
  double operator()(double x) const { return activate(name, x, alpha, beta); }
};
std::vector<Activation> activationsOf(const Case &c) {
  std::vector<std::string> names = c.activations;
  if (names.empty()) {
    std::vector<std::string> defaults = c.op == "RNN" ? std::vector<std::string>{"Tanh"}
                                        : c.op == "GRU"
                                            ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < c.directions(); ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  }
  size_t alpha = 0, beta = 0;
  std::vector<Activation> result;
  for (const std::string &name : names) {
    Activation a{name};
    if (name != "Sigmoid" && name != "Tanh" && name != "Relu" && name != "Softsign" &&
        name != "Softplus")
      a.alpha = c.alphas.at(alpha++);
    if (name == "Affine" || name == "ScaledTanh" || name == "HardSigmoid")
      a.beta = c.betas.at(beta++);
    result.push_back(a);
  }
  return result;
}

/// Y, Y_h (and Y_c) by the spec's equations, in float64.
std::vector<Values> reference(const Case &c) {
  int64_t T = c.seq, B = c.batch, I = c.input, H = c.hidden, G = c.gates(), D = c.directions();
  std::vector<Activation> act = activationsOf(c);
  size_t perDirection = act.size() / size_t(D);
  Values y(size_t(T * D * B * H), 0.0), yh(size_t(D * B * H)), yc(size_t(D * B * H));
  auto xAt = [&](int64_t t, int64_t b, int64_t i) {
    return c.x[size_t(c.layout ? (b * T + t) * I + i : (t * B + b) * I + i)];
  };
  auto stateIndex = [&](int64_t d, int64_t b, int64_t j) {
    return size_t(c.layout ? (b * D + d) * H + j : (d * B + b) * H + j);
  };
  auto yIndex = [&](int64_t t, int64_t d, int64_t b, int64_t j) {
    return size_t(c.layout ? ((b * T + t) * D + d) * H + j : ((t * D + d) * B + b) * H + j);
  };
  auto clip = [&](double v) { return c.clip > 0 ? std::min(std::max(v, -c.clip), c.clip) : v; };
  for (int64_t d = 0; d < D; ++d) {
    const Activation *f = &act[size_t(d) * perDirection];
    bool reverse = c.direction == "reverse" || d == 1;
    for (int64_t b = 0; b < B; ++b) {
      Values h(static_cast<size_t>(H), 0.0), cell(static_cast<size_t>(H), 0.0);
      if (c.initialStates)
        for (int64_t j = 0; j < H; ++j) {
          h[size_t(j)] = c.h0[stateIndex(d, b, j)];
          cell[size_t(j)] = c.c0[stateIndex(d, b, j)];
        }
      int64_t length = c.lengths ? c.sequenceLengths[size_t(b)] : T;
      for (int64_t k = 0; k < length; ++k) {
        int64_t t = reverse ? length - 1 - k : k;
        // Row `row` of x_t W^T + W_b, and of h R^T + R_b for a state `s`.
        auto fromInput = [&](int64_t row) {
          double sum = c.bias ? c.b[size_t(d * 2 * G * H + row)] : 0.0;
          for (int64_t i = 0; i < I; ++i)
            sum += xAt(t, b, i) * c.w[size_t((d * G * H + row) * I + i)];
          return sum;
        };
        auto fromState = [&](int64_t row, const Values &s) {
          double sum = c.bias ? c.b[size_t(d * 2 * G * H + G * H + row)] : 0.0;
          for (int64_t i = 0; i < H; ++i)
            sum += s[size_t(i)] * c.r[size_t((d * G * H + row) * H + i)];
          return sum;
        };
        Values next(static_cast<size_t>(H)), nextCell(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          if (c.op == "RNN") {
            next[size_t(j)] = f[0](clip(fromInput(j) + fromState(j, h)));
          } else if (c.op == "GRU") {
            double z = f[0](clip(fromInput(j) + fromState(j, h)));
            double reset = f[0](clip(fromInput(H + j) + fromState(H + j, h)));
            double candidate;
            if (c.linearBeforeReset) {
              candidate = fromInput(2 * H + j) + reset * fromState(2 * H + j, h);
            } else {
              Values resetState(static_cast<size_t>(H));
              for (int64_t i = 0; i < H; ++i)
                resetState[size_t(i)] =
                    f[0](clip(fromInput(H + i) + fromState(H + i, h))) * h[size_t(i)];
              candidate = fromInput(2 * H + j) + fromState(2 * H + j, resetState);
            }
            next[size_t(j)] = (1 - z) * f[1](clip(candidate)) + z * h[size_t(j)];
          } else {
            auto peephole = [&](int64_t k) {
              return c.peepholes ? c.p[size_t(d * 3 * H + k * H + j)] : 0.0;
            };
            double in = f[0](clip(fromInput(j) + fromState(j, h) + peephole(0) * cell[size_t(j)]));
            double forget = c.inputForget
                                ? 1 - in
                                : f[0](clip(fromInput(2 * H + j) + fromState(2 * H + j, h) +
                                            peephole(2) * cell[size_t(j)]));
            double candidate = f[1](clip(fromInput(3 * H + j) + fromState(3 * H + j, h)));
            nextCell[size_t(j)] = forget * cell[size_t(j)] + in * candidate;
            double out = f[0](
                clip(fromInput(H + j) + fromState(H + j, h) + peephole(1) * nextCell[size_t(j)]));
            next[size_t(j)] = out * f[2](nextCell[size_t(j)]);
          }
        }
        h = next;
        if (c.op == "LSTM")
          cell = nextCell;
        for (int64_t j = 0; j < H; ++j)
          y[yIndex(t, d, b, j)] = h[size_t(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        yh[stateIndex(d, b, j)] = h[size_t(j)];
        yc[stateIndex(d, b, j)] = cell[size_t(j)];
      }
    }
  }
  std::vector<Values> result = {y, yh};
  if (c.op == "LSTM")
    result.push_back(yc);
  return result;
}

void expectMatches(const Case &spec, const std::string &what) {
  SCOPED_TRACE(spec.op + ": " + what + " (SMELT_TEST_SEED=" + std::to_string(rngSeed()) + ")");
  Case c = withInputs(spec);
  std::vector<Values> want = reference(c);
  std::vector<Values> got = runImported(c);
  ASSERT_EQ(got.size(), want.size());
  const char *names[] = {"Y", "Y_h", "Y_c"};
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << names[i];
    EXPECT_LE(relError(got[i], want[i]), 2e-6) << names[i];
  }
}

TEST(OnnxRecurrent, LstmMatchesFloat64Loops) {
  expectMatches({"LSTM"}, "defaults");
  Case bidirectional{"LSTM"};
  bidirectional.direction = "bidirectional";
  bidirectional.initialStates = true;
  bidirectional.peepholes = true;
  bidirectional.lengths = true;
  expectMatches(bidirectional, "bidirectional, initial states, peepholes, sequence lengths");
  Case batchFirst{"LSTM"};
  batchFirst.layout = 1;
  batchFirst.direction = "reverse";
  batchFirst.lengths = true;
  batchFirst.initialStates = true;
  batchFirst.clip = 0.7;
  batchFirst.bias = false;
  expectMatches(batchFirst, "layout 1, reverse, lengths, clip, no bias");
  Case coupled{"LSTM"};
  coupled.inputForget = 1;
  coupled.activations = {"HardSigmoid", "LeakyRelu", "Softsign"};
  coupled.alphas = {0.3, 0.2};
  coupled.betas = {0.4};
  expectMatches(coupled, "input_forget, HardSigmoid/LeakyRelu/Softsign with alphas");
}

TEST(OnnxRecurrent, GruMatchesFloat64Loops) {
  expectMatches({"GRU"}, "defaults");
  Case pytorch{"GRU"};
  pytorch.linearBeforeReset = 1; // as PyTorch exports nn.GRU
  pytorch.direction = "bidirectional";
  pytorch.initialStates = true;
  pytorch.lengths = true;
  expectMatches(pytorch, "linear_before_reset, bidirectional, initial states, lengths");
  Case batchFirst{"GRU"};
  batchFirst.layout = 1;
  batchFirst.direction = "reverse";
  batchFirst.clip = 0.5;
  batchFirst.activations = {"Sigmoid", "ScaledTanh"};
  batchFirst.alphas = {1.5};
  batchFirst.betas = {0.8};
  expectMatches(batchFirst, "layout 1, reverse, clip, ScaledTanh");
}

TEST(OnnxRecurrent, RnnMatchesFloat64Loops) {
  expectMatches({"RNN"}, "defaults");
  Case every{"RNN"};
  every.direction = "bidirectional";
  every.layout = 1;
  every.initialStates = true;
  every.lengths = true;
  every.activations = {"Relu", "Elu"};
  every.alphas = {0.9};
  expectMatches(every, "bidirectional, layout 1, lengths, Relu and Elu");
  for (const char *name : {"Affine", "ThresholdedRelu", "Softplus", "Sigmoid"}) {
    Case one{"RNN"};
    one.activations = {name};
    one.alphas = {0.7};
    one.betas = {-0.2};
    one.direction = "reverse";
    expectMatches(one, name);
  }
}

// Through the unrolled steps (slices, matmuls, selects on the sequence lengths, the gates), in
// float64 as a fine-tuned model trains: the gradients of the input and of every weight against
// central differences of the loss sum(Y * r1) + sum(Y_h * r2).
TEST(OnnxRecurrent, GradientsMatchCentralDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  Case lstm{"LSTM", 3, 2, 3, 3};
  lstm.direction = "bidirectional";
  lstm.peepholes = true;
  lstm.lengths = true;
  Case gru{"GRU", 3, 2, 3, 3};
  gru.linearBeforeReset = 1;
  gru.layout = 1;
  gru.lengths = true;
  Case gruReset = gru;
  gruReset.linearBeforeReset = 0;
  gruReset.direction = "reverse";
  Case rnn{"RNN", 3, 2, 3, 3};
  for (const Case &spec : {lstm, gru, gruReset, rnn}) {
    SCOPED_TRACE(spec.op + " " + spec.direction);
    Case c = withInputs(spec);
    ModelFile file(c, ::onnx::TensorProto::DOUBLE);
    mlir::MLIRContext context;
    Graph g(context, "f");
    Tensor x = g.input("x", c.xShape(), DType::f64);
    Tensor r1 = g.input("r1", c.yShape(), DType::f64);
    Tensor r2 = g.input("r2", c.stateShape(), DType::f64);
    onnx::GraphBinding binding{{{"x", x}}, true};
    std::vector<rt::HostTensor> args = {rt::HostTensor::fromVector<double>(c.xShape(), c.x),
                                        randomTensor(c.yShape(), DType::f64),
                                        randomTensor(c.stateShape(), DType::f64)};
    if (c.lengths) {
      binding.inputs["lens"] = g.input("lens", {c.batch}, DType::i32);
      args.push_back(rt::HostTensor::fromVector<int32_t>({c.batch}, c.sequenceLengths));
    }
    std::map<std::string, rt::HostTensor> values;
    onnx::ImportOptions options;
    options.parameterValues = &values;
    onnx::ImportedGraph model = onnx::importInto(g, file.path, binding, options);
    Tensor loss = add(reduceSum(mul(model.output("y"), r1), {0, 1, 2, 3}),
                      reduceSum(mul(model.output("y_h"), r2), {0, 1, 2}));
    std::vector<Tensor> wrt = {x};
    std::vector<std::string> names = {"x"};
    std::vector<size_t> checked = {0};
    for (const ParameterSpec &p : g.parameters()) {
      checked.push_back(args.size());
      names.push_back(p.name);
      args.push_back(values.at(p.name));
    }
    for (Tensor p : g.parameterTensors())
      wrt.push_back(p);
    std::optional<rt::CpuExecutor> cpu = compileLossAndGradients(g, loss, wrt);
    ASSERT_TRUE(cpu);
    expectGradientsMatchDifferences(*cpu, args, checked, 1e-6, names);
  }
}

} // namespace
} // namespace smelt::test
