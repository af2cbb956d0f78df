// Every elementwise op built with the builder and compiled for the CPU, against a float64
// reference, for each dtype it takes. The runtime's kernels alone: runtime/ElementwiseTest.cpp.
#include "TestUtil.h"

#include "frontend/Ops.h"

#include <cmath>

namespace smelt::test {
namespace {

using Unary = Tensor (*)(Tensor, Loc);
using Binary = Tensor (*)(Tensor, Tensor, Loc);

struct UnaryCase {
  const char *name;
  Unary build;
  std::function<double(double)> reference;
  double lo, hi; // input range (away from zero)
  bool integers; // also runs on i32 / i64
};

const std::vector<UnaryCase> &unaryCases() {
  static const std::vector<UnaryCase> cases = {
      {"neg", smelt::neg, [](double x) { return -x; }, -3, 3, true},
      {"abs", smelt::abs, [](double x) { return std::abs(x); }, -3, 3, true},
      {"relu", smelt::relu, [](double x) { return x < 0 ? 0.0 : x; }, -3, 3, true},
      {"exp", smelt::exp, [](double x) { return std::exp(x); }, -3, 3, false},
      {"log", smelt::log, [](double x) { return std::log(x); }, 0.1, 5, false},
      {"tanh", smelt::tanh, [](double x) { return std::tanh(x); }, -3, 3, false},
      {"logistic", smelt::logistic, [](double x) { return 1 / (1 + std::exp(-x)); }, -5, 5, false},
      {"sqrt", smelt::sqrt, [](double x) { return std::sqrt(x); }, 0.1, 5, false},
      {"rsqrt", smelt::rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.1, 5, false},
      {"erf", smelt::erf, [](double x) { return std::erf(x); }, -2, 2, false},
      {"sin", smelt::sin, [](double x) { return std::sin(x); }, -10, 10, false},
      {"cos", smelt::cos, [](double x) { return std::cos(x); }, -10, 10, false},
  };
  return cases;
}

const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

/// The float dtypes, and i32/i64 too for ops that take integers.
std::vector<DType> dtypesFor(bool integers) {
  std::vector<DType> dtypes(std::begin(kFloats), std::end(kFloats));
  if (integers)
    dtypes.insert(dtypes.end(), {DType::i32, DType::i64});
  return dtypes;
}

std::vector<double> applyEach(const std::vector<double> &x, const std::function<double(double)> &f) {
  std::vector<double> y;
  for (double v : x)
    y.push_back(f(v));
  return y;
}

TEST(GraphElementwise, UnaryOpsMatchFloat64) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  for (const UnaryCase &c : unaryCases()) {
    for (DType dtype : dtypesFor(c.integers)) {
      SCOPED_TRACE(std::string(c.name) + " dtype " + std::to_string(int(dtype)));
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      g.setOutputs({c.build(g.input("x", {7, 33}, dtype), Loc::current())});
      rt::HostTensor x = randomTensor({7, 33}, dtype, [&] { return draw(c.lo, c.hi); });
      std::vector<rt::HostTensor> out = run(g, {x});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_LE(relError(out[0].toDoubles(), applyEach(x.toDoubles(), c.reference)),
                tolerance(dtype));
    }
  }
}

struct BinaryCase {
  const char *name;
  Binary build;
  std::function<double(double, double)> reference;
  bool integers;
};

TEST(GraphElementwise, BinaryOpsMatchFloat64) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const BinaryCase cases[] = {
      {"add", smelt::add, [](double a, double b) { return a + b; }, true},
      {"sub", smelt::sub, [](double a, double b) { return a - b; }, true},
      {"mul", smelt::mul, [](double a, double b) { return a * b; }, true},
      {"div", smelt::div, [](double a, double b) { return a / b; }, false},
      {"max", smelt::maximum, [](double a, double b) { return std::max(a, b); }, true},
      {"min", smelt::minimum, [](double a, double b) { return std::min(a, b); }, true},
      {"pow", smelt::pow, [](double a, double b) { return std::pow(a, b); }, false},
  };
  for (const BinaryCase &c : cases) {
    for (DType dtype : dtypesFor(c.integers)) {
      SCOPED_TRACE(std::string(c.name) + " dtype " + std::to_string(int(dtype)));
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      Tensor x = g.input("a", {5, 16}, dtype);
      Tensor y = g.input("b", {5, 16}, dtype);
      g.setOutputs({c.build(x, y, Loc::current())});
      bool positive = std::string(c.name) == "pow";
      rt::HostTensor a = randomTensor({5, 16}, dtype, [&] {
        return positive ? draw(0.2, 3) : draw(-3, 3);
      });
      rt::HostTensor b = randomTensor({5, 16}, dtype);
      std::vector<rt::HostTensor> out = run(g, {a, b});
      ASSERT_EQ(out.size(), 1u);
      std::vector<double> av = a.toDoubles(), bv = b.toDoubles(), ref;
      for (size_t i = 0; i < av.size(); ++i)
        ref.push_back(c.reference(av[i], bv[i]));
      EXPECT_LE(relError(out[0].toDoubles(), ref), tolerance(dtype));
    }
  }
}

TEST(GraphElementwise, IntegerDivisionTruncatesAndDivisionByZeroIsZero) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor a = g.input("a", {6}, DType::i32);
  Tensor b = g.input("b", {6}, DType::i32);
  g.setOutputs({smelt::div(a, b)});
  rt::TensorType t{rt::DType::i32, {6}};
  std::vector<rt::HostTensor> out =
      run(g, {rt::HostTensor::fromDoubles(t, {7, -7, 7, 5, -2147483648.0, 9}),
              rt::HostTensor::fromDoubles(t, {2, 2, -2, 0, -1, 3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{3, -3, -3, 0, -2147483648.0, 3}));
}

TEST(GraphElementwise, CompareEachDirection) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  const std::pair<CompareDirection, std::function<bool(double, double)>> directions[] = {
      {CompareDirection::eq, std::equal_to<double>()},
      {CompareDirection::ne, std::not_equal_to<double>()},
      {CompareDirection::lt, std::less<double>()},
      {CompareDirection::le, std::less_equal<double>()},
      {CompareDirection::gt, std::greater<double>()},
      {CompareDirection::ge, std::greater_equal<double>()}};
  for (DType dtype : {DType::f32, DType::i32, DType::bf16}) {
    for (const auto &[direction, reference] : directions) {
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      Tensor x = g.input("a", {40}, dtype);
      Tensor y = g.input("b", {40}, dtype);
      g.setOutputs({compare(x, y, direction)});
      rt::HostTensor a = randomTensor({40}, dtype), b = randomTensor({40}, dtype);
      // Force some equal pairs so eq/le/ge see both outcomes.
      for (int i = 0; i < 40; i += 4)
        std::memcpy(static_cast<uint8_t *>(b.raw()) + i * rt::byteWidth(b.type().dtype),
                    static_cast<uint8_t *>(a.raw()) + i * rt::byteWidth(a.type().dtype),
                    rt::byteWidth(a.type().dtype));
      std::vector<rt::HostTensor> out = run(g, {a, b});
      ASSERT_EQ(out.size(), 1u);
      ASSERT_EQ(out[0].type().dtype, rt::DType::i1);
      std::vector<double> av = a.toDoubles(), bv = b.toDoubles(), got = out[0].toDoubles();
      for (size_t i = 0; i < av.size(); ++i)
        EXPECT_EQ(got[i], reference(av[i], bv[i]) ? 1.0 : 0.0) << "element " << i;
    }
  }
}

TEST(GraphElementwise, SelectPicksByPredicate) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {3, 8});
  Tensor y = g.input("y", {3, 8});
  g.setOutputs({select(compare(x, y, CompareDirection::gt), x, y)});
  rt::HostTensor a = randomTensor({3, 8}, DType::f32), b = randomTensor({3, 8}, DType::f32);
  std::vector<rt::HostTensor> out = run(g, {a, b});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> av = a.toDoubles(), bv = b.toDoubles(), ref;
  for (size_t i = 0; i < av.size(); ++i)
    ref.push_back(std::max(av[i], bv[i]));
  EXPECT_EQ(out[0].toDoubles(), ref);
}

TEST(GraphElementwise, ConvertRoundsTruncatesAndSaturates) {
  mlir::MLIRContext ctx;
  Graph g(ctx, "f");
  Tensor x = g.input("x", {6}, DType::f32);
  g.setOutputs({convert(x, DType::bf16), convert(x, DType::i32), convert(x, DType::i1),
                convert(x, DType::f16), convert(convert(x, DType::f64), DType::i64)});
  // 1 + 2^-8 is halfway between two bf16 values: ties go to even (1.0).
  std::vector<double> values = {1.00390625, -2.7, 3.9e10, -3.9e10, 0.0, 65519.0};
  std::vector<rt::HostTensor> out =
      run(g, {rt::HostTensor::fromDoubles({rt::DType::f32, {6}}, values)});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].at(0), 1.0);
  EXPECT_EQ(out[0].at(1), -2.703125);
  EXPECT_EQ(out[1].toDoubles(), (std::vector<double>{1, -2, 2147483647, -2147483648.0, 0, 65519}));
  EXPECT_EQ(out[2].toDoubles(), (std::vector<double>{1, 1, 1, 1, 0, 1}));
  EXPECT_EQ(out[3].at(5), 65504.0); // largest f16 below the rounding boundary
  EXPECT_TRUE(std::isinf(out[3].at(2)));
  EXPECT_EQ(out[4].at(2), double(float(3.9e10)));
}

TEST(GraphElementwise, ConvertBetweenFloatTypesMatchesReference) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  for (DType from : kFloats)
    for (DType to : kFloats) {
      mlir::MLIRContext ctx;
      Graph g(ctx, "f");
      g.setOutputs({convert(g.input("x", {64}, from), to)});
      rt::HostTensor x = randomTensor({64}, from);
      std::vector<rt::HostTensor> out = run(g, {x});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_LE(relError(out[0].toDoubles(), x.toDoubles()),
                std::max(tolerance(from), tolerance(to)));
    }
}

} // namespace
} // namespace smelt::test
