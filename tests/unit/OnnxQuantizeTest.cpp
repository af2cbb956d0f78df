// ONNX's quantization ops and narrow integers (frontend/onnx/QuantizeOps.cpp, IntegerTypes.cpp):
// one-node models written with ONNX's protobuf classes, imported, compiled and run on the CPU,
// against references written from the spec and ONNX Runtime's kernels (integer sums in int64,
// requantization in f32, rounding half to even) on fresh random inputs: every narrow type, per
// tensor, per axis and blocked scales, ties, saturation at both ends, zero points per row,
// column and channel, a weight past the importer's known-value size, and 8-bit arithmetic that
// wraps.
#include "OnnxQuantizeTestUtil.h"

#include <fmt/format.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <functional>

namespace smelt::test {
namespace {

struct QuantizeCase {
  int type;
  enum { perTensor, perAxis, blocked, oneBlock } layout;
};

TEST(OnnxQuantize, QuantizeAndDequantizeLinearMatchTheSpec) {
  Ints shape = {3, 5, 7};
  for (int type : {TensorProto::UINT8, TensorProto::INT8, TensorProto::INT16, TensorProto::UINT16})
    for (auto layout : {QuantizeCase::perTensor, QuantizeCase::perAxis, QuantizeCase::blocked,
                        QuantizeCase::oneBlock}) {
      SCOPED_TRACE(fmt::format("{} layout {} (SMELT_TEST_SEED={})",
                               TensorProto::DataType_Name(TensorProto::DataType(type)), int(layout),
                               rngSeed()));
      auto [lo, hi] = rangeOf(type);
      // Scales and zero points per tensor, along axis 1, or in blocks of 3 along axis 2 (or one
      // block of 1000, longer than the axis).
      bool isBlocked = layout == QuantizeCase::blocked || layout == QuantizeCase::oneBlock;
      int64_t axis = isBlocked ? 2 : 1, block = layout == QuantizeCase::oneBlock ? 1000 : 3;
      int64_t blocks = (shape[2] + block - 1) / block;
      Ints paramShape = layout == QuantizeCase::perTensor ? Ints{}
                        : layout == QuantizeCase::perAxis ? Ints{shape[1]}
                                                          : Ints{3, 5, blocks};
      int64_t params = elementCount(paramShape);
      Values scales, zeroPoints = integers(params, type, std::pair(lo / 2, hi / 2));
      for (int64_t p = 0; p < params; ++p)
        scales.push_back(double(float(std::ldexp(1.0, int(draw(-6, 2, 0))))));
      auto paramOf = [&](int64_t i) {
        if (layout == QuantizeCase::perTensor)
          return int64_t(0);
        if (layout == QuantizeCase::perAxis)
          return indexAlong(i, shape, 1);
        return (i / shape[2]) * blocks + indexAlong(i, shape, 2) / block;
      };
      // x: spread past both ends of the range, with exact ties (scales are powers of two).
      Values x;
      double span = double(hi - lo) * 1.4;
      for (int64_t i = 0; i < elementCount(shape); ++i) {
        double s = scales[size_t(paramOf(i))], z = zeroPoints[size_t(paramOf(i))];
        double q = i % 4 == 0 ? std::floor(draw(-40, 40, 0)) + 0.5 : draw(-span, span, 0) - z;
        x.push_back(double(float(q * s)));
      }
      NodeModel q("QuantizeLinear", isBlocked ? 21 : 13, {"x", "scale", "zero_point"}, {"y"});
      q.input("x", shape, TensorProto::FLOAT);
      addInitializer(q.graph, "scale", paramShape, scales, TensorProto::FLOAT);
      addTyped(q.graph, "zero_point", paramShape, zeroPoints, type);
      addInt(*q.node, "axis", axis);
      if (isBlocked)
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
      NodeModel dq("DequantizeLinear", isBlocked ? 21 : 13, {"x", "scale", "zero_point"}, {"y"});
      dq.input("x", shape, type);
      addInitializer(dq.graph, "scale", paramShape, scales, TensorProto::FLOAT);
      addTyped(dq.graph, "zero_point", paramShape, zeroPoints, type, /*raw=*/false);
      addInt(*dq.node, "axis", axis);
      if (isBlocked)
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

TEST(OnnxQuantize, BitShiftOfUnsignedNarrowIntegers) {
  // Shifts of 0 to 20: past the type's width a shift leaves 0, and a left shift drops the bits
  // it moves out, as C++ shifts a uint8_t or uint16_t.
  SCOPED_TRACE(fmt::format("SMELT_TEST_SEED={}", rngSeed()));
  for (int type : {TensorProto::UINT8, TensorProto::UINT16})
    for (const char *direction : {"LEFT", "RIGHT"}) {
      SCOPED_TRACE(
          fmt::format("{} {}", TensorProto::DataType_Name(TensorProto::DataType(type)), direction));
      Values x = integers(64, type), y = integers(64, type, std::pair(0, 20));
      NodeModel m("BitShift", 11, {"x", "y"}, {"z"});
      addString(*m.node, "direction", direction);
      m.input("x", {64}, type);
      m.input("y", {64}, type);
      std::vector<rt::HostTensor> out =
          m.run({tensorOf(DType::i32, {64}, x), tensorOf(DType::i32, {64}, y)});
      ASSERT_EQ(out.size(), 1u);
      uint64_t mask = type == TensorProto::UINT8 ? 0xff : 0xffff;
      Values want;
      for (size_t i = 0; i < x.size(); ++i) {
        uint64_t v = uint64_t(x[i]), s = uint64_t(y[i]);
        want.push_back(double(std::string(direction) == "LEFT" ? (v << s) & mask : v >> s));
      }
      EXPECT_EQ(out[0].toDoubles(), want);
    }
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
