// Fusions as a whole on the CPU: the contiguous case vectorizes, multi-output and diamond
// bodies, sizes large enough for threads, NaN propagation, integer and rounding edge cases,
// and the compile() path with smelt-fuse.
#include "FusionTestUtil.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "codegen/cpu/CpuKernels.h"

#include "mlir/Parser/Parser.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>

namespace smelt::rt::test {
namespace {

const char *kChain = R"(
func.func @f(%x: ${T}, %y: ${T}) -> ${T} {
  %r = smelt.fusion loop (%x, %y) : (${T}, ${T}) -> ${T} {
  ^bb0(%a: ${T}, %b: ${T}):
    %c = smelt.constant dense<0.5> : ${T}
    %0 = smelt.mul %a, %c : ${T}
    %1 = smelt.add %0, %b : ${T}
    %2 = smelt.max %1, %c : ${T}
    %3 = smelt.exp %2 : ${T}
    smelt.yield %3 : ${T}
  }
  return %r : ${T}
}
)";

TEST(Fusion, ContiguousLoopVectorizes) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    std::string text = substitute(kChain, {{"T", tensorType({1000}, dtype)}});
    std::optional<Compiled> compiled = compileBoth(text);
    ASSERT_TRUE(compiled && compiled->fused.cpu);
    const std::string &ir = compiled->fused.cpu->llvmIR;
    if (std::getenv("SMELT_DUMP_IR"))
      std::printf("%s\n", ir.c_str());
    // Vector loads of the element type: the loop vectorizer fired.
    // f16 loads fold the bitcast: <N x half>.
    std::string element = dtype == DType::f32 ? "float" : "(i16|half)";
    EXPECT_TRUE(std::regex_search(ir, std::regex("load <(4|8|16|32) x " + element + ">")))
        << dtypeName(dtype) << " kernel did not vectorize:\n"
        << ir;
    EXPECT_EQ(ir.find("call float @expf"), std::string::npos) << "exp was not approximated";
    expectFusedMatchesUnfused(text, {randomTensor(dtype, {1000}), randomTensor(dtype, {1000})},
                              std::string(dtypeName(dtype)));
  }
}

const char *kRowSum = R"(
func.func @f(%x: tensor<64x256xf32>) -> tensor<64xf32> {
  %r = smelt.fusion reduction (%x) : (tensor<64x256xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<64x256xf32>):
    %0 = smelt.reduce sum %a axes = [1] : tensor<64x256xf32>
    smelt.yield %0 : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}
)";

TEST(Fusion, RowSumVectorizes) {
  std::optional<Compiled> compiled = compileBoth(kRowSum);
  ASSERT_TRUE(compiled && compiled->fused.cpu);
  const std::string &ir = compiled->fused.cpu->llvmIR;
  EXPECT_TRUE(std::regex_search(ir, std::regex("fadd reassoc <(2|4|8|16) x double>"))) << ir;
  expectFusedMatchesUnfused(kRowSum, {randomTensor(DType::f32, {64, 256})}, "row sum");
}

const char *kMultiOutput = R"(
func.func @f(%x: tensor<5x7xf32>, %y: tensor<5x7xf32>) -> (tensor<5x7xf32>, tensor<5x7xi1>, tensor<5x7xbf16>, tensor<5x7xi32>) {
  %r:4 = smelt.fusion loop (%x, %y) : (tensor<5x7xf32>, tensor<5x7xf32>) -> (tensor<5x7xf32>, tensor<5x7xi1>, tensor<5x7xbf16>, tensor<5x7xi32>) {
  ^bb0(%a: tensor<5x7xf32>, %b: tensor<5x7xf32>):
    %0 = smelt.add %a, %b : tensor<5x7xf32>
    %1 = smelt.compare gt, %0, %a : tensor<5x7xf32>
    %2 = smelt.convert %0 : tensor<5x7xf32> -> tensor<5x7xbf16>
    %3 = smelt.convert %2 : tensor<5x7xbf16> -> tensor<5x7xi32>
    smelt.yield %0, %1, %2, %3 : tensor<5x7xf32>, tensor<5x7xi1>, tensor<5x7xbf16>, tensor<5x7xi32>
  }
  return %r#0, %r#1, %r#2, %r#3 : tensor<5x7xf32>, tensor<5x7xi1>, tensor<5x7xbf16>, tensor<5x7xi32>
}
)";

TEST(Fusion, MultiOutputLoopOfDifferentDTypes) {
  expectFusedMatchesUnfused(kMultiOutput,
                            {randomTensor(DType::f32, {5, 7}, [] { return draw(-300, 300); }),
                             randomTensor(DType::f32, {5, 7}, [] { return draw(-300, 300); })},
                            "multi-output");
}

// %e feeds two ops that meet again: it is computed once per element.
const char *kDiamond = R"(
func.func @f(%x: tensor<300xf32>, %y: tensor<300xf32>) -> tensor<300xf32> {
  %r = smelt.fusion loop (%x, %y) : (tensor<300xf32>, tensor<300xf32>) -> tensor<300xf32> {
  ^bb0(%a: tensor<300xf32>, %b: tensor<300xf32>):
    %e = smelt.tanh %a : tensor<300xf32>
    %l = smelt.mul %e, %b : tensor<300xf32>
    %g = smelt.logistic %e : tensor<300xf32>
    %s = smelt.add %l, %g : tensor<300xf32>
    %o = smelt.div %s, %g : tensor<300xf32>
    smelt.yield %o : tensor<300xf32>
  }
  return %r : tensor<300xf32>
}
)";

TEST(Fusion, DiamondComputesSharedValuesOnce) {
  std::optional<Compiled> compiled = compileBoth(kDiamond);
  ASSERT_TRUE(compiled);
  expectFusedMatchesUnfused(
      kDiamond, {randomTensor(DType::f32, {300}), randomTensor(DType::f32, {300})}, "diamond");
}

const char *kLarge = R"(
func.func @f(%x: tensor<1024x600xf32>, %b: tensor<600xf32>) -> (tensor<1024x600xf32>, tensor<1024xf32>, tensor<600xf32>, tensor<f32>) {
  %y = smelt.fusion loop (%x, %b) : (tensor<1024x600xf32>, tensor<600xf32>) -> tensor<1024x600xf32> {
  ^bb0(%a: tensor<1024x600xf32>, %c: tensor<600xf32>):
    %0 = smelt.broadcast_in_dim %c, dims = [1] : tensor<600xf32> -> tensor<1024x600xf32>
    %1 = smelt.add %a, %0 : tensor<1024x600xf32>
    %2 = smelt.relu %1 : tensor<1024x600xf32>
    smelt.yield %2 : tensor<1024x600xf32>
  }
  %rows = smelt.fusion reduction (%y) : (tensor<1024x600xf32>) -> tensor<1024xf32> {
  ^bb0(%a: tensor<1024x600xf32>):
    %0 = smelt.reduce sum %a axes = [1] : tensor<1024x600xf32>
    smelt.yield %0 : tensor<1024xf32>
  }
  %columns = smelt.fusion reduction (%x) : (tensor<1024x600xf32>) -> tensor<600xf32> {
  ^bb0(%a: tensor<1024x600xf32>):
    %0 = smelt.reduce max %a axes = [0] : tensor<1024x600xf32>
    smelt.yield %0 : tensor<600xf32>
  }
  %all = smelt.fusion reduction (%x) : (tensor<1024x600xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<1024x600xf32>):
    %0 = smelt.reduce sum %a axes = [0, 1] : tensor<1024x600xf32>
    smelt.yield %0 : tensor<f32>
  }
  return %y, %rows, %columns, %all : tensor<1024x600xf32>, tensor<1024xf32>, tensor<600xf32>, tensor<f32>
}
)";

TEST(Fusion, LargeKernelsSplitOverThreads) {
  // 614400 elements: past the executor's 64K threshold, so loop and reductions take ranges on
  // every thread of the pool (the full reduction has one unit and runs inline).
  expectFusedMatchesUnfused(
      kLarge, {randomTensor(DType::f32, {1024, 600}), randomTensor(DType::f32, {600})}, "large");
}

const char *kNaN = R"(
func.func @f(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xi32>, tensor<8xf16>, tensor<8xi1>, tensor<8xi1>) {
  %r:7 = smelt.fusion loop (%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xi32>, tensor<8xf16>, tensor<8xi1>, tensor<8xi1>) {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %0 = smelt.max %a, %b : tensor<8xf32>
    %1 = smelt.min %a, %b : tensor<8xf32>
    %2 = smelt.relu %a : tensor<8xf32>
    %3 = smelt.convert %a : tensor<8xf32> -> tensor<8xi32>
    %4 = smelt.convert %a : tensor<8xf32> -> tensor<8xf16>
    %5 = smelt.compare eq, %a, %b : tensor<8xf32>
    %6 = smelt.compare ne, %a, %b : tensor<8xf32>
    smelt.yield %0, %1, %2, %3, %4, %5, %6 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xi32>, tensor<8xf16>, tensor<8xi1>, tensor<8xi1>
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xi32>, tensor<8xf16>, tensor<8xi1>, tensor<8xi1>
}
)";

const char *kNaNReduce = R"(
func.func @f(%x: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %r:3 = smelt.fusion reduction (%x) : (tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  ^bb0(%a: tensor<3x4xf32>):
    %0 = smelt.reduce max %a axes = [1] : tensor<3x4xf32>
    %1 = smelt.reduce min %a axes = [1] : tensor<3x4xf32>
    %2 = smelt.reduce sum %a axes = [1] : tensor<3x4xf32>
    smelt.yield %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
)";

TEST(Fusion, NaNPropagates) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = INFINITY;
  HostTensor x = HostTensor::fromDoubles({DType::f32, {8}}, {nan, 1, nan, -2, 3, nan, -inf, inf});
  HostTensor y = HostTensor::fromDoubles({DType::f32, {8}}, {1, nan, nan, 5, -3, 0.5, nan, 2});
  std::vector<HostTensor> out = expectFusedMatchesUnfused(kNaN, {x, y}, "NaN");
  ASSERT_EQ(out.size(), 7u);
  auto isNaN = [](const HostTensor &t) {
    std::vector<bool> flags;
    for (double v : t.toDoubles())
      flags.push_back(std::isnan(v));
    return flags;
  };
  const std::vector<bool> eitherNaN = {true, true, true, false, false, true, true, false};
  EXPECT_EQ(isNaN(out[0]), eitherNaN) << "max propagates NaN from either side";
  EXPECT_EQ(isNaN(out[1]), eitherNaN) << "min propagates NaN from either side";
  EXPECT_EQ(isNaN(out[2]), isNaN(x)) << "relu keeps NaN";
  EXPECT_EQ(out[3].toDoubles(),
            (std::vector<double>{0, 1, 0, -2, 3, 0, -2147483648.0, 2147483647.0}))
      << "NaN converts to 0, infinities saturate";
  EXPECT_EQ(isNaN(out[4]), isNaN(x)) << "NaN stays NaN in f16";
  EXPECT_EQ(out[5].toDoubles(), std::vector<double>(8, 0.0)) << "NaN == anything is false";
  EXPECT_EQ(out[6].toDoubles(), std::vector<double>(8, 1.0)) << "NaN != anything is true";

  HostTensor rows =
      HostTensor::fromDoubles({DType::f32, {3, 4}}, {1, nan, 3, 4, 5, 6, 7, 8, nan, -1, 2, nan});
  std::vector<HostTensor> reduced = expectFusedMatchesUnfused(kNaNReduce, {rows}, "NaN reduce");
  ASSERT_EQ(reduced.size(), 3u);
  for (const HostTensor &r : reduced)
    EXPECT_EQ(isNaN(r), (std::vector<bool>{true, false, true}));
}

const char *kIntegers = R"(
func.func @f(%x: ${T}, %y: ${T}) -> (${T}, ${T}, ${T}, ${T}, ${T}, ${T}) {
  %r:6 = smelt.fusion loop (%x, %y) : (${T}, ${T}) -> (${T}, ${T}, ${T}, ${T}, ${T}, ${T}) {
  ^bb0(%a: ${T}, %b: ${T}):
    %0 = smelt.div %a, %b : ${T}
    %1 = smelt.add %a, %b : ${T}
    %2 = smelt.mul %a, %a : ${T}
    %3 = smelt.neg %a : ${T}
    %4 = smelt.abs %a : ${T}
    %5 = smelt.sub %b, %a : ${T}
    smelt.yield %0, %1, %2, %3, %4, %5 : ${T}, ${T}, ${T}, ${T}, ${T}, ${T}
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : ${T}, ${T}, ${T}, ${T}, ${T}, ${T}
}
)";

template <typename T> void expectIntegerEdgeCases(DType dtype) {
  using U = std::make_unsigned_t<T>;
  const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  std::vector<T> a = {lo, lo, 7, -7, hi, 5, hi, -9};
  std::vector<T> b = {-1, 0, 0, 2, 1, -1, hi, 4};
  std::vector<int64_t> shape = {int64_t(a.size())};
  std::vector<HostTensor> out = expectFusedMatchesUnfused(
      substitute(kIntegers, {{"T", tensorType(shape, dtype)}}),
      {HostTensor::fromVector<T>(shape, a), HostTensor::fromVector<T>(shape, b)},
      std::string(dtypeName(dtype)) + " edge cases");
  ASSERT_EQ(out.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    T quotient = b[i] == 0 ? T(0) : b[i] == -1 ? T(-U(a[i])) : T(a[i] / b[i]);
    EXPECT_EQ(out[0].data<T>()[i], quotient) << "div #" << i << " (x/0 = 0, MIN/-1 wraps)";
    EXPECT_EQ(out[1].data<T>()[i], T(U(a[i]) + U(b[i]))) << "add wraps #" << i;
    EXPECT_EQ(out[2].data<T>()[i], T(U(a[i]) * U(a[i]))) << "mul wraps #" << i;
    EXPECT_EQ(out[3].data<T>()[i], T(-U(a[i]))) << "neg wraps #" << i;
    EXPECT_EQ(out[4].data<T>()[i], a[i] < 0 ? T(-U(a[i])) : a[i]) << "abs wraps #" << i;
    EXPECT_EQ(out[5].data<T>()[i], T(U(b[i]) - U(a[i]))) << "sub wraps #" << i;
  }
}

TEST(Fusion, IntegerArithmeticWrapsAndDivisionNeverTraps) {
  expectIntegerEdgeCases<int32_t>(DType::i32);
  expectIntegerEdgeCases<int64_t>(DType::i64);
}

const char *kConvert = R"(
func.func @f(%x: ${IN}) -> ${OUT} {
  %r = smelt.fusion loop (%x) : (${IN}) -> ${OUT} {
  ^bb0(%a: ${IN}):
    %0 = smelt.convert %a : ${IN} -> ${OUT}
    smelt.yield %0 : ${OUT}
  }
  return %r : ${OUT}
}
)";

/// Converts `values` (of `from`) to `to` fused and unfused, expects identical results and
/// returns them.
std::vector<double> convertExactly(DType from, DType to, const std::vector<double> &values) {
  std::vector<int64_t> shape = {int64_t(values.size())};
  std::string text =
      substitute(kConvert, {{"IN", tensorType(shape, from)}, {"OUT", tensorType(shape, to)}});
  std::optional<Compiled> compiled = compileBoth(text);
  if (!compiled)
    return {};
  HostTensor input = HostTensor::fromDoubles({from, shape}, values);
  std::vector<HostTensor> fused = runExecutable(compiled->fused, {input});
  std::vector<HostTensor> unfused = runExecutable(compiled->unfused, {input});
  if (fused.size() != 1 || unfused.size() != 1)
    return {};
  std::string what = std::string(dtypeName(from)) + " -> " + std::string(dtypeName(to));
  expectMatch(fused[0], unfused[0], 0.0, what);
  return fused[0].toDoubles();
}

TEST(Fusion, ConvertsRoundExactlyAsTheRuntime) {
  const double inf = INFINITY, tie11 = std::ldexp(1.0, -11), tie8 = std::ldexp(1.0, -8);
  // f16: the largest finite, overflow to Inf, subnormals, ties to even, signed zero.
  EXPECT_EQ(convertExactly(DType::f32, DType::f16,
                           {65519, 65520, 1e-8, 3e-8, 1 + tie11, 1 + 3 * tie11, -0.0, 6.1e-5}),
            (std::vector<double>{65504, inf, 0, std::ldexp(1.0, -24), 1, 1 + 4 * tie11, 0,
                                 std::ldexp(1023.0, -24)}));
  EXPECT_EQ(convertExactly(DType::f32, DType::bf16, {1 + tie8, 1 + 3 * tie8, 3.4e38}),
            (std::vector<double>{1, 1 + 4 * tie8, inf}));
  // Just above a tie in f64: rounding through f32 first would land on the tie and go down.
  EXPECT_EQ(convertExactly(DType::f64, DType::f16, {1 + tie11 + std::ldexp(1.0, -40)}),
            (std::vector<double>{1 + 2 * tie11}));
  EXPECT_EQ(convertExactly(DType::f64, DType::bf16, {1 + tie8 + std::ldexp(1.0, -40)}),
            (std::vector<double>{1 + 2 * tie8}));
  EXPECT_EQ(convertExactly(DType::i64, DType::f16, {2049, 2051, 1e12}),
            (std::vector<double>{2048, 2052, inf}));
  EXPECT_EQ(convertExactly(DType::i64, DType::bf16, {257, 259}), (std::vector<double>{256, 260}));
  EXPECT_EQ(convertExactly(DType::i64, DType::f32, {16777217}), (std::vector<double>{16777216}));
  EXPECT_EQ(convertExactly(DType::i64, DType::i32, {4294967297.0, -2147483649.0}),
            (std::vector<double>{1, 2147483647}));
  // Float to integer truncates toward zero and saturates (NaN -> 0 is in NaNPropagates).
  EXPECT_EQ(convertExactly(DType::f32, DType::i32, {5e9, -5e9, 2147483520, -2.5, 2.5}),
            (std::vector<double>{2147483647, -2147483648.0, 2147483520, -2, 2}));
  std::vector<double> wide = convertExactly(DType::f64, DType::i64, {1e19, -1e19, -7.9});
  ASSERT_EQ(wide.size(), 3u);
  EXPECT_EQ(wide[2], -7);
  EXPECT_EQ(convertExactly(DType::f32, DType::i1, {0.5, -0.0, 2}), (std::vector<double>{1, 0, 1}));
}

const char *kUnary = R"(
func.func @f(%x: ${T}) -> ${T} {
  %r = smelt.fusion loop (%x) : (${T}) -> ${T} {
  ^bb0(%a: ${T}):
    %0 = smelt.${OP} %a : ${T}
    smelt.yield %0 : ${T}
  }
  return %r : ${T}
}
)";

// The polynomial approximations of f32 exp, log, tanh and erf (Lower.cpp) against libm, element
// by element: measured at most 5 units in the last place (tanh near 0.25), 8 allowed.
TEST(Fusion, MathApproximationsStayWithinEightUlpOfLibm) {
  const struct {
    const char *op;
    double lo, hi;
  } cases[] = {{"exp", -87, 88},      {"exp", -1, 1},     {"log", 1e-6, 1e6},
               {"log", 1e-44, 1e-37}, {"tanh", -10, 10},  {"tanh", -0.5, 0.5},
               {"erf", -4, 4},        {"erf", -0.5, 0.5}, {"logistic", -20, 20}};
  const int64_t n = 100000;
  for (const auto &c : cases) {
    std::string text = substitute(kUnary, {{"T", tensorType({n}, DType::f32)}, {"OP", c.op}});
    std::optional<Compiled> compiled = compileBoth(text);
    ASSERT_TRUE(compiled);
    HostTensor x = randomTensor(DType::f32, {n}, [&] { return draw(c.lo, c.hi, 0); });
    std::vector<HostTensor> fused = runExecutable(compiled->fused, {x});
    std::vector<HostTensor> unfused = runExecutable(compiled->unfused, {x});
    ASSERT_EQ(fused.size(), 1u);
    ASSERT_EQ(unfused.size(), 1u);
    const float *got = fused[0].data<float>(), *ref = unfused[0].data<float>();
    float worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
      float ulp = std::fabs(std::nextafter(ref[i], INFINITY) - ref[i]);
      float error = std::fabs(got[i] - ref[i]) / ulp;
      if (error > worst) {
        worst = error;
        at = i;
      }
    }
    EXPECT_LE(worst, 8.0f) << c.op << " on [" << c.lo << ", " << c.hi << "]: " << got[at]
                           << " vs libm " << ref[at] << " at x = " << x.data<float>()[at];
  }
}

TEST(Fusion, MathFunctionsAtSpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = INFINITY;
  std::vector<double> special = {nan, inf, -inf, 0.0, -0.0, 100, -100, -1, 1e-40, 1e30};
  for (const char *op : {"exp", "log", "tanh", "erf", "logistic", "sqrt", "rsqrt", "sin", "cos"})
    for (DType dtype : {DType::f32, DType::f64}) {
      std::vector<int64_t> shape = {int64_t(special.size())};
      std::string text = substitute(kUnary, {{"T", tensorType(shape, dtype)}, {"OP", op}});
      expectFusedMatchesUnfused(text, {HostTensor::fromDoubles({dtype, shape}, special)},
                                std::string(op) + " " + std::string(dtypeName(dtype)));
    }
}

// A softmax written op by op: smelt-fuse (through compile()) forms the kernels.
const char *kSoftmax = R"(
func.func @main(%x: tensor<16x40xf32>, %b: tensor<40xf32>) -> (tensor<16x40xf32>, tensor<16xf32>) {
  %0 = smelt.broadcast_in_dim %b, dims = [1] : tensor<40xf32> -> tensor<16x40xf32>
  %1 = smelt.add %x, %0 : tensor<16x40xf32>
  %2 = smelt.reduce max %1 axes = [1] : tensor<16x40xf32>
  %3 = smelt.broadcast_in_dim %2, dims = [0] : tensor<16xf32> -> tensor<16x40xf32>
  %4 = smelt.sub %1, %3 : tensor<16x40xf32>
  %5 = smelt.exp %4 : tensor<16x40xf32>
  %6 = smelt.reduce sum %5 axes = [1] : tensor<16x40xf32>
  %7 = smelt.broadcast_in_dim %6, dims = [0] : tensor<16xf32> -> tensor<16x40xf32>
  %8 = smelt.div %5, %7 : tensor<16x40xf32>
  return %8, %6 : tensor<16x40xf32>, tensor<16xf32>
}
)";

TEST(Fusion, CompileWithSmeltFuseRunsJitKernels) {
  std::vector<HostTensor> inputs = {randomTensor(DType::f32, {16, 40}),
                                    randomTensor(DType::f32, {40})};
  std::vector<std::vector<HostTensor>> results;
  for (bool fuse : {true, false}) {
    mlir::MLIRContext context;
    codegen::loadDialects(context);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(kSoftmax, mlir::ParserConfig(&context));
    ASSERT_TRUE(module);
    PipelineOptions options;
    options.fuse = fuse;
    mlir::FailureOr<Executable> exe = codegen::compile(*module, "", options);
    ASSERT_TRUE(mlir::succeeded(exe));
    // Unfused, each of the softmax's nine ops is a kernel of its own.
    EXPECT_EQ(exe->kernels.size(), fuse ? 3u : 9u);
    ASSERT_NE(exe->cpu, nullptr);
    EXPECT_EQ(exe->cpu->entries.size(), exe->kernels.size());
    results.push_back(runExecutable(*exe, inputs));
  }
  ASSERT_EQ(results[0].size(), 2u);
  ASSERT_EQ(results[1].size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    expectMatch(results[0][i], results[1][i], 2e-6, "softmax output #" + std::to_string(i));
}

TEST(Fusion, KernelNameCountMismatchIsADiagnostic) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kDiamond, mlir::ParserConfig(&context));
  ASSERT_TRUE(module);
  std::string message;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  EXPECT_TRUE(mlir::failed(codegen::compileCpuKernels(codegen::fusionsInOrder(function), {})));
  EXPECT_NE(message.find("CPU codegen got 0 kernel names for 1 fusions"), std::string::npos)
      << message;
}

} // namespace
} // namespace smelt::rt::test
