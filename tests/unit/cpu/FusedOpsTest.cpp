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
