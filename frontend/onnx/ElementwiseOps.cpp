// Converters of ONNX's elementwise ops: unary math (Relu, Tanh and Sigmoid, which Smelt has as
// ops, among them), NumPy-broadcasting arithmetic and comparisons, logic on bool, Where, Clip
// and Cast. Math Smelt has no op for is composed of what it has (Tan is sin / cos, Floor a
// truncating convert); the other activations are in ActivationOps.cpp.
#include "frontend/onnx/NodeImporter.h"

namespace smelt::onnx {
namespace {

bool isFloat(Tensor x) { return rt::isFloat(x.dtype()); }

Tensor scalar(Tensor like, double v) { return scalarLike(like, v); }
Tensor isNegative(Tensor x) { return compare(x, scalar(x, 0), CompareDirection::lt); }

/// x itself where |x| >= 2^52 (already an integer, and past what an i64 round trip keeps).
Tensor keepLarge(Tensor x, Tensor rounded) {
  return select(compare(abs(x), scalar(x, 4503599627370496.0), CompareDirection::ge), x,
                rounded);
}
Tensor truncated(Tensor x) { return convert(convert(x, DType::i64), x.dtype()); }

template <Tensor (*Op)(Tensor, Loc)> void unaryFloat(NodeImporter &n) {
  n.setOutput(0, Op(floatInput(n, 0), Loc::current()));
}
template <Tensor (*Op)(Tensor, Loc)> void unaryNumber(NodeImporter &n) {
  n.setOutput(0, Op(n.input(0), Loc::current()));
}

/// The operands of a binary op; ONNX requires one element type, Smelt too.
std::pair<Tensor, Tensor> sameTypeInputs(const NodeImporter &n) {
  Tensor a = n.input(0), b = n.input(1);
  if (a.dtype() != b.dtype())
    fail(ImportErrorKind::BadFile, std::string("operands are ") + dtypeName(a.dtype()) +
                                       " and " + dtypeName(b.dtype()));
  return {a, b};
}
template <Tensor (*Op)(Tensor, Tensor, Loc)> void binary(NodeImporter &n) {
  auto [a, b] = sameTypeInputs(n);
  if (a.dtype() == DType::i1)
    fail(ImportErrorKind::UnsupportedDtype, "Smelt's arithmetic has no bool form");
  n.setOutput(0, Op(a, b, Loc::current()));
}
template <CompareDirection D> void comparison(NodeImporter &n) {
  auto [a, b] = sameTypeInputs(n);
  n.setOutput(0, compare(a, b, D));
}
/// Max, Min, Sum: a left fold over any number of inputs.
template <Tensor (*Op)(Tensor, Tensor, Loc)> void variadic(NodeImporter &n) {
  Tensor acc = n.input(0);
  for (int i = 1; i < n.numInputs(); ++i)
    acc = Op(acc, n.input(i), Loc::current());
  n.setOutput(0, acc);
}

void powOp(NodeImporter &n) {
  Tensor base = n.input(0), exponent = n.input(1);
  // Integer powers compute in f64, exact for the results an integer type holds.
  DType work = isFloat(base) ? base.dtype() : DType::f64;
  n.setOutput(0, convert(pow(convert(base, work), convert(exponent, work)), base.dtype()));
}

void meanOp(NodeImporter &n) {
  Tensor sum = n.input(0);
  for (int i = 1; i < n.numInputs(); ++i)
    sum = add(sum, n.input(i));
  n.setOutput(0, div(sum, scalar(sum, n.numInputs())));
}

Tensor boolInput(const NodeImporter &n, int i) {
  Tensor x = n.input(i);
  if (x.dtype() != DType::i1)
    fail(ImportErrorKind::BadFile, "logic ops take bool inputs");
  return x;
}
void logicAnd(NodeImporter &n) { n.setOutput(0, andOf(boolInput(n, 0), boolInput(n, 1))); }
void logicOr(NodeImporter &n) { n.setOutput(0, orOf(boolInput(n, 0), boolInput(n, 1))); }
void logicXor(NodeImporter &n) {
  n.setOutput(0, compare(boolInput(n, 0), boolInput(n, 1), CompareDirection::ne));
}
void logicNot(NodeImporter &n) {
  Tensor x = boolInput(n, 0);
  n.setOutput(0, compare(x, scalar(x, 0), CompareDirection::eq));
}

void where(NodeImporter &n) {
  n.setOutput(0, select(boolInput(n, 0), n.input(1), n.input(2)));
}

void cast(NodeImporter &n) {
  const ::onnx::AttributeProto *to = n.attribute("to");
  if (!to)
    fail(ImportErrorKind::BadFile, "Cast has no 'to' attribute");
  std::optional<DType> dtype = smeltDType(int(to->i()));
  if (!dtype)
    fail(ImportErrorKind::UnsupportedDtype,
         "cast to " + onnxTypeName(int(to->i())) + ", which Smelt does not have");
  n.setOutput(0, convert(n.input(0), *dtype));
}
void castLike(NodeImporter &n) { n.setOutput(0, convert(n.input(0), n.input(1).dtype())); }

void identity(NodeImporter &n) { n.setOutput(0, n.input(0)); }

void reciprocal(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, div(scalar(x, 1), x));
}
void floor(NodeImporter &n) { n.setOutput(0, floorOf(floatInput(n, 0))); }
void round(NodeImporter &n) { n.setOutput(0, roundHalfEven(floatInput(n, 0))); }
void isInf(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  Tensor positive = compare(x, scalar(x, INFINITY), CompareDirection::eq);
  Tensor negative = compare(x, scalar(x, -INFINITY), CompareDirection::eq);
  bool detectPositive = n.attrInt("detect_positive", 1), detectNegative = n.attrInt("detect_negative", 1);
  if (detectPositive && detectNegative)
    n.setOutput(0, orOf(positive, negative));
  else if (detectPositive || detectNegative)
    n.setOutput(0, detectPositive ? positive : negative);
  else
    n.setOutput(0, constant(n.g, 0.0, x.shape(), DType::i1));
}
/// fmod=1: C's fmod (the dividend's sign); fmod=0: the divisor's sign (floats from opset 28,
/// a - floor(a / b) b as its spec words it; integers in every opset).
void mod(NodeImporter &n) {
  auto [a, b] = sameTypeInputs(n);
  bool cStyle = n.attrInt("fmod", 0) != 0;
  if (isFloat(a)) {
    if (!cStyle && n.opset < 28)
      fail(ImportErrorKind::BadFile, "Mod of floats needs fmod=1 before opset 28");
    Tensor quotient = div(a, b);
    n.setOutput(0, sub(a, mul(b, cStyle ? truncated(quotient) : floorOf(quotient))));
    return;
  }
  Tensor r = sub(a, mul(b, div(a, b))); // integer div truncates
  if (!cStyle) {
    Tensor zero = scalar(r, 0);
    Tensor differ = compare(isNegative(r), isNegative(b), CompareDirection::ne);
    Tensor adjust = select(compare(r, zero, CompareDirection::ne), differ, compare(r, r, CompareDirection::ne));
    r = select(adjust, add(r, b), r);
  }
  n.setOutput(0, r);
}
void ceil(NodeImporter &n) {
  Tensor x = floatInput(n, 0), t = truncated(x);
  n.setOutput(0, keepLarge(x, select(compare(t, x, CompareDirection::lt), add(t, scalar(x, 1)), t)));
}
void tan(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, div(sin(x), cos(x)));
}
void sinh(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, mul(sub(exp(x), exp(neg(x))), scalar(x, 0.5)));
}
void cosh(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, mul(add(exp(x), exp(neg(x))), scalar(x, 0.5)));
}
// Inverse trigonometric and hyperbolic functions: Smelt has no ops for them, so they are
// computed in f64 from sqrt, log and an arctangent series, and rounded to the input's type.

/// atan in f64: two argument halvings (atan x = 2 atan(x / (1 + sqrt(1 + x^2)))) bring |x|
/// below tan(pi/16) ~ 0.2, where 12 terms of the odd series are below 1e-15.
Tensor atanF64(Tensor x) {
  Tensor one = scalar(x, 1);
  for (int i = 0; i < 2; ++i)
    x = div(x, add(one, sqrt(add(one, mul(x, x)))));
  Tensor x2 = mul(x, x), term = x, sum = x;
  for (int k = 1; k < 12; ++k) {
    term = mul(term, neg(x2));
    sum = add(sum, div(term, scalar(x, 2 * k + 1)));
  }
  return mul(sum, scalar(x, 4));
}
/// asin in f64, valid on all of [-1, 1]: 2 atan(x / (1 + sqrt(1 - x^2))).
Tensor asinF64(Tensor x) {
  Tensor one = scalar(x, 1);
  return mul(atanF64(div(x, add(one, sqrt(sub(one, mul(x, x)))))), scalar(x, 2));
}
template <Tensor (*F)(Tensor)> void inF64(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, convert(F(convert(x, DType::f64)), x.dtype()));
}
Tensor acosF64(Tensor x) { return sub(scalar(x, M_PI / 2), asinF64(x)); }
Tensor asinhF64(Tensor x) { // odd: sign(x) log(|x| + sqrt(x^2 + 1)), no cancellation
  Tensor a = abs(x), r = log(add(a, sqrt(add(mul(a, a), scalar(x, 1)))));
  return select(isNegative(x), neg(r), r);
}
Tensor acoshF64(Tensor x) { return log(add(x, sqrt(sub(mul(x, x), scalar(x, 1))))); }
Tensor atanhF64(Tensor x) {
  Tensor one = scalar(x, 1);
  return mul(log(div(add(one, x), sub(one, x))), scalar(x, 0.5));
}

void sign(NodeImporter &n) {
  Tensor x = n.input(0);
  n.setOutput(0, select(compare(x, scalar(x, 0), CompareDirection::gt), scalar(x, 1),
                        select(isNegative(x), scalar(x, -1), scalar(x, 0))));
}
void isNaN(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  n.setOutput(0, compare(x, x, CompareDirection::ne));
}

void clip(NodeImporter &n) {
  Tensor x = n.input(0);
  if (n.opset < 11) {
    n.setOutput(0, clamp(x, n.attrFloat("min", -INFINITY), n.attrFloat("max", INFINITY)));
    return;
  }
  if (std::optional<Tensor> lo = n.optionalInput(1))
    x = maximum(x, *lo);
  if (std::optional<Tensor> hi = n.optionalInput(2))
    x = minimum(x, *hi);
  n.setOutput(0, x);
}

} // namespace

Tensor floorOf(Tensor x) {
  Tensor t = truncated(x);
  return keepLarge(x, select(compare(t, x, CompareDirection::gt), sub(t, scalar(x, 1)), t));
}

Tensor andOf(Tensor a, Tensor b) { return select(a, b, a); }
Tensor orOf(Tensor a, Tensor b) { return select(a, a, b); }

Tensor roundHalfEven(Tensor x) {
  Tensor f = floorOf(x), fraction = sub(x, f), half = scalar(x, 0.5);
  Tensor up = add(f, scalar(x, 1));
  Tensor even = compare(floorOf(mul(f, half)), mul(f, half), CompareDirection::eq);
  return select(compare(fraction, half, CompareDirection::gt), up,
                select(compare(fraction, half, CompareDirection::lt), f, select(even, f, up)));
}

void addElementwiseOps(ConverterTable &t) {
  t["Abs"] = unaryNumber<abs>;
  t["Neg"] = unaryNumber<neg>;
  t["Relu"] = unaryNumber<relu>;
  t["Exp"] = unaryFloat<exp>;
  t["Log"] = unaryFloat<log>;
  t["Tanh"] = unaryFloat<tanh>;
  t["Sigmoid"] = unaryFloat<logistic>;
  t["Sqrt"] = unaryFloat<sqrt>;
  t["Erf"] = unaryFloat<erf>;
  t["Sin"] = unaryFloat<sin>;
  t["Cos"] = unaryFloat<cos>;
  t["Tan"] = tan;
  t["Sinh"] = sinh;
  t["Cosh"] = cosh;
  t["Reciprocal"] = reciprocal;
  t["Atan"] = inF64<atanF64>;
  t["Asin"] = inF64<asinF64>;
  t["Acos"] = inF64<acosF64>;
  t["Asinh"] = inF64<asinhF64>;
  t["Acosh"] = inF64<acoshF64>;
  t["Atanh"] = inF64<atanhF64>;
  t["Floor"] = floor;
  t["Round"] = round;
  t["IsInf"] = isInf;
  t["Mod"] = mod;
  t["Ceil"] = ceil;
  t["Sign"] = sign;
  t["IsNaN"] = isNaN;
  t["Clip"] = clip;
  t["Identity"] = identity;
  t["Add"] = binary<add>;
  t["Sub"] = binary<sub>;
  t["Mul"] = binary<mul>;
  t["Div"] = binary<div>;
  t["Pow"] = powOp;
  t["Max"] = variadic<maximum>;
  t["Min"] = variadic<minimum>;
  t["Sum"] = variadic<add>;
  t["Mean"] = meanOp;
  t["Equal"] = comparison<CompareDirection::eq>;
  t["Less"] = comparison<CompareDirection::lt>;
  t["LessOrEqual"] = comparison<CompareDirection::le>;
  t["Greater"] = comparison<CompareDirection::gt>;
  t["GreaterOrEqual"] = comparison<CompareDirection::ge>;
  t["And"] = logicAnd;
  t["Or"] = logicOr;
  t["Xor"] = logicXor;
  t["Not"] = logicNot;
  t["Where"] = where;
  t["Cast"] = cast;
  t["CastLike"] = castLike;
}

} // namespace smelt::onnx
