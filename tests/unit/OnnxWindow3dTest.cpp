// ONNX's Conv, ConvTranspose, MaxPool and AveragePool over 3-D windows (frontend/onnx/
// WindowOps.cpp runs them as 2-D ops over the depth's taps): one node models written with ONNX's
// protobuf classes, imported, compiled and run on the CPU, against direct float64 loops over
// the 3-D window on fresh random inputs; strides, asymmetric pads, dilations, groups (depthwise
// too), auto_pad, output_padding, ceil_mode and count_include_pad each in some case; and the
// gradients through them (imported for training, in float64) against central differences.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "codegen/Compile.h"
#include "frontend/Ops.h"
#include "frontend/onnx/ImportInto.h"
#include "runtime/CpuExecutor.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;

/// A 5-D tensor [N, C, D, H, W] in row-major order.
struct Volume {
  Ints shape;
  std::vector<double> values;
  double at(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) const {
    return values[size_t((((n * shape[1] + c) * shape[2] + d) * shape[3] + h) * shape[4] + w)];
  }
  double &at(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
    return values[size_t((((n * shape[1] + c) * shape[2] + d) * shape[3] + h) * shape[4] + w)];
  }
};

Volume zeros(Ints shape) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return {shape, std::vector<double>(size_t(count), 0.0)};
}

/// Values as float32 holds them, so that the reference reads what the model reads.
Volume random(Ints shape) {
  Volume v = zeros(shape);
  for (double &x : v.values)
    x = double(float(draw(-1, 1)));
  return v;
}

/// One node's attributes and the test's inputs.
struct Case {
  std::string op;
  Ints kernel, strides = {1, 1, 1}, dilations = {1, 1, 1};
  Ints pads = {0, 0, 0, 0, 0, 0}; // d, h, w at the start, then at the end
  Ints outputPadding = {0, 0, 0};
  int64_t groups = 1, ceilMode = 0, countIncludePad = 0;
  std::string autoPad;
  Volume x, w;
  std::vector<double> bias; // none when empty
};

/// The case's node as a model file of `elemType` (FLOAT or DOUBLE), removed with the object.
struct ModelFile : TempModelFile {
  ModelFile(const Case &c, int elemType) : TempModelFile("smelt-window3d") {
    ::onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(19);
    ::onnx::GraphProto &graph = *model.mutable_graph();
    graph.set_name("window3d");
    addValueInfo(*graph.mutable_input(), "x", c.x.shape, elemType);
    graph.add_output()->set_name("y");
    ::onnx::NodeProto *node = addNode(graph, c.op, {"x"}, {"y"});
    bool windowedByFilter = c.op == "Conv" || c.op == "ConvTranspose";
    if (windowedByFilter) {
      addInitializer(graph, "w", c.w.shape, c.w.values, elemType);
      node->add_input("w");
      if (!c.bias.empty()) {
        addInitializer(graph, "b", {int64_t(c.bias.size())}, c.bias, elemType);
        node->add_input("b");
      }
      addInt(*node, "group", c.groups);
      addInts(*node, "dilations", c.dilations);
      if (c.op == "ConvTranspose")
        addInts(*node, "output_padding", c.outputPadding);
    } else {
      addInts(*node, "kernel_shape", c.kernel);
      addInt(*node, "ceil_mode", c.ceilMode);
      if (c.op == "AveragePool")
        addInt(*node, "count_include_pad", c.countIncludePad);
    }
    addInts(*node, "strides", c.strides);
    if (c.autoPad.empty()) {
      addInts(*node, "pads", c.pads);
    } else {
      addString(*node, "auto_pad", c.autoPad);
    }

    write(model);
  }
};

/// The case's node imported, compiled and run on `c.x` in float32.
Volume runImported(const Case &c) {
  ModelFile file(c, ::onnx::TensorProto::FLOAT);
  std::optional<rt::CpuExecutor> cpu = compileOnnxFile(file.path);
  if (!cpu)
    return {};
  std::vector<float> x(c.x.values.begin(), c.x.values.end());
  std::vector<rt::HostTensor> inputs, outputs;
  inputs.push_back(rt::HostTensor::fromVector<float>(c.x.shape, x));
  rt::Status s = cpu->run(inputs, outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok() || outputs.size() != 1)
    return {};
  return {outputs[0].type().shape, outputs[0].toDoubles()};
}

/// Per axis of the case: the padding at the start and end as the reference applies it
/// (auto_pad SAME_UPPER resolved as ONNX says).
std::pair<Ints, Ints> padsOf(const Case &c, const Ints &extent) {
  Ints low(c.pads.begin(), c.pads.begin() + 3), high(c.pads.begin() + 3, c.pads.end());
  if (c.autoPad == "SAME_UPPER")
    for (size_t i = 0; i < 3; ++i) {
      int64_t in = c.x.shape[i + 2], out = (in + c.strides[i] - 1) / c.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * c.strides[i] + extent[i] - in);
      low[i] = total / 2;
      high[i] = total - low[i];
    }
  return {low, high};
}

Volume referenceConv(const Case &c) {
  const Volume &x = c.x, &w = c.w;
  int64_t filters = w.shape[0], perGroup = w.shape[1], groups = c.groups;
  Ints k(w.shape.begin() + 2, w.shape.end()), extent(3), out(3);
  for (size_t i = 0; i < 3; ++i)
    extent[i] = (k[i] - 1) * c.dilations[i] + 1;
  auto [low, high] = padsOf(c, extent);
  for (size_t i = 0; i < 3; ++i)
    out[i] = (x.shape[i + 2] + low[i] + high[i] - extent[i]) / c.strides[i] + 1;
  Volume y = zeros({x.shape[0], filters, out[0], out[1], out[2]});
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t f = 0; f < filters; ++f)
      for (int64_t od = 0; od < out[0]; ++od)
        for (int64_t oh = 0; oh < out[1]; ++oh)
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            double sum = c.bias.empty() ? 0.0 : c.bias[size_t(f)];
            int64_t group = f / (filters / groups);
            for (int64_t ci = 0; ci < perGroup; ++ci)
              for (int64_t kd = 0; kd < k[0]; ++kd)
                for (int64_t kh = 0; kh < k[1]; ++kh)
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    int64_t d = od * c.strides[0] + kd * c.dilations[0] - low[0];
                    int64_t h = oh * c.strides[1] + kh * c.dilations[1] - low[1];
                    int64_t wi = ow * c.strides[2] + kw * c.dilations[2] - low[2];
                    if (d < 0 || h < 0 || wi < 0 || d >= x.shape[2] || h >= x.shape[3] ||
                        wi >= x.shape[4])
                      continue;
                    sum += x.at(n, group * perGroup + ci, d, h, wi) * w.at(f, ci, kd, kh, kw);
                  }
            y.at(n, f, od, oh, ow) = sum;
          }
  return y;
}

Volume referenceConvTranspose(const Case &c) {
  const Volume &x = c.x, &w = c.w;
  int64_t inChannels = x.shape[1], perGroup = w.shape[1], groups = c.groups;
  int64_t outChannels = perGroup * groups;
  Ints k(w.shape.begin() + 2, w.shape.end()), full(3), out(3);
  for (size_t i = 0; i < 3; ++i) {
    full[i] =
        c.strides[i] * (x.shape[i + 2] - 1) + c.outputPadding[i] + (k[i] - 1) * c.dilations[i] + 1;
    out[i] = full[i] - c.pads[i] - c.pads[i + 3];
  }
  Volume y = zeros({x.shape[0], outChannels, out[0], out[1], out[2]});
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t ci = 0; ci < inChannels; ++ci) {
      int64_t group = ci / (inChannels / groups);
      for (int64_t co = 0; co < perGroup; ++co)
        for (int64_t d = 0; d < x.shape[2]; ++d)
          for (int64_t h = 0; h < x.shape[3]; ++h)
            for (int64_t wi = 0; wi < x.shape[4]; ++wi)
              for (int64_t kd = 0; kd < k[0]; ++kd)
                for (int64_t kh = 0; kh < k[1]; ++kh)
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    int64_t od = d * c.strides[0] + kd * c.dilations[0] - c.pads[0];
                    int64_t oh = h * c.strides[1] + kh * c.dilations[1] - c.pads[1];
                    int64_t ow = wi * c.strides[2] + kw * c.dilations[2] - c.pads[2];
                    if (od < 0 || oh < 0 || ow < 0 || od >= out[0] || oh >= out[1] || ow >= out[2])
                      continue;
                    y.at(n, group * perGroup + co, od, oh, ow) +=
                        x.at(n, ci, d, h, wi) * w.at(ci, co, kd, kh, kw);
                  }
    }
  if (!c.bias.empty())
    for (size_t i = 0; i < y.values.size(); ++i)
      y.values[i] += c.bias[size_t(int64_t(i) / (out[0] * out[1] * out[2]) % outChannels)];
  return y;
}

Volume referencePool(const Case &c) {
  const Volume &x = c.x;
  bool isMax = c.op == "MaxPool";
  Ints out(3), low(c.pads.begin(), c.pads.begin() + 3), high(c.pads.begin() + 3, c.pads.end());
  for (size_t i = 0; i < 3; ++i) {
    int64_t span = x.shape[i + 2] + low[i] + high[i] - c.kernel[i];
    out[i] = (c.ceilMode ? (span + c.strides[i] - 1) / c.strides[i] : span / c.strides[i]) + 1;
  }
  Volume y = zeros({x.shape[0], x.shape[1], out[0], out[1], out[2]});
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t ch = 0; ch < x.shape[1]; ++ch)
      for (int64_t od = 0; od < out[0]; ++od)
        for (int64_t oh = 0; oh < out[1]; ++oh)
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            double best = -std::numeric_limits<double>::infinity(), sum = 0;
            int64_t inside = 0, counted = 0;
            for (int64_t kd = 0; kd < c.kernel[0]; ++kd)
              for (int64_t kh = 0; kh < c.kernel[1]; ++kh)
                for (int64_t kw = 0; kw < c.kernel[2]; ++kw) {
                  Ints at = {od * c.strides[0] + kd - low[0], oh * c.strides[1] + kh - low[1],
                             ow * c.strides[2] + kw - low[2]};
                  bool in = true, declared = true;
                  for (size_t i = 0; i < 3; ++i) {
                    in &= at[i] >= 0 && at[i] < x.shape[i + 2];
                    // count_include_pad counts the declared pads, not ceil_mode's overhang.
                    declared &= at[i] >= -low[i] && at[i] < x.shape[i + 2] + high[i];
                  }
                  counted += declared;
                  if (!in)
                    continue;
                  double v = x.at(n, ch, at[0], at[1], at[2]);
                  best = std::max(best, v);
                  sum += v;
                  ++inside;
                }
            y.at(n, ch, od, oh, ow) =
                isMax ? best : sum / double(c.countIncludePad ? counted : inside);
          }
  return y;
}

/// The float64 reference of the case.
Volume reference(const Case &c) {
  return c.op == "Conv"            ? referenceConv(c)
         : c.op == "ConvTranspose" ? referenceConvTranspose(c)
                                   : referencePool(c);
}

void expectMatches(const Case &c, const std::string &what) {
  SCOPED_TRACE(what + " (SMELT_TEST_SEED=" + std::to_string(rngSeed()) + ")");
  Volume want = reference(c);
  Volume got = runImported(c);
  ASSERT_EQ(got.shape, want.shape);
  EXPECT_LE(relError(got.values, want.values), 1e-5);
}

TEST(OnnxWindow3d, ConvolutionsMatchFloat64Loops) {
  Case plain{"Conv", {}};
  plain.x = random({2, 3, 5, 6, 7});
  plain.w = random({4, 3, 3, 3, 3});
  plain.bias = random({1, 1, 1, 1, 4}).values;
  plain.pads = {1, 1, 1, 1, 1, 1};
  expectMatches(plain, "3x3x3, padded, bias, batch 2");

  Case strided{"Conv", {}};
  strided.x = random({1, 2, 7, 6, 5});
  strided.w = random({3, 2, 2, 3, 1});
  strided.strides = {2, 1, 2};
  strided.dilations = {2, 1, 1};
  strided.pads = {0, 1, 0, 1, 0, 1};
  expectMatches(strided, "strides, a depth dilation, asymmetric pads");

  Case grouped{"Conv", {}};
  grouped.x = random({1, 4, 6, 5, 5});
  grouped.w = random({6, 2, 3, 1, 1});
  grouped.groups = 2;
  grouped.bias = random({1, 1, 1, 1, 6}).values;
  expectMatches(grouped, "2 groups, a temporal 3x1x1 kernel");

  Case depthwise{"Conv", {}};
  depthwise.x = random({1, 4, 5, 7, 6});
  depthwise.w = random({4, 1, 3, 3, 3});
  depthwise.groups = 4;
  depthwise.strides = {2, 2, 2};
  depthwise.autoPad = "SAME_UPPER";
  expectMatches(depthwise, "depthwise, stride 2, auto_pad SAME_UPPER");
}

TEST(OnnxWindow3d, TransposedConvolutionsMatchFloat64Loops) {
  Case upsample{"ConvTranspose", {}};
  upsample.x = random({1, 3, 3, 4, 3});
  upsample.w = random({3, 2, 3, 3, 3});
  upsample.strides = {2, 2, 2};
  upsample.pads = {1, 1, 1, 1, 1, 1};
  upsample.outputPadding = {1, 0, 1};
  upsample.bias = random({1, 1, 1, 1, 2}).values;
  expectMatches(upsample, "stride 2, pads, output_padding, bias");

  Case grouped{"ConvTranspose", {}};
  grouped.x = random({2, 4, 4, 3, 5});
  grouped.w = random({4, 2, 2, 3, 2});
  grouped.groups = 2;
  grouped.strides = {1, 2, 1};
  grouped.dilations = {2, 1, 1};
  grouped.pads = {0, 1, 1, 1, 0, 0};
  expectMatches(grouped, "2 groups, a depth dilation, asymmetric pads, batch 2");
}

TEST(OnnxWindow3d, PoolsMatchFloat64Loops) {
  for (const char *op : {"MaxPool", "AveragePool"}) {
    Case padded{op, {3, 3, 3}};
    padded.x = random({1, 3, 6, 7, 5});
    padded.strides = {2, 2, 2};
    padded.pads = {1, 1, 1, 1, 1, 1};
    expectMatches(padded, std::string(op) + " 3x3x3, stride 2, pads");

    Case ceiling{op, {2, 3, 2}};
    ceiling.x = random({2, 2, 5, 6, 7});
    ceiling.strides = {2, 2, 2};
    ceiling.pads = {1, 0, 0, 0, 1, 0};
    ceiling.ceilMode = 1;
    expectMatches(ceiling, std::string(op) + " ceil_mode, asymmetric pads");
  }
  Case counted{"AveragePool", {3, 2, 3}};
  counted.x = random({1, 2, 5, 6, 5});
  counted.strides = {2, 1, 2};
  counted.pads = {1, 1, 0, 1, 0, 1};
  counted.countIncludePad = 1;
  expectMatches(counted, "count_include_pad");
  counted.ceilMode = 1;
  counted.x = random({1, 2, 6, 6, 6});
  expectMatches(counted, "count_include_pad and ceil_mode");
}

// Through the importer's decomposition (slices, a concatenation, reshapes, 2-D ops, pads, adds),
// in float64 as a fine-tuned model trains: the gradients of the input and of the weights
// against central differences of the loss sum(y * r).
TEST(OnnxWindow3d, GradientsMatchCentralDifferences) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  Case conv{"Conv", {}};
  conv.x = random({2, 4, 5, 4, 3});
  conv.w = random({4, 2, 3, 2, 2});
  conv.groups = 2;
  conv.strides = {2, 1, 1};
  conv.pads = {1, 0, 1, 0, 1, 0};
  conv.bias = random({1, 1, 1, 1, 4}).values;
  Case transposed{"ConvTranspose", {}};
  transposed.x = random({1, 2, 3, 3, 2});
  transposed.w = random({2, 3, 2, 2, 3});
  transposed.strides = {2, 1, 2};
  transposed.pads = {1, 0, 0, 0, 1, 1};
  transposed.outputPadding = {1, 0, 0};
  Case maxPool{"MaxPool", {2, 2, 3}};
  maxPool.x = random({1, 2, 5, 4, 5});
  maxPool.strides = {2, 1, 2};
  maxPool.pads = {1, 0, 1, 0, 1, 1};
  Case avgPool = maxPool;
  avgPool.op = "AveragePool";
  avgPool.ceilMode = 1;
  for (const Case &c : {conv, transposed, maxPool, avgPool}) {
    SCOPED_TRACE(c.op);
    ModelFile file(c, ::onnx::TensorProto::DOUBLE);
    mlir::MLIRContext context;
    Graph g(context, "f");
    Volume probe = reference(c);
    Tensor x = g.input("x", c.x.shape, DType::f64), r = g.input("r", probe.shape, DType::f64);
    std::map<std::string, rt::HostTensor> values;
    onnx::ImportOptions options;
    options.parameterValues = &values;
    onnx::ImportedGraph model = onnx::importInto(g, file.path, {{{"x", x}}, true}, options);
    std::vector<Tensor> wrt = {x};
    for (Tensor p : g.parameterTensors())
      wrt.push_back(p);
    std::optional<rt::CpuExecutor> cpu =
        compileLossAndGradients(g, reduceSum(mul(model.output("y"), r), {0, 1, 2, 3, 4}), wrt);
    ASSERT_TRUE(cpu);
    std::vector<rt::HostTensor> args = {rt::HostTensor::fromVector<double>(c.x.shape, c.x.values),
                                        randomTensor(probe.shape, DType::f64)};
    std::vector<std::string> names = {"x"};
    std::vector<size_t> checked = {0};
    for (const char *name : {"w", "b"})
      if (values.count(name)) {
        checked.push_back(args.size());
        names.push_back(name);
        args.push_back(values.at(name));
      }
    expectGradientsMatchDifferences(*cpu, args, checked, 1e-6, names);
  }
}

} // namespace
} // namespace smelt::test
