// Every elementwise op, compare, select, convert, iota and splat constant inside a hand-written
// loop fusion, in every dtype it takes, against the same ops run unfused.
#include "FusionTestUtil.h"

namespace smelt::rt::test {
namespace {

/// One op applied to the fusion's inputs, yielding one result of type ${R}.
const char *kOneOp = R"(
func.func @f(${ARGS}) -> ${R} {
  %r = smelt.fusion loop (${INPUTS}) : (${TYPES}) -> ${R} {
  ^bb0(${BLOCK}):
    %0 = ${OP}
    smelt.yield %0 : ${R}
  }
  return %r : ${R}
}
)";

/// The kOneOp text for `op` (it names block arguments %a, %b, %c) over inputs of `types`.
std::string oneOp(const std::string &op, const std::vector<std::string> &types,
                  const std::string &result) {
  std::string args, inputs, typeList, block;
  for (size_t i = 0; i < types.size(); ++i) {
    std::string sep = i ? ", " : "";
    args += sep + "%x" + std::to_string(i) + ": " + types[i];
    inputs += sep + "%x" + std::to_string(i);
    typeList += sep + types[i];
    block += sep + "%" + char('a' + i) + ": " + types[i];
  }
  return substitute(kOneOp, {{"ARGS", args},
                             {"INPUTS", inputs},
                             {"TYPES", typeList},
                             {"BLOCK", block},
                             {"OP", op},
                             {"R", result}});
}

const std::vector<int64_t> kShape = {7, 33}; // not a multiple of any vector width

struct UnaryCase {
  const char *op;
  double lo, hi;
  bool integers;
};

TEST(FusedOps, UnaryInEveryDType) {
  const UnaryCase cases[] = {{"neg", -3, 3, true},         {"abs", -3, 3, true},
                             {"relu", -3, 3, true},        {"exp", -10, 10, false},
                             {"log", 0.01, 100, false},    {"tanh", -5, 5, false},
                             {"logistic", -10, 10, false}, {"sqrt", 0.01, 100, false},
                             {"rsqrt", 0.01, 100, false},  {"erf", -3, 3, false},
                             {"sin", -100, 100, false},    {"cos", -100, 100, false}};
  for (const UnaryCase &c : cases)
    for (DType dtype : kAllDTypes) {
      if (dtype == DType::i1 || (!isFloat(dtype) && !c.integers))
        continue;
      std::string type = tensorType(kShape, dtype);
      HostTensor x = randomTensor(dtype, kShape, [&] { return draw(c.lo, c.hi); });
      if (!isFloat(dtype))
        x = randomTensor(dtype, kShape);
      expectFusedMatchesUnfused(oneOp(std::string("smelt.") + c.op + " %a : " + type, {type}, type),
                                {x}, std::string(c.op) + " " + type);
    }
}

TEST(FusedOps, BinaryInEveryDType) {
  const struct {
    const char *op;
    bool integers;
  } cases[] = {{"add", true}, {"sub", true}, {"mul", true}, {"div", true},
               {"max", true}, {"min", true}, {"pow", false}};
  for (const auto &c : cases)
    for (DType dtype : kAllDTypes) {
      if (dtype == DType::i1 || (!isFloat(dtype) && !c.integers))
        continue;
      std::string type = tensorType(kShape, dtype), op = c.op;
      bool pow = op == "pow";
      HostTensor a = randomTensor(
          dtype, kShape, pow ? std::function<double()>([] { return draw(0.2, 3); }) : nullptr);
      HostTensor b = randomTensor(dtype, kShape);
      expectFusedMatchesUnfused(oneOp("smelt." + op + " %a, %b : " + type, {type, type}, type),
                                {a, b}, op + " " + type);
    }
}

/// `a` with every third element copied into `b`, so eq/le/ge see equal pairs.
HostTensor withEqualPairs(const HostTensor &a, const HostTensor &b) {
  std::vector<double> av = a.toDoubles(), bv = b.toDoubles();
  for (size_t i = 0; i < bv.size(); i += 3)
    bv[i] = av[i];
  return HostTensor::fromDoubles(b.type(), bv);
}

TEST(FusedOps, CompareEveryDirectionInEveryDType) {
  for (const char *direction : {"eq", "ne", "lt", "le", "gt", "ge"})
    for (DType dtype : kAllDTypes) {
      std::string type = tensorType(kShape, dtype);
      HostTensor a = randomTensor(dtype, kShape);
      HostTensor b = withEqualPairs(a, randomTensor(dtype, kShape));
      expectFusedMatchesUnfused(
          oneOp(std::string("smelt.compare ") + direction + ", %a, %b : " + type, {type, type},
                tensorType(kShape, DType::i1)),
          {a, b}, std::string(direction) + " " + type);
    }
}

TEST(FusedOps, SelectInEveryDType) {
  std::string pred = tensorType(kShape, DType::i1);
  for (DType dtype : kAllDTypes) {
    std::string type = tensorType(kShape, dtype);
    expectFusedMatchesUnfused(
        oneOp("smelt.select %a, %b, %c : " + pred + ", " + type, {pred, type, type}, type),
        {randomTensor(DType::i1, kShape), randomTensor(dtype, kShape), randomTensor(dtype, kShape)},
        "select " + type);
  }
}

/// Values that exercise a convert from `dtype`: fractions, magnitudes past f16's range and
/// past i32's for i64 (which then wraps).
HostTensor convertInput(DType dtype) {
  switch (dtype) {
  case DType::i64:
    return randomTensor(dtype, kShape, [] { return draw(-1e12, 1e12); });
  case DType::i32:
    return randomTensor(dtype, kShape, [] { return draw(-1e5, 1e5); });
  case DType::f16:
  case DType::bf16:
    return randomTensor(dtype, kShape, [] { return draw(-3e4, 3e4, 1e-3); });
  default:
    return randomTensor(dtype, kShape, [] { return draw(-1e5, 1e5, 1e-3); });
  }
}

TEST(FusedOps, ConvertBetweenEveryPairOfDTypes) {
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      std::string in = tensorType(kShape, from), out = tensorType(kShape, to);
      expectFusedMatchesUnfused(oneOp("smelt.convert %a : " + in + " -> " + out, {in}, out),
                                {convertInput(from)}, "convert " + in + " -> " + out);
    }
}

TEST(FusedOps, IotaAlongEachDimensionInEveryDType) {
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::i1)
      continue;
    for (int dim : {0, 1}) {
      std::string type = tensorType(kShape, dtype);
      expectFusedMatchesUnfused(
          oneOp("smelt.iota dim = " + std::to_string(dim) + " : " + type, {}, type), {},
          "iota " + type);
    }
    // Past 2048 (f16) and 256 (bf16) indices round.
    std::string wide = tensorType({5000}, dtype);
    expectFusedMatchesUnfused(oneOp("smelt.iota dim = 0 : " + wide, {}, wide), {}, "iota " + wide);
  }
}

const char *kSplat = R"(
func.func @f(%x: ${T}, %y: ${T}) -> (${T}, ${T}, ${T}) {
  %r:3 = smelt.fusion loop (%x, %y) : (${T}, ${T}) -> (${T}, ${T}, ${T}) {
  ^bb0(%a: ${T}, %b: ${T}):
    %c = smelt.constant dense<${V}> : ${T}
    %s = smelt.constant dense<${V}> : ${S}
    %sb = smelt.broadcast_in_dim %s, dims = [] : ${S} -> ${T}
    %0 = ${USE}
    smelt.yield %c, %0, %sb : ${T}, ${T}, ${T}
  }
  return %r#0, %r#1, %r#2 : ${T}, ${T}, ${T}
}
)";

TEST(FusedOps, SplatConstantsInEveryDType) {
  for (DType dtype : kAllDTypes) {
    std::string type = tensorType(kShape, dtype);
    bool isBool = dtype == DType::i1;
    std::string value = isBool ? "true" : isFloat(dtype) ? "-1.5" : "-7";
    // i1 constants choose (select); number constants scale.
    std::string use =
        isBool ? "smelt.select %c, %a, %b : " + type + ", " + type : "smelt.mul %a, %c : " + type;
    std::string text =
        substitute(kSplat, {{"T", type}, {"S", tensorType({}, dtype)}, {"V", value}, {"USE", use}});
    expectFusedMatchesUnfused(text, {randomTensor(dtype, kShape), randomTensor(dtype, kShape)},
                              "constant " + type);
  }
}

/// Indices of `dtype` into `rows` rows: repeats, and out of range on both sides (clamped).
HostTensor gatherIndices(DType dtype, const std::vector<int64_t> &shape, int64_t rows) {
  HostTensor indices =
      randomTensor(dtype, shape, [rows] { return std::floor(draw(-3, double(rows) + 3, 0)); });
  std::vector<double> values = indices.toDoubles();
  values[0] = -1e9;
  values[1] = 1e9;
  return HostTensor::fromDoubles(indices.type(), values);
}

// An embedding plus a positional table: the gather reads its row from the index element, the
// add broadcasts the positions; and a gather of a table the kernel computes itself (negated),
// so the table is emitted at a data-dependent index too.
const char *kGatherAdd = R"(
func.func @f(%t: tensor<11x3x5x${T}>, %i: tensor<4x6x${I}>, %p: tensor<6x3x5x${T}>)
    -> (tensor<4x6x3x5x${T}>, tensor<4x6x3x5x${T}>) {
  %r:2 = smelt.fusion loop (%t, %i, %p) : (tensor<11x3x5x${T}>, tensor<4x6x${I}>, tensor<6x3x5x${T}>)
      -> (tensor<4x6x3x5x${T}>, tensor<4x6x3x5x${T}>) {
  ^bb0(%a: tensor<11x3x5x${T}>, %b: tensor<4x6x${I}>, %c: tensor<6x3x5x${T}>):
    %g = smelt.gather %a[%b] : tensor<11x3x5x${T}>, tensor<4x6x${I}>
    %pb = smelt.broadcast_in_dim %c, dims = [1, 2, 3] : tensor<6x3x5x${T}> -> tensor<4x6x3x5x${T}>
    %s = smelt.add %g, %pb : tensor<4x6x3x5x${T}>
    %n = smelt.neg %a : tensor<11x3x5x${T}>
    %gn = smelt.gather %n[%b] : tensor<11x3x5x${T}>, tensor<4x6x${I}>
    smelt.yield %s, %gn : tensor<4x6x3x5x${T}>, tensor<4x6x3x5x${T}>
  }
  return %r#0, %r#1 : tensor<4x6x3x5x${T}>, tensor<4x6x3x5x${T}>
}
)";

TEST(FusedOps, GatherFeedingElementwiseInEveryDType) {
  for (DType dtype : kAllDTypes) {
    if (dtype == DType::i1)
      continue;
    for (DType index : {DType::i32, DType::i64}) {
      std::string table(dtypeName(dtype)), indices(dtypeName(index));
      std::string text = substitute(kGatherAdd, {{"T", table}, {"I", indices}});
      std::vector<HostTensor> fused = expectFusedMatchesUnfused(
          text,
          {randomTensor(dtype, {11, 3, 5}), gatherIndices(index, {4, 6}, 11),
           randomTensor(dtype, {6, 3, 5})},
          "gather " + table + "[" + indices + "]");
      EXPECT_EQ(fused.size(), 2u);
    }
  }
}

// A rank-1 table (the result has the indices' shape, read at the loop index), and a gather
// inside a reduction kernel: the sum of each gathered row.
const char *kGatherReduce = R"(
func.func @f(%t: tensor<9xf32>, %m: tensor<9x33xf32>, %i: tensor<7x4xi64>)
    -> (tensor<7x4xf32>, tensor<7x4xf32>) {
  %r = smelt.fusion loop (%t, %i) : (tensor<9xf32>, tensor<7x4xi64>) -> tensor<7x4xf32> {
  ^bb0(%a: tensor<9xf32>, %b: tensor<7x4xi64>):
    %g = smelt.gather %a[%b] : tensor<9xf32>, tensor<7x4xi64>
    %e = smelt.exp %g : tensor<7x4xf32>
    smelt.yield %e : tensor<7x4xf32>
  }
  %s = smelt.fusion reduction (%m, %i) : (tensor<9x33xf32>, tensor<7x4xi64>) -> tensor<7x4xf32> {
  ^bb0(%a: tensor<9x33xf32>, %b: tensor<7x4xi64>):
    %g = smelt.gather %a[%b] : tensor<9x33xf32>, tensor<7x4xi64>
    %sum = smelt.reduce sum %g axes = [2] : tensor<7x4x33xf32>
    smelt.yield %sum : tensor<7x4xf32>
  }
  return %r, %s : tensor<7x4xf32>, tensor<7x4xf32>
}
)";

TEST(FusedOps, GatherOfAVectorAndInsideAReduction) {
  expectFusedMatchesUnfused(kGatherReduce,
                            {randomTensor(DType::f32, {9}), randomTensor(DType::f32, {9, 33}),
                             gatherIndices(DType::i64, {7, 4}, 9)},
                            "gather of a vector, and summed");
}

const char *kPowByConstant = R"(
func.func @f(%x: ${T}) -> ${T} {
  %r = smelt.fusion loop (%x) : (${T}) -> ${T} {
  ^bb0(%a: ${T}):
    %s = smelt.constant dense<${E}> : ${S}
    %e = smelt.broadcast_in_dim %s, dims = [] : ${S} -> ${T}
    %0 = smelt.pow %a, %e : ${T}
    smelt.yield %0 : ${T}
  }
  return %r : ${T}
}
)";

// pow by a constant 2 or 3 inside a kernel is computed as products: against float64 std::pow on
// negative and positive bases, and against the unfused op (libm's pow, the exponent an input).
TEST(FusedOps, PowByTwoAndThreeAreProducts) {
  for (double exponent : {2.0, 3.0})
    for (DType dtype : kFloatDTypes) {
      std::string type = tensorType(kShape, dtype);
      std::string text = substitute(kPowByConstant, {{"T", type},
                                                     {"S", tensorType({}, dtype)},
                                                     {"E", exponent == 2 ? "2.0" : "3.0"}});
      HostTensor x = randomTensor(dtype, kShape, [] { return draw(-3, 3); });
      std::vector<HostTensor> fused =
          expectFusedMatchesUnfused(text, {x}, "pow " + std::to_string(exponent) + " " + type);
      ASSERT_EQ(fused.size(), 1u);
      std::vector<double> want;
      for (double v : x.toDoubles())
        want.push_back(std::pow(v, exponent));
      expectMatch(fused[0], HostTensor::fromDoubles(fused[0].type(), want),
                  smelt::test::referenceTolerance(dtype), "pow vs float64 " + type);
    }
}

} // namespace
} // namespace smelt::rt::test
