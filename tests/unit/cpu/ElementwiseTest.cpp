// Elementwise ops, each compiled as a kernel of its own (the pipeline without fusion), against
// float64 references: every unary and binary op in every dtype the op allows, each compare
// direction (with ties), select, convert between dtype pairs (rounding, truncation, saturation,
// NaN), and the defined results of integer edge cases. The verifier rejects dtypes and shapes an
// op does not take (tests/ir/invalid.mlir).
#include "FusionTestUtil.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace smelt::rt::test {
namespace {

const std::vector<DType> kFloats = {DType::f32, DType::f16, DType::bf16, DType::f64};
const std::vector<DType> kNumbers = {DType::f32, DType::f16, DType::bf16,
                                     DType::f64, DType::i32, DType::i64};
const std::vector<int64_t> kShape = {5, 13};

struct UnaryCase {
  const char *op;
  double (*ref)(double);
  bool floatOnly;
  double lo, hi; // the input domain
};

const UnaryCase kUnary[] = {
    {"neg", [](double x) { return -x; }, false, -2, 2},
    {"abs", [](double x) { return std::fabs(x); }, false, -2, 2},
    {"relu", [](double x) { return x < 0 ? 0.0 : x; }, false, -2, 2},
    {"exp", [](double x) { return std::exp(x); }, true, -3, 3},
    {"log", [](double x) { return std::log(x); }, true, 0.1, 4},
    {"tanh", [](double x) { return std::tanh(x); }, true, -3, 3},
    {"logistic", [](double x) { return 1 / (1 + std::exp(-x)); }, true, -4, 4},
    {"sqrt", [](double x) { return std::sqrt(x); }, true, 0.1, 4},
    {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, true, 0.1, 4},
    {"erf", [](double x) { return std::erf(x); }, true, -2, 2},
    {"sin", [](double x) { return std::sin(x); }, true, -10, 10},
    {"cos", [](double x) { return std::cos(x); }, true, -10, 10},
};

TEST(Elementwise, EveryUnaryOpInEveryDtype) {
  for (const UnaryCase &c : kUnary)
    for (DType dtype : c.floatOnly ? kFloats : kNumbers) {
      double scale = isFloat(dtype) ? 1 : 25; // integers: a wider range, rounded
      HostTensor x = randomTensor(dtype, kShape, [&] { return draw(c.lo, c.hi) * scale; });
      std::vector<double> ref;
      for (double v : x.toDoubles())
        ref.push_back(c.ref(v));
      expectClose(runKernelOp(c.op, {x}, x.type()), ref, c.op);
    }
}

struct BinaryCase {
  const char *op;
  double (*ref)(double, double);
  bool floatOnly;
};

const BinaryCase kBinary[] = {
    {"add", [](double a, double b) { return a + b; }, false},
    {"sub", [](double a, double b) { return a - b; }, false},
    {"mul", [](double a, double b) { return a * b; }, false},
    {"div", [](double a, double b) { return a / b; }, false},
    {"max", [](double a, double b) { return std::max(a, b); }, false},
    {"min", [](double a, double b) { return std::min(a, b); }, false},
    {"pow", [](double a, double b) { return std::pow(a, b); }, true},
};

TEST(Elementwise, EveryBinaryOpInEveryDtype) {
  for (const BinaryCase &c : kBinary)
    for (DType dtype : c.floatOnly ? kFloats : kNumbers) {
      bool isPow = std::string(c.op) == "pow";
      HostTensor a = randomTensor(dtype, kShape,
                                  isPow ? [] { return draw(0.2, 3); } : std::function<double()>());
      HostTensor b = randomTensor(dtype, kShape);
      std::vector<double> x = a.toDoubles(), y = b.toDoubles(), ref;
      for (size_t i = 0; i < x.size(); ++i) {
        double r = c.ref(x[i], y[i]);
        ref.push_back(isFloat(dtype) ? r : std::trunc(r)); // integer division truncates
      }
      expectClose(runKernelOp(c.op, {a, b}, a.type()), ref, c.op);
    }
}

TEST(Elementwise, IntegerEdgeCasesAreDefined) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  HostTensor a = HostTensor::fromVector<int32_t>({4}, {7, -7, kMin, kMin});
  HostTensor b = HostTensor::fromVector<int32_t>({4}, {0, 2, -1, 1});
  TensorType type = a.type();
  // x/0 is 0; INT_MIN / -1 wraps to INT_MIN instead of trapping; division truncates.
  EXPECT_EQ(runKernelOp("div", {a, b}, type).toDoubles(), (std::vector<double>{0, -3, kMin, kMin}));
  EXPECT_EQ(runKernelOp("abs", {a}, type).toDoubles(), (std::vector<double>{7, 7, kMin, kMin}));
  EXPECT_EQ(runKernelOp("neg", {a}, type).toDoubles(), (std::vector<double>{-7, 7, kMin, kMin}));
  EXPECT_EQ(runKernelOp("add", {a, a}, type).toDoubles(), (std::vector<double>{14, -14, 0, 0}))
      << "addition wraps";
}

TEST(Elementwise, MaxAndMinPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor a = HostTensor::fromVector<float>({3}, {nan, 1, 2});
  HostTensor b = HostTensor::fromVector<float>({3}, {1, nan, 3});
  for (const char *op : {"max", "min"}) {
    std::vector<double> got = runKernelOp(op, {a, b}, a.type()).toDoubles();
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1])) << op;
    EXPECT_EQ(got[2], std::string(op) == "max" ? 3 : 2) << op;
  }
}

TEST(Elementwise, CompareEveryDirectionWithTies) {
  struct Direction {
    const char *name;
    bool (*ref)(double, double);
  };
  const Direction directions[] = {{"eq", [](double a, double b) { return a == b; }},
                                  {"ne", [](double a, double b) { return a != b; }},
                                  {"lt", [](double a, double b) { return a < b; }},
                                  {"le", [](double a, double b) { return a <= b; }},
                                  {"gt", [](double a, double b) { return a > b; }},
                                  {"ge", [](double a, double b) { return a >= b; }}};
  for (DType dtype :
       {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::i1}) {
    HostTensor a = randomTensor(dtype, kShape);
    std::vector<double> x = a.toDoubles(), yv = randomTensor(dtype, kShape).toDoubles();
    for (size_t i = 0; i < yv.size(); i += 3) // every third pair ties
      yv[i] = x[i];
    HostTensor b = HostTensor::fromDoubles(a.type(), yv);
    for (const Direction &d : directions) {
      std::vector<double> ref;
      for (size_t i = 0; i < x.size(); ++i)
        ref.push_back(d.ref(x[i], yv[i]));
      expectClose(runKernelOp("compare", {a, b}, {DType::i1, kShape}, {{"direction", d.name}}), ref,
                  std::string("compare ") + d.name + " " + std::string(dtypeName(dtype)));
    }
  }
}

TEST(Elementwise, SelectInSeveralDtypes) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i64, DType::i1}) {
    HostTensor pred = randomTensor(DType::i1, kShape);
    HostTensor onTrue = randomTensor(dtype, kShape), onFalse = randomTensor(dtype, kShape);
    std::vector<double> p = pred.toDoubles(), t = onTrue.toDoubles(), f = onFalse.toDoubles(), ref;
    for (size_t i = 0; i < p.size(); ++i)
      ref.push_back(p[i] != 0 ? t[i] : f[i]);
    expectClose(runKernelOp("select", {pred, onTrue, onFalse}, onTrue.type()), ref,
                "select " + std::string(dtypeName(dtype)), 0);
  }
}

/// The value `convert` must produce from double `x` (already exact in the source dtype).
double convertedRef(double x, DType to) {
  auto saturate = [&](double lo, double hi) {
    return std::isnan(x) ? 0.0 : x <= lo ? lo : x >= hi ? hi : std::trunc(x);
  };
  switch (to) {
  case DType::f32:
    return double(float(x));
  case DType::f16:
    return double(float(static_cast<_Float16>(x)));
  case DType::bf16:
    return double(float(BFloat16(floatRoundedToOdd(x))));
  case DType::f64:
    return x;
  case DType::i32:
    return saturate(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  case DType::i64:
    return saturate(-0x1p63, 0x1p63); // INT64_MAX reads back as the double 2^63
  case DType::i1:
    return x != 0;
  }
  return 0;
}

TEST(Elementwise, ConvertBetweenDtypePairs) {
  const std::pair<DType, DType> pairs[] = {
      {DType::f32, DType::f16},  {DType::f32, DType::bf16}, {DType::f32, DType::i32},
      {DType::f32, DType::i64},  {DType::f32, DType::i1},   {DType::f64, DType::f32},
      {DType::f64, DType::f16},  {DType::f64, DType::bf16}, {DType::f64, DType::i64},
      {DType::f16, DType::bf16}, {DType::bf16, DType::f64}, {DType::i32, DType::f32},
      {DType::i64, DType::f16},  {DType::i32, DType::i64},  {DType::i64, DType::i32},
      {DType::i1, DType::f32},   {DType::i32, DType::i1}};
  for (auto [from, to] : pairs) {
    HostTensor x = randomTensor(from, kShape, [] { return draw(-300, 300); });
    std::vector<double> ref;
    for (double v : x.toDoubles())
      ref.push_back(from == DType::i64 && to == DType::i32 ? double(int32_t(int64_t(v)))
                                                           : convertedRef(v, to));
    expectClose(runKernelOp("convert", {x}, {to, kShape}), ref,
                fmt::format("convert {} -> {}", dtypeName(from), dtypeName(to)), 0);
  }
}

TEST(Elementwise, FloatToIntegerTruncatesAndSaturates) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {2.7f,      -2.7f,         3e9f,           -3e9f, nan,   INFINITY,
                               -INFINITY, 2147483520.0f, -2147483648.0f, 0.5f,  -0.0f, 1e20f};
  HostTensor x = HostTensor::fromVector<float>({int64_t(values.size())}, values);
  for (DType to : {DType::i32, DType::i64, DType::i1}) {
    std::vector<double> ref;
    for (float v : values)
      ref.push_back(convertedRef(v, to));
    EXPECT_EQ(runKernelOp("convert", {x}, {to, x.type().shape}).toDoubles(), ref) << dtypeName(to);
  }
}

} // namespace
} // namespace smelt::rt::test
