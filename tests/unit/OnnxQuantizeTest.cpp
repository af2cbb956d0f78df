// ONNX's quantization ops and narrow integers (frontend/onnx/QuantizeOps.cpp, IntegerTypes.cpp):
// one-node models written with ONNX's protobuf classes, imported, compiled and run on the CPU,
// against references written from the spec and ONNX Runtime's kernels (integer sums in int64,
// requantization in f32, rounding half to even) on fresh random inputs: every narrow type, per
// tensor, per axis and blocked scales, ties, saturation at both ends, zero points per row,
// column and channel, a weight past the importer's known-value size, and 8-bit arithmetic that
// wraps.
#include "OnnxTestGraph.h"
#include "TestUtil.h"

#include "runtime/CpuExecutor.h"

#include <fmt/format.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <functional>

namespace smelt::test {
namespace {

using Ints = std::vector<int64_t>;
using Values = std::vector<double>;
using ::onnx::TensorProto;

std::pair<int64_t, int64_t> rangeOf(int type) {
  switch (type) {
  case TensorProto::INT8:
    return {-128, 127};
  case TensorProto::UINT8:
    return {0, 255};
  case TensorProto::INT16:
    return {-32768, 32767};
  default:
    return {0, 65535};
  }
}

/// Random integers of `type`'s range (or [lo, hi]).
Values integers(int64_t count, int type, std::optional<std::pair<int64_t, int64_t>> within = {}) {
  auto [lo, hi] = within ? *within : rangeOf(type);
  Values v;
  for (int64_t i = 0; i < count; ++i)
    v.push_back(std::floor(draw(double(lo), double(hi) + 1, 0)));
  return v;
}

/// An initializer of `type`: FLOAT from float_data, narrow integers as their file bytes
/// (`raw`) or in int32_data, INT32 in int32_data.
void addTyped(::onnx::GraphProto &graph, const std::string &name, const Ints &dims,
              const Values &values, int type, bool raw = true) {
  if (type == TensorProto::FLOAT)
    return addInitializer(graph, name, dims, values, type);
  TensorProto *t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims)
    t->add_dims(d);
  size_t width = type == TensorProto::INT8 || type == TensorProto::UINT8 ? 1 : 2;
  if (!raw || type == TensorProto::INT32) {
    for (double v : values)
      t->add_int32_data(int32_t(v));
    return;
  }
  std::string bytes(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    int32_t v = int32_t(values[i]);
    std::memcpy(&bytes[i * width], &v, width); // little-endian: the low bytes
  }
  t->set_raw_data(bytes);
}

/// A one-node model: graph inputs (name, shape, ONNX type) fed at run time, initializers added
/// by the caller through `init`, the node's outputs the graph's.
struct NodeModel : TempModelFile {
  ::onnx::ModelProto model;
  ::onnx::GraphProto &graph;
  ::onnx::NodeProto *node;
  NodeModel(const std::string &op, int64_t opset, const std::vector<std::string> &inputs,
            const std::vector<std::string> &outputs)
      : TempModelFile("smelt-quantize"), graph(startModel(model, opset, "quantize")),
        node(addNode(graph, op, inputs, outputs)) {
    for (const std::string &out : outputs)
      graph.add_output()->set_name(out);
  }
  void input(const std::string &name, const Ints &shape, int type) {
    addValueInfo(*graph.mutable_input(), name, shape, type);
  }
  /// Writes the model, compiles it and runs it on `args`; the outputs.
  std::vector<rt::HostTensor> run(const std::vector<rt::HostTensor> &args) {
    write(model);
    std::vector<rt::HostTensor> outputs;
    std::optional<rt::CpuExecutor> cpu = compileOnnxFile(path);
    EXPECT_TRUE(cpu);
    if (!cpu)
      return outputs;
    rt::Status s = cpu->run(args, outputs);
    EXPECT_TRUE(s.ok()) << s.message();
    return outputs;
  }
  std::string importError() {
    write(model);
    return importErrorOf(path);
  }
};

rt::HostTensor tensorOf(DType dtype, const Ints &shape, const Values &v) {
  return rt::HostTensor::fromDoubles({dtype, shape}, v);
}

/// Rounds half to even (the default rounding mode's nearbyint).
double roundEven(double x) {
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
  return std::nearbyint(x);
}

/// The index of element `i` of a row-major `shape` along `axis`.
int64_t indexAlong(int64_t i, const Ints &shape, int64_t axis) {
  int64_t inner = elementCount(Ints(shape.begin() + axis + 1, shape.end()));
  return (i / inner) % shape[size_t(axis)];
}

struct QuantizeCase {
  int type;
  enum { perTensor, perAxis, blocked } layout;
};

TEST(OnnxQuantize, QuantizeAndDequantizeLinearMatchTheSpec) {
  Ints shape = {3, 5, 7};
  for (int type : {TensorProto::UINT8, TensorProto::INT8, TensorProto::INT16, TensorProto::UINT16})
    for (auto layout : {QuantizeCase::perTensor, QuantizeCase::perAxis, QuantizeCase::blocked}) {
      SCOPED_TRACE(fmt::format("{} layout {} (SMELT_TEST_SEED={})",
                               TensorProto::DataType_Name(TensorProto::DataType(type)), int(layout),
                               rngSeed()));
      auto [lo, hi] = rangeOf(type);
      // Scales and zero points per tensor, along axis 1, or in blocks of 3 along axis 2.
      int64_t axis = layout == QuantizeCase::blocked ? 2 : 1, block = 3;
      Ints paramShape = layout == QuantizeCase::perTensor ? Ints{}
                        : layout == QuantizeCase::perAxis ? Ints{shape[1]}
                                                          : Ints{3, 5, 3};
      int64_t params = elementCount(paramShape);
      Values scales, zeroPoints = integers(params, type, std::pair(lo / 2, hi / 2));
      for (int64_t p = 0; p < params; ++p)
        scales.push_back(double(float(std::ldexp(1.0, int(draw(-6, 2, 0))))));
      auto paramOf = [&](int64_t i) {
        if (layout == QuantizeCase::perTensor)
          return int64_t(0);
        if (layout == QuantizeCase::perAxis)
          return indexAlong(i, shape, 1);
        return (i / shape[2]) * 3 + indexAlong(i, shape, 2) / block;
      };
      // x: spread past both ends of the range, with exact ties (scales are powers of two).
      Values x;
      double span = double(hi - lo) * 1.4;
      for (int64_t i = 0; i < elementCount(shape); ++i) {
        double s = scales[size_t(paramOf(i))], z = zeroPoints[size_t(paramOf(i))];
        double q = i % 4 == 0 ? std::floor(draw(-40, 40, 0)) + 0.5 : draw(-span, span, 0) - z;
        x.push_back(double(float(q * s)));
      }
      NodeModel q("QuantizeLinear", layout == QuantizeCase::blocked ? 21 : 13,
                  {"x", "scale", "zero_point"}, {"y"});
      q.input("x", shape, TensorProto::FLOAT);
      addInitializer(q.graph, "scale", paramShape, scales, TensorProto::FLOAT);
      addTyped(q.graph, "zero_point", paramShape, zeroPoints, type);
      addInt(*q.node, "axis", axis);
      if (layout == QuantizeCase::blocked)
        addInt(*q.node, "block_size", block);
      std::vector<rt::HostTensor> out = q.run({tensorOf(DType::f32, shape, x)});
      ASSERT_EQ(out.size(), 1u);
      Values want;
      for (int64_t i = 0; i < elementCount(shape); ++i) {
        double scaled = double(float(x[size_t(i)]) / float(scales[size_t(paramOf(i))]));
        want.push_back(
            std::clamp(roundEven(scaled) + zeroPoints[size_t(paramOf(i))], double(lo), double(hi)));
      }
      EXPECT_EQ(out[0].type().dtype, DType::i32);
      EXPECT_EQ(out[0].toDoubles(), want);

      // DequantizeLinear of fresh integers with the same parameters.
      Values ints = integers(elementCount(shape), type);
      NodeModel dq("DequantizeLinear", layout == QuantizeCase::blocked ? 21 : 13,
                   {"x", "scale", "zero_point"}, {"y"});
      dq.input("x", shape, type);
      addInitializer(dq.graph, "scale", paramShape, scales, TensorProto::FLOAT);
      addTyped(dq.graph, "zero_point", paramShape, zeroPoints, type, /*raw=*/false);
      addInt(*dq.node, "axis", axis);
      if (layout == QuantizeCase::blocked)
        addInt(*dq.node, "block_size", block);
      out = dq.run({tensorOf(DType::i32, shape, ints)});
      ASSERT_EQ(out.size(), 1u);
      want.clear();
      for (int64_t i = 0; i < elementCount(shape); ++i)
        want.push_back(double(float(ints[size_t(i)] - zeroPoints[size_t(paramOf(i))]) *
                              float(scales[size_t(paramOf(i))])));
      EXPECT_EQ(out[0].type().dtype, DType::f32);
      EXPECT_EQ(out[0].toDoubles(), want);
    }
}

TEST(OnnxQuantize, DynamicQuantizeLinearMatchesOnnxRuntime) {
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  Ints shape = {4, 9};
  std::vector<Values> inputs(3);
  for (int64_t i = 0; i < elementCount(shape); ++i) {
    inputs[0].push_back(draw(-3, 5));
    inputs[1].push_back(draw(0.5, 2)); // all positive: the range starts at 0
    inputs[2].push_back(0.0);          // all zero: a scale of 1
  }
  for (const Values &x : inputs) {
    NodeModel m("DynamicQuantizeLinear", 11, {"x"}, {"y", "scale", "zero_point"});
    m.input("x", shape, TensorProto::FLOAT);
    std::vector<rt::HostTensor> out = m.run({tensorOf(DType::f32, shape, x)});
    ASSERT_EQ(out.size(), 3u);
    float lo = 0, hi = 0;
    for (double v : x) {
      lo = std::min(lo, float(v));
      hi = std::max(hi, float(v));
    }
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    double zeroPoint = roundEven(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
    Values want;
    for (double v : x)
      want.push_back(std::clamp(roundEven(float(v) / scale) + zeroPoint, 0.0, 255.0));
    EXPECT_EQ(out[0].toDoubles(), want);
    EXPECT_EQ(out[1].toDoubles(), Values{double(scale)});
    EXPECT_EQ(out[2].toDoubles(), Values{zeroPoint});
  }
}

/// (A - a_zp) x (B - b_zp) in int64: A [batch, M, K], B [K, N], a_zp per row, b_zp per column.
Values integerProduct(const Values &a, const Values &b, const Values &za, const Values &zb,
                      int64_t batch, int64_t m, int64_t k, int64_t n) {
  Values out;
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += int64_t(a[size_t((t * m + i) * k + l)] - za[size_t(za.size() == 1 ? 0 : i)]) *
                 int64_t(b[size_t(l * n + j)] - zb[size_t(zb.size() == 1 ? 0 : j)]);
        out.push_back(double(sum));
      }
  return out;
}

/// ONNX Runtime's requantization: the accumulator times (a_scale * b_scale) / y_scale in f32,
/// rounded half to even, plus the zero point, saturated.
double requantize(double accumulator, float multiplier, double zeroPoint, int type) {
  auto [lo, hi] = rangeOf(type);
  return std::clamp(roundEven(float(accumulator) * multiplier) + zeroPoint, double(lo), double(hi));
}

TEST(OnnxQuantize, IntegerMatmulsMatchInt64Sums) {
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  // Small, with zero points per row of A and per column of B; and a weight of 300 x 260 UINT8
  // (past the importer's known-value size: its file bytes widened) with K = 300.
  struct Case {
    int64_t batch, m, k, n;
    bool perRowColumn;
  };
  for (Case c : {Case{2, 3, 7, 5, true}, Case{1, 4, 300, 260, false}}) {
    Values a = integers(c.batch * c.m * c.k, TensorProto::UINT8);
    Values b = integers(c.k * c.n, TensorProto::INT8);
    Values za = integers(c.perRowColumn ? c.m : 1, TensorProto::UINT8);
    Values zb = integers(c.perRowColumn ? c.n : 1, TensorProto::INT8);
    Ints aShape = {c.batch, c.m, c.k};
    NodeModel m("MatMulInteger", 10, {"a", "b", "za", "zb"}, {"y"});
    m.input("a", aShape, TensorProto::UINT8);
    addTyped(m.graph, "b", {c.k, c.n}, b, TensorProto::INT8);
    addTyped(m.graph, "za", c.perRowColumn ? Ints{c.m} : Ints{}, za, TensorProto::UINT8);
    addTyped(m.graph, "zb", c.perRowColumn ? Ints{c.n} : Ints{}, zb, TensorProto::INT8);
    std::vector<rt::HostTensor> out = m.run({tensorOf(DType::i32, aShape, a)});
    ASSERT_EQ(out.size(), 1u);
    Values want = integerProduct(a, b, za, zb, c.batch, c.m, c.k, c.n);
    EXPECT_EQ(out[0].type().dtype, DType::i32);
    EXPECT_EQ(out[0].toDoubles(), want);

    // QLinearMatMul of the same operands, B's scale per column.
    Values scaleB;
    for (int64_t j = 0; j < (c.perRowColumn ? c.n : 1); ++j)
      scaleB.push_back(double(float(draw(0.002, 0.02, 0))));
    float scaleA = float(draw(0.01, 0.05, 0)), scaleY = float(draw(0.5, 2));
    double zeroY = std::floor(draw(0, 256, 0));
    NodeModel ql("QLinearMatMul", 10, {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, {"y"});
    ql.input("a", aShape, TensorProto::UINT8);
    addInitializer(ql.graph, "sa", {}, {scaleA}, TensorProto::FLOAT);
    addTyped(ql.graph, "za", {}, {za[0]}, TensorProto::UINT8);
    addTyped(ql.graph, "b", {c.k, c.n}, b, TensorProto::INT8);
    addInitializer(ql.graph, "sb", c.perRowColumn ? Ints{c.n} : Ints{}, scaleB, TensorProto::FLOAT);
    addTyped(ql.graph, "zb", c.perRowColumn ? Ints{c.n} : Ints{}, zb, TensorProto::INT8);
    addInitializer(ql.graph, "sy", {}, {scaleY}, TensorProto::FLOAT);
    addTyped(ql.graph, "zy", {}, {zeroY}, TensorProto::UINT8);
    out = ql.run({tensorOf(DType::i32, aShape, a)});
    ASSERT_EQ(out.size(), 1u);
    Values sums = integerProduct(a, b, {za[0]}, zb, c.batch, c.m, c.k, c.n);
    want.clear();
    for (size_t i = 0; i < sums.size(); ++i) {
      float multiplier =
          (scaleA * float(scaleB[scaleB.size() == 1 ? 0 : i % size_t(c.n)])) / scaleY;
      want.push_back(requantize(sums[i], multiplier, zeroY, TensorProto::UINT8));
    }
    EXPECT_EQ(out[0].toDoubles(), want);
  }
}

TEST(OnnxQuantize, IntegerConvolutionsMatchInt64Sums) {
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  Ints xShape = {2, 3, 7, 6}, wShape = {4, 3, 3, 2};
  Ints strides = {2, 1}, pads = {1, 0, 1, 1};
  int64_t oh = (7 + 2 - 3) / 2 + 1, ow = (6 + 1 - 2) / 1 + 1;
  Values x = integers(elementCount(xShape), TensorProto::UINT8);
  Values w = integers(elementCount(wShape), TensorProto::INT8);
  Values zw = integers(4, TensorProto::INT8), bias = integers(4, TensorProto::INT16);
  double zx = std::floor(draw(0, 256, 0));
  // sums[n][f][i][j] of (x - zx) (w - zw[f]), padding contributing nothing.
  Values sums;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t f = 0; f < 4; ++f)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t sum = 0;
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 2; ++kj) {
                int64_t r = i * strides[0] - pads[0] + ki, s = j * strides[1] - pads[1] + kj;
                if (r < 0 || r >= 7 || s < 0 || s >= 6)
                  continue;
                sum += int64_t(x[size_t(((n * 3 + c) * 7 + r) * 6 + s)] - zx) *
                       int64_t(w[size_t(((f * 3 + c) * 3 + ki) * 2 + kj)] - zw[size_t(f)]);
              }
          sums.push_back(double(sum));
        }
  auto attributes = [&](::onnx::NodeProto &node) {
    addInts(node, "strides", strides);
    addInts(node, "pads", pads);
    addInts(node, "kernel_shape", {3, 2});
  };
  NodeModel conv("ConvInteger", 10, {"x", "w", "zx", "zw"}, {"y"});
  conv.input("x", xShape, TensorProto::UINT8);
  addTyped(conv.graph, "w", wShape, w, TensorProto::INT8);
  addTyped(conv.graph, "zx", {}, {zx}, TensorProto::UINT8);
  addTyped(conv.graph, "zw", {4}, zw, TensorProto::INT8);
  attributes(*conv.node);
  std::vector<rt::HostTensor> out = conv.run({tensorOf(DType::i32, xShape, x)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type().shape, (Ints{2, 4, oh, ow}));
  EXPECT_EQ(out[0].toDoubles(), sums);

  // QLinearConv: the same sums plus an INT32 bias, requantized per output channel to INT8.
  Values scaleW;
  for (int i = 0; i < 4; ++i)
    scaleW.push_back(double(float(draw(0.005, 0.02, 0))));
  float scaleX = float(draw(0.01, 0.05, 0)), scaleY = float(draw(0.05, 0.2, 0));
  double zeroY = std::floor(draw(-20, 20, 0));
  NodeModel ql("QLinearConv", 10, {"x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "bias"}, {"y"});
  ql.input("x", xShape, TensorProto::UINT8);
  addInitializer(ql.graph, "sx", {}, {scaleX}, TensorProto::FLOAT);
  addTyped(ql.graph, "zx", {}, {zx}, TensorProto::UINT8);
  addTyped(ql.graph, "w", wShape, w, TensorProto::INT8);
  addInitializer(ql.graph, "sw", {4}, scaleW, TensorProto::FLOAT);
  addTyped(ql.graph, "zw", {4}, zw, TensorProto::INT8);
  addInitializer(ql.graph, "sy", {}, {scaleY}, TensorProto::FLOAT);
  addTyped(ql.graph, "zy", {}, {zeroY}, TensorProto::INT8);
  addTyped(ql.graph, "bias", {4}, bias, TensorProto::INT32);
  attributes(*ql.node);
  out = ql.run({tensorOf(DType::i32, xShape, x)});
  ASSERT_EQ(out.size(), 1u);
  Values want;
  for (size_t i = 0; i < sums.size(); ++i) {
    size_t f = (i / size_t(oh * ow)) % 4;
    float multiplier = (scaleX * float(scaleW[f])) / scaleY;
    want.push_back(requantize(sums[i] + bias[f], multiplier, zeroY, TensorProto::INT8));
  }
  EXPECT_EQ(out[0].toDoubles(), want);
}

/// `v` reduced into `type`'s range modulo 2^8 or 2^16, as C++ narrows an int.
double wrapInto(double v, int type) {
  auto [lo, hi] = rangeOf(type);
  double span = double(hi - lo + 1), r = std::fmod(v - double(lo), span);
  return (r < 0 ? r + span : r) + double(lo);
}

TEST(OnnxQuantize, NarrowIntegerArithmeticWraps) {
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  struct Case {
    const char *op;
    int type;
    int inputs;
    std::function<double(double, double)> f;
  };
  std::vector<Case> cases = {
      {"Add", TensorProto::UINT8, 2, [](double a, double b) { return a + b; }},
      {"Sub", TensorProto::UINT8, 2, [](double a, double b) { return a - b; }},
      {"Mul", TensorProto::INT8, 2, [](double a, double b) { return a * b; }},
      {"Mul", TensorProto::UINT16, 2, [](double a, double b) { return a * b; }},
      {"Neg", TensorProto::INT8, 1, [](double a, double) { return -a; }},
      {"Abs", TensorProto::INT16, 1, [](double a, double) { return std::abs(a); }},
      {"Div", TensorProto::INT8, 2, [](double a, double b) { return std::trunc(a / b); }},
  };
  Ints shape = {64};
  for (const Case &c : cases) {
    SCOPED_TRACE(
        fmt::format("{} {}", c.op, TensorProto::DataType_Name(TensorProto::DataType(c.type))));
    Values a = integers(64, c.type), b = integers(64, c.type);
    a[0] = double(rangeOf(c.type).first); // -128 / -1 and -(-128) overflow
    if (a[0] < 0)
      b[0] = -1;
    for (double &v : b)
      if (v == 0)
        v = 1;
    // Run-time inputs, and the same values as small initializers that the importer folds.
    for (bool folded : {false, true}) {
      std::vector<std::string> names = {"a", "b"};
      names.resize(size_t(c.inputs));
      NodeModel m(c.op, 14, names, {"y"});
      std::vector<rt::HostTensor> args;
      for (size_t i = 0; i < names.size(); ++i) {
        const Values &v = i == 0 ? a : b;
        if (folded) {
          addTyped(m.graph, names[i], shape, v, c.type);
        } else {
          m.input(names[i], shape, c.type);
          args.push_back(tensorOf(DType::i32, shape, v));
        }
      }
      std::vector<rt::HostTensor> out = m.run(args);
      ASSERT_EQ(out.size(), 1u);
      Values want;
      for (size_t i = 0; i < a.size(); ++i)
        want.push_back(wrapInto(c.f(a[i], b[i]), c.type));
      EXPECT_EQ(out[0].toDoubles(), want) << (folded ? "folded at import" : "at run time");
    }
  }
  // Casts to narrow types wrap too (a float truncated first, as C++ converts).
  Values x;
  for (int i = 0; i < 64; ++i)
    x.push_back(double(float(draw(-1000, 1000))));
  for (int type : {TensorProto::UINT8, TensorProto::INT8, TensorProto::INT16}) {
    NodeModel m("Cast", 13, {"x"}, {"y"});
    m.input("x", shape, TensorProto::FLOAT);
    addInt(*m.node, "to", type);
    std::vector<rt::HostTensor> out = m.run({tensorOf(DType::f32, shape, x)});
    ASSERT_EQ(out.size(), 1u);
    Values want;
    for (double v : x)
      want.push_back(wrapInto(std::trunc(v), type));
    EXPECT_EQ(out[0].toDoubles(), want);
  }
}

TEST(OnnxQuantize, DequantizedConstantsFoldForOpsThatNeedThemAtImport) {
  // A QDQ export quantizes a Pad's value too: Pad needs it at import time.
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  double q = std::floor(draw(0, 256, 0)), zero = std::floor(draw(0, 256, 0));
  float scale = float(draw(0.01, 0.1, 0));
  NodeModel m("DequantizeLinear", 13, {"q", "scale", "zero"}, {"value"});
  m.graph.clear_output();
  m.graph.add_output()->set_name("y");
  addNode(m.graph, "Pad", {"x", "pads", "value"}, {"y"});
  m.input("x", {2, 3}, TensorProto::FLOAT);
  addTyped(m.graph, "q", {}, {q}, TensorProto::UINT8);
  addInitializer(m.graph, "scale", {}, {scale}, TensorProto::FLOAT);
  addTyped(m.graph, "zero", {}, {zero}, TensorProto::UINT8);
  addInt64Initializer(m.graph, "pads", {0, 1, 1, 0});
  Values x;
  for (int i = 0; i < 6; ++i)
    x.push_back(double(float(draw(-1, 1))));
  std::vector<rt::HostTensor> out = m.run({tensorOf(DType::f32, {2, 3}, x)});
  ASSERT_EQ(out.size(), 1u);
  double v = double(float(q - zero) * scale);
  EXPECT_EQ(out[0].toDoubles(), (Values{v, x[0], x[1], x[2], v, x[3], x[4], x[5], v, v, v, v}));
}

TEST(OnnxQuantize, LargeQuantizedWeightsDequantizeAtImport) {
  // A QDQ export's int8 filters past the importer's known-value size (300 x 260, one scale and
  // zero point per row), dequantized into an f32 constant at import time, plus a run-time x.
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  Ints shape = {300, 260};
  Values w = integers(elementCount(shape), TensorProto::INT8);
  Values zero = integers(300, TensorProto::INT8, std::pair(-20, 20)), scales;
  for (int i = 0; i < 300; ++i)
    scales.push_back(double(float(draw(0.001, 0.01, 0))));
  NodeModel m("DequantizeLinear", 13, {"w", "scale", "zero"}, {"weight"});
  m.graph.clear_output();
  m.graph.add_output()->set_name("y");
  addNode(m.graph, "Add", {"x", "weight"}, {"y"});
  addInt(*m.node, "axis", 0);
  m.input("x", {260}, TensorProto::FLOAT);
  addTyped(m.graph, "w", shape, w, TensorProto::INT8);
  addInitializer(m.graph, "scale", {300}, scales, TensorProto::FLOAT);
  addTyped(m.graph, "zero", {300}, zero, TensorProto::INT8);
  Values x;
  for (int i = 0; i < 260; ++i)
    x.push_back(double(float(draw(-1, 1))));
  std::vector<rt::HostTensor> out = m.run({tensorOf(DType::f32, {260}, x)});
  ASSERT_EQ(out.size(), 1u);
  Values want;
  for (int64_t i = 0; i < elementCount(shape); ++i) {
    size_t row = size_t(i / 260);
    want.push_back(
        double(float(x[size_t(i % 260)]) + float(w[size_t(i)] - zero[row]) * float(scales[row])));
  }
  EXPECT_EQ(out[0].toDoubles(), want);
}

/// f32 `v` quantized as ONNX Runtime's QuantizeLinear does (v / scale rounded half to even,
/// plus the zero point, saturated to `type`).
double quantizeRef(float v, float scale, double zeroPoint, int type) {
  auto [lo, hi] = rangeOf(type);
  return std::clamp(roundEven(v / scale) + zeroPoint, double(lo), double(hi));
}

TEST(OnnxQuantize, MicrosoftQuantizedOpsQuantizeTheirFloatOps) {
  // com.microsoft's ops of ONNX Runtime's QOperator format, per tensor: each against its float
  // op on the dequantized inputs, quantized. Add, Mul, Concat and QGemm compute exactly as the
  // reference (exact equality); Sigmoid, Softmax and the average pool go through exp, a
  // division or a mean, which may round a last bit apart and so move a value sitting on a
  // rounding boundary by one level (at most 1 in 50 here).
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  int u8 = TensorProto::UINT8;
  Ints shape = {2, 3, 4};
  Values a = integers(24, u8), b = integers(4, u8);
  float sa = float(draw(0.01, 0.05, 0)), sb = float(draw(0.01, 0.05, 0)),
        sy = float(draw(0.02, 0.1, 0));
  double za = std::floor(draw(0, 256, 0)), zb = std::floor(draw(0, 256, 0)),
         zy = std::floor(draw(64, 192, 0));
  auto dq = [](double q, double z, float s) { return float(q - z) * s; };
  struct Case {
    const char *op;
    std::vector<std::string> inputs;
    bool exact;
    std::function<Values()> reference;
    std::function<void(NodeModel &)> extra = {};
  };
  auto elementwise = [&](auto f) {
    Values want;
    for (size_t i = 0; i < a.size(); ++i)
      want.push_back(quantizeRef(f(dq(a[i], za, sa), dq(b[i % 4], zb, sb)), sy, zy, u8));
    return want;
  };
  std::vector<Case> cases = {
      {"QLinearAdd",
       {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"},
       true,
       [&] { return elementwise([](float x, float y) { return x + y; }); }},
      {"QLinearMul",
       {"a", "sa", "za", "b", "sb", "zb", "sy", "zy"},
       true,
       [&] { return elementwise([](float x, float y) { return x * y; }); }},
      {"QLinearLeakyRelu",
       {"a", "sa", "za", "sy", "zy"},
       true,
       [&] { return elementwise([](float x, float) { return x < 0 ? x * 0.25f : x; }); },
       [](NodeModel &m) { addFloats(*m.node, "alpha", {0.25}, true); }},
      {"QLinearSigmoid",
       {"a", "sa", "za", "sy", "zy"},
       false,
       [&] { return elementwise([&](float x, float) { return 1.0f / (1.0f + std::exp(-x)); }); }},
      {"QLinearConcat",
       {"sy", "zy", "a", "sa", "za", "a", "sb", "zb"},
       true,
       [&] {
         Values want;
         for (int64_t o = 0; o < 2; ++o)
           for (int part = 0; part < 2; ++part)
             for (int64_t k = 0; k < 12; ++k) {
               double q = a[size_t(o * 12 + k)];
               want.push_back(quantizeRef(part ? dq(q, zb, sb) : dq(q, za, sa), sy, zy, u8));
             }
         return want;
       },
       [](NodeModel &m) { addInt(*m.node, "axis", 1); }},
      {"QLinearSoftmax",
       {"a", "sa", "za", "sy", "zy"},
       false,
       [&] {
         Values want;
         for (size_t row = 0; row < 6; ++row) {
           float top = -INFINITY, sum = 0;
           for (size_t k = 0; k < 4; ++k)
             top = std::max(top, dq(a[row * 4 + k], za, sa));
           for (size_t k = 0; k < 4; ++k)
             sum += std::exp(dq(a[row * 4 + k], za, sa) - top);
           for (size_t k = 0; k < 4; ++k)
             want.push_back(
                 quantizeRef(std::exp(dq(a[row * 4 + k], za, sa) - top) / sum, 1.0f / 256, 0, u8));
         }
         return want;
       },
       [](NodeModel &m) { addInt(*m.node, "opset", 13); }},
      {"QLinearGlobalAveragePool",
       {"a", "sa", "za", "sy", "zy"},
       false,
       [&] {
         Values want; // [2, 3, 4] is N, C and one spatial axis
         for (size_t p = 0; p < 6; ++p) {
           float sum = 0;
           for (size_t k = 0; k < 4; ++k)
             sum += dq(a[p * 4 + k], za, sa);
           want.push_back(quantizeRef(sum / 4, sy, zy, u8));
         }
         return want;
       }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op);
    NodeModel m(c.op, 13, c.inputs, {"y"});
    m.node->set_domain("com.microsoft");
    auto *opset = m.model.add_opset_import();
    opset->set_domain("com.microsoft");
    opset->set_version(1);
    m.input("a", shape, u8);
    bool hasB = std::find(c.inputs.begin(), c.inputs.end(), "b") != c.inputs.end();
    if (hasB)
      addTyped(m.graph, "b", {4}, b, u8);
    bool softmax = std::string(c.op) == "QLinearSoftmax";
    addInitializer(m.graph, "sa", {}, {sa}, TensorProto::FLOAT);
    addInitializer(m.graph, "sb", {}, {sb}, TensorProto::FLOAT);
    addInitializer(m.graph, "sy", {}, {softmax ? 1.0 / 256 : sy}, TensorProto::FLOAT);
    addTyped(m.graph, "za", {}, {za}, u8);
    addTyped(m.graph, "zb", {}, {zb}, u8);
    addTyped(m.graph, "zy", {}, {softmax ? 0.0 : zy}, u8);
    if (c.extra)
      c.extra(m);
    std::vector<rt::HostTensor> out = m.run({tensorOf(DType::i32, shape, a)});
    ASSERT_EQ(out.size(), 1u);
    Values got = out[0].toDoubles(), want = c.reference();
    ASSERT_EQ(got.size(), want.size());
    if (c.exact) {
      EXPECT_EQ(got, want);
      continue;
    }
    int off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LE(std::abs(got[i] - want[i]), 1) << "element " << i;
      off += got[i] != want[i];
    }
    EXPECT_LE(off * 50, int(got.size()) + 49) << off << " of " << got.size() << " one level off";
  }

  // QGemm: A [3, 5] times B^T (B [4, 5] int8, per-row scales: B's columns after transB), plus
  // an INT32 bias at a_scale * b_scale, quantized.
  Values qa = integers(15, u8), qb = integers(20, TensorProto::INT8),
         bias = integers(4, TensorProto::INT8);
  Values sbs;
  for (int i = 0; i < 4; ++i)
    sbs.push_back(double(float(draw(0.01, 0.05, 0))));
  NodeModel m("QGemm", 13, {"a", "sa", "za", "b", "sb", "zb", "c", "sy", "zy"}, {"y"});
  m.node->set_domain("com.microsoft");
  addInt(*m.node, "transB", 1);
  auto *opset = m.model.add_opset_import();
  opset->set_domain("com.microsoft");
  opset->set_version(1);
  m.input("a", {3, 5}, u8);
  addInitializer(m.graph, "sa", {}, {sa}, TensorProto::FLOAT);
  addTyped(m.graph, "za", {}, {za}, u8);
  addTyped(m.graph, "b", {4, 5}, qb, TensorProto::INT8);
  addInitializer(m.graph, "sb", {4}, sbs, TensorProto::FLOAT);
  addTyped(m.graph, "zb", {4}, {0, 0, 0, 0}, TensorProto::INT8);
  addTyped(m.graph, "c", {4}, bias, TensorProto::INT32);
  addInitializer(m.graph, "sy", {}, {sy}, TensorProto::FLOAT);
  addTyped(m.graph, "zy", {}, {zy}, u8);
  std::vector<rt::HostTensor> out = m.run({tensorOf(DType::i32, {3, 5}, qa)});
  ASSERT_EQ(out.size(), 1u);
  Values want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double sum = 0; // exact: products of dequantized 8-bit values, summed in double
      for (int k = 0; k < 5; ++k)
        sum += double(dq(qa[size_t(i * 5 + k)], za, sa)) *
               double(float(qb[size_t(j * 5 + k)]) * float(sbs[size_t(j)]));
      float y = float(sum) + float(bias[size_t(j)]) * (sa * float(sbs[size_t(j)]));
      want.push_back(quantizeRef(y, sy, zy, u8));
    }
  Values got = out[0].toDoubles();
  int off = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs(got[i] - want[i]), 1) << "element " << i;
    off += got[i] != want[i];
  }
  EXPECT_LE(off, 1) << "QGemm: " << off << " of 12 one level off";
}

TEST(OnnxQuantize, BadQuantizationParametersAreNamed) {
  {
    NodeModel m("QuantizeLinear", 13, {"x", "scale", "zero_point"}, {"y"});
    m.input("x", {2, 5}, TensorProto::FLOAT);
    addInitializer(m.graph, "scale", {4}, {0.1, 0.1, 0.1, 0.1}, TensorProto::FLOAT);
    addTyped(m.graph, "zero_point", {4}, {1, 2, 3, 4}, TensorProto::UINT8);
    std::string error = m.importError();
    EXPECT_NE(error.find("y_scale is [4]"), std::string::npos) << error;
    EXPECT_NE(error.find("needs [5]"), std::string::npos) << error;
  }
  {
    NodeModel m("MatMulInteger", 10, {"a", "b"}, {"y"});
    m.input("a", {2, 3}, TensorProto::FLOAT);
    m.input("b", {3, 2}, TensorProto::UINT8);
    std::string error = m.importError();
    EXPECT_NE(error.find("A is f32, expected an 8- or 16-bit integer"), std::string::npos) << error;
  }
  {
    NodeModel m("QuantizeLinear", 19, {"x", "scale", "zero_point"}, {"y"});
    m.input("x", {2, 5}, TensorProto::FLOAT);
    addInitializer(m.graph, "scale", {}, {0.1}, TensorProto::FLOAT);
    TensorProto *zp = m.graph.add_initializer();
    zp->set_name("zero_point");
    zp->set_data_type(17); // FLOAT8E4M3FN, newer than Debian's libonnx names
    zp->set_raw_data(std::string(1, '\0'));
    std::string error = m.importError();
    EXPECT_NE(error.find("'zero_point' has element type type 17"), std::string::npos) << error;
  }
}

} // namespace
} // namespace smelt::test
