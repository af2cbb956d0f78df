// Element operations of fused CPU kernels as arith/math ops, the elementwise ops from one table
// (kUnary, kBinary) as the CUDA target has. Each op follows the unfused
// kernel in runtime/cpu/Elementwise.cpp expression for expression (abs and relu as compare and
// select, max as `a > b || a != a ? a : b`), so fused and unfused results agree bit for bit
// except where math functions are approximated (codegen/cpu/Lower.cpp says which).
#include "codegen/cpu/CpuTarget.h"

#include "codegen/cpu/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cstdint>

using namespace mlir;

namespace smelt::codegen::cpu {

using rt::DType;

namespace {

bool isFloatValue(Value v) { return isa<FloatType>(v.getType()); }

/// Index arithmetic never wraps (indices are below the element count), and saying so lets
/// LLVM's scalar evolution see consecutive addresses.
template <typename Op> Value indexOp(ImplicitLocOpBuilder &b, Value x, Value y) {
  auto op = Op::create(b, x, y);
  op.setOverflowFlags(arith::IntegerOverflowFlags::nsw | arith::IntegerOverflowFlags::nuw);
  return op;
}

/// `a OP b` for compare directions, on floats (ordered; `ne` is unordered as in C++), signed
/// integers, or i1 (0 < 1, unsigned).
Value comparison(ImplicitLocOpBuilder &b, CompareDirection direction, Value x, Value y) {
  if (isFloatValue(x)) {
    using P = arith::CmpFPredicate;
    static const P predicates[] = {P::OEQ, P::UNE, P::OLT, P::OLE, P::OGT, P::OGE};
    return arith::CmpFOp::create(b, predicates[int(direction)], x, y);
  }
  using P = arith::CmpIPredicate;
  static const P signedPredicates[] = {P::eq, P::ne, P::slt, P::sle, P::sgt, P::sge};
  static const P unsignedPredicates[] = {P::eq, P::ne, P::ult, P::ule, P::ugt, P::uge};
  bool isBool = x.getType().isInteger(1);
  return arith::CmpIOp::create(b, (isBool ? unsignedPredicates : signedPredicates)[int(direction)],
                               x, y);
}

/// Integer negation wraps: -INT_MIN is INT_MIN.
Value negate(ImplicitLocOpBuilder &b, Value x) {
  if (isFloatValue(x))
    return arith::NegFOp::create(b, x);
  return arith::SubIOp::create(b, intConstant(b, x.getType(), 0), x);
}

/// Integer division as the runtime defines it: x / 0 = 0 and x / -1 = -x (wrapping), so user
/// data never traps.
Value divideIntegers(ImplicitLocOpBuilder &b, Value x, Value y) {
  Type type = x.getType();
  Value isZero = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, y, intConstant(b, type, 0));
  Value isMinusOne =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, y, intConstant(b, type, -1));
  Value safe = arith::SelectOp::create(b, arith::OrIOp::create(b, isZero, isMinusOne),
                                       intConstant(b, type, 1), y);
  Value quotient = arith::DivSIOp::create(b, x, safe);
  quotient = arith::SelectOp::create(b, isMinusOne, negate(b, x), quotient);
  return arith::SelectOp::create(b, isZero, intConstant(b, type, 0), quotient);
}

/// max (or min): `a > b || a != a ? a : b`, which propagates a NaN from either side.
Value extremum(ImplicitLocOpBuilder &b, bool isMax, Value x, Value y) {
  if (!isFloatValue(x))
    return isMax ? Value(arith::MaxSIOp::create(b, x, y)) : Value(arith::MinSIOp::create(b, x, y));
  Value wins = comparison(b, isMax ? CompareDirection::gt : CompareDirection::lt, x, y);
  Value isNaN = arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, x, x);
  return arith::SelectOp::create(b, arith::OrIOp::create(b, wins, isNaN), x, y);
}

/// log(x). f32's polynomial (Lower.cpp) reads a subnormal x as the smallest normal, so those
/// are scaled by 2^24 into the normal range first and 24 ln 2 is taken off after.
Value logarithm(ImplicitLocOpBuilder &b, Value x) {
  if (!x.getType().isF32())
    return math::LogOp::create(b, x);
  Type f32 = x.getType();
  Value subnormal = arith::CmpFOp::create(b, arith::CmpFPredicate::OLT, math::AbsFOp::create(b, x),
                                          floatConstant(b, f32, 0x1p-126));
  Value scaled = arith::SelectOp::create(
      b, subnormal, arith::MulFOp::create(b, x, floatConstant(b, f32, 0x1p24)), x);
  Value log = math::LogOp::create(b, scaled);
  Value shift = floatConstant(b, f32, 24 * 0.693147180559945309);
  return arith::SelectOp::create(b, subnormal, arith::SubFOp::create(b, log, shift), log);
}

Value zeroLike(ImplicitLocOpBuilder &b, Value x) {
  return isFloatValue(x) ? floatConstant(b, x.getType(), 0) : intConstant(b, x.getType(), 0);
}

/// Integer abs wraps: |INT_MIN| is INT_MIN.
Value absolute(ImplicitLocOpBuilder &b, Value x) {
  Value isNegative = comparison(b, CompareDirection::lt, x, zeroLike(b, x));
  return arith::SelectOp::create(b, isNegative, negate(b, x), x);
}

Value relu(ImplicitLocOpBuilder &b, Value x) {
  Value isNegative = comparison(b, CompareDirection::lt, x, zeroLike(b, x));
  return arith::SelectOp::create(b, isNegative, zeroLike(b, x), x);
}

/// 1 / sqrt(x), not an estimate: the runtime divides too.
Value reciprocalSqrt(ImplicitLocOpBuilder &b, Value x) {
  return arith::DivFOp::create(b, floatConstant(b, x.getType(), 1.0), math::SqrtOp::create(b, x));
}

Value logistic(ImplicitLocOpBuilder &b, Value x) {
  Value one = floatConstant(b, x.getType(), 1.0);
  return arith::DivFOp::create(
      b, one, arith::AddFOp::create(b, one, math::ExpOp::create(b, negate(b, x))));
}

template <typename Op> Value build(ImplicitLocOpBuilder &b, Value x) { return Op::create(b, x); }
template <typename Op> Value build(ImplicitLocOpBuilder &b, Value x, Value y) {
  return Op::create(b, x, y);
}
Value maximum(ImplicitLocOpBuilder &b, Value x, Value y) { return extremum(b, true, x, y); }
Value minimum(ImplicitLocOpBuilder &b, Value x, Value y) { return extremum(b, false, x, y); }

using UnaryFn = Value (*)(ImplicitLocOpBuilder &, Value);
using BinaryFn = Value (*)(ImplicitLocOpBuilder &, Value, Value);

/// How each elementwise op is built from arith/math ops: on floats (f32, f64 and the f32 that
/// f16/bf16 compute in) and on integers, null where the op takes no integers (the verifier sees
/// to it). The CUDA target's kOps table spells the same ops in C++; a new op is a line in each.
/// Integer add, sub and mul wrap: arith's plain ops have no overflow flags.
struct UnarySpelling {
  StringLiteral op;
  UnaryFn onFloat, onInteger;
};
constexpr UnarySpelling kUnary[] = {
    {"neg", negate, negate},
    {"abs", absolute, absolute},
    {"relu", relu, relu},
    {"exp", build<math::ExpOp>, nullptr},
    {"log", logarithm, nullptr},
    {"tanh", build<math::TanhOp>, nullptr},
    {"logistic", logistic, nullptr},
    {"sqrt", build<math::SqrtOp>, nullptr},
    {"rsqrt", reciprocalSqrt, nullptr},
    {"erf", build<math::ErfOp>, nullptr},
    {"sin", build<math::SinOp>, nullptr},
    {"cos", build<math::CosOp>, nullptr},
};

struct BinarySpelling {
  StringLiteral op;
  BinaryFn onFloat, onInteger;
};
constexpr BinarySpelling kBinary[] = {
    {"add", build<arith::AddFOp>, build<arith::AddIOp>},
    {"sub", build<arith::SubFOp>, build<arith::SubIOp>},
    {"mul", build<arith::MulFOp>, build<arith::MulIOp>},
    {"div", build<arith::DivFOp>, divideIntegers},
    {"max", maximum, maximum},
    {"min", minimum, minimum},
    {"pow", build<math::PowFOp>, nullptr},
};

template <typename Spelling, size_t N>
const Spelling *find(const Spelling (&table)[N], StringRef op) {
  for (const Spelling &spelling : table)
    if (spelling.op == op)
      return &spelling;
  return nullptr;
}

} // namespace

CpuTarget::CpuTarget(ImplicitLocOpBuilder &builder, ArrayRef<Value> inputs, ArrayRef<DType> dtypes)
    : b_(builder), inputs_(inputs), dtypes_(dtypes) {}

Val CpuTarget::wrap(Value v) {
  values_.push_back(v);
  return Val(values_.size() - 1);
}

Value CpuTarget::zero(DType dtype) {
  Type type = computeType(b_.getContext(), dtype);
  return rt::isFloat(dtype) ? cpu::floatConstant(b_, type, 0) : intConstant(b_, type, 0);
}

Val CpuTarget::unknown(StringRef op, DType dtype) {
  if (error_.empty())
    error_ = "the CPU back end cannot compute 'smelt." + op.str() + "' on " +
             std::string(rt::dtypeName(dtype));
  return wrap(zero(dtype));
}

Val CpuTarget::indexConstant(int64_t value) {
  return wrap(intConstant(b_, b_.getI64Type(), value));
}

Val CpuTarget::indexAdd(Val a, Val b) {
  return wrap(indexOp<arith::AddIOp>(b_, value(a), value(b)));
}

Val CpuTarget::indexMul(Val a, int64_t factor) {
  return wrap(indexOp<arith::MulIOp>(b_, value(a), intConstant(b_, b_.getI64Type(), factor)));
}

// Indices are non-negative: unsigned division by a constant is the cheapest.
Val CpuTarget::indexDiv(Val a, int64_t divisor) {
  return wrap(arith::DivUIOp::create(b_, value(a), intConstant(b_, b_.getI64Type(), divisor)));
}

Val CpuTarget::indexRem(Val a, int64_t divisor) {
  return wrap(arith::RemUIOp::create(b_, value(a), intConstant(b_, b_.getI64Type(), divisor)));
}

// The offset may be negative, so the sum carries no unsigned-wrap flag.
static Value offsetIndex(ImplicitLocOpBuilder &b, Value a, int64_t offset) {
  auto sum = arith::AddIOp::create(b, a, intConstant(b, b.getI64Type(), offset));
  sum.setOverflowFlags(arith::IntegerOverflowFlags::nsw);
  return sum;
}

Val CpuTarget::indexOffset(Val a, int64_t offset) {
  return wrap(offsetIndex(b_, value(a), offset));
}

Val CpuTarget::indexOffsetClamped(Val a, int64_t offset, int64_t size) {
  Type i64 = b_.getI64Type();
  Value low =
      arith::MaxSIOp::create(b_, offsetIndex(b_, value(a), offset), intConstant(b_, i64, 0));
  return wrap(arith::MinSIOp::create(b_, low, intConstant(b_, i64, size - 1)));
}

Val CpuTarget::indexBelow(Val a, int64_t bound) {
  return wrap(arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, value(a),
                                    intConstant(b_, b_.getI64Type(), bound)));
}

Val CpuTarget::load(unsigned input, Val index) {
  return wrap(loadElement(b_, inputs_[input], value(index), dtypes_[input]));
}

Val CpuTarget::floatConstant(double value, DType dtype) {
  return wrap(cpu::floatConstant(b_, computeType(b_.getContext(), dtype), value));
}

Val CpuTarget::integerConstant(int64_t value, DType dtype) {
  return wrap(intConstant(b_, computeType(b_.getContext(), dtype), value));
}

Val CpuTarget::unary(StringRef op, Val x, DType dtype) {
  const UnarySpelling *spelling = find(kUnary, op);
  UnaryFn fn = !spelling ? nullptr : rt::isFloat(dtype) ? spelling->onFloat : spelling->onInteger;
  return fn ? wrap(fn(b_, value(x))) : unknown(op, dtype);
}

Val CpuTarget::binary(StringRef op, Val a, Val b, DType dtype) {
  const BinarySpelling *spelling = find(kBinary, op);
  BinaryFn fn = !spelling || dtype == DType::i1 ? nullptr
                : rt::isFloat(dtype)            ? spelling->onFloat
                                                : spelling->onInteger;
  return fn ? wrap(fn(b_, value(a), value(b))) : unknown(op, dtype);
}

Val CpuTarget::compare(CompareDirection direction, Val a, Val b, DType) {
  return wrap(comparison(b_, direction, value(a), value(b)));
}

Val CpuTarget::select(Val pred, Val onTrue, Val onFalse, DType) {
  return wrap(arith::SelectOp::create(b_, value(pred), value(onTrue), value(onFalse)));
}

Val CpuTarget::convert(Val x, DType from, DType to) {
  return wrap(convertElement(b_, value(x), from, to));
}

// iota's element is its index converted as the runtime does (fromCompute of an int64).
Val CpuTarget::indexToElement(Val index, DType dtype) {
  return wrap(convertElement(b_, value(index), DType::i64, dtype));
}

// Philox4x32-10 (docs/ops.md) in i32 words with each 32x32-bit product taken whole in i64 (its
// high and low halves; LLVM vectorizes the widening multiply). The key schedule depends on the
// seed alone, so its words are constants. The draws use the first two words.
std::array<Value, 2> CpuTarget::philox(Val index, Val offset, uint64_t seed) {
  Type i32 = b_.getI32Type(), i64 = b_.getI64Type();
  auto word = [&](Value x, int shift) -> Value {
    if (shift)
      x = arith::ShRUIOp::create(b_, x, intConstant(b_, i64, shift));
    return arith::TruncIOp::create(b_, i32, x);
  };
  Value i = value(index), o = value(offset);
  Value c[4] = {word(i, 0), word(i, 32), word(o, 0), word(o, 32)};
  uint32_t key[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  Value mul0 = intConstant(b_, i64, 0xD2511F53), mul1 = intConstant(b_, i64, 0xCD9E8D57);
  for (int round = 0; round < 10; ++round) {
    Value p0 = arith::MulIOp::create(b_, arith::ExtUIOp::create(b_, i64, c[0]), mul0);
    Value p1 = arith::MulIOp::create(b_, arith::ExtUIOp::create(b_, i64, c[2]), mul1);
    auto mix = [&](Value product, Value other, uint32_t k) -> Value {
      Value x = arith::XOrIOp::create(b_, word(product, 32), other);
      return arith::XOrIOp::create(b_, x, intConstant(b_, i32, int32_t(k)));
    };
    Value n0 = mix(p1, c[1], key[0]), n2 = mix(p0, c[3], key[1]);
    c[1] = word(p1, 0);
    c[3] = word(p0, 0);
    c[0] = n0;
    c[2] = n2;
    key[0] += 0x9E3779B9u;
    key[1] += 0xBB67AE85u;
  }
  return {c[0], c[1]};
}

/// `((word >> 8) + plus) * 2^-24` in `type`: a word's top 24 bits as a unit draw.
Value CpuTarget::unitDraw(Value word, Type type, double plus) {
  Value top = arith::ShRUIOp::create(b_, word, intConstant(b_, b_.getI32Type(), 8));
  Value x = arith::UIToFPOp::create(b_, type, top);
  if (plus != 0)
    x = arith::AddFOp::create(b_, x, cpu::floatConstant(b_, type, plus));
  return arith::MulFOp::create(b_, x, cpu::floatConstant(b_, type, 0x1p-24));
}

// The draw's multiply and add carry no fast-math flags, so LLVM never contracts them into an
// FMA: the GPU rounds each too, so both give the same bits.
Val CpuTarget::uniform(Val index, Val offset, uint64_t seed, double low, double range,
                       DType dtype) {
  auto [w0, w1] = philox(index, offset, seed);
  Type i64 = b_.getI64Type();
  Type type = dtype == DType::f64 ? Type(b_.getF64Type()) : Type(b_.getF32Type());
  Value u;
  if (dtype == DType::f64) {
    Value bits = arith::XOrIOp::create(
        b_,
        arith::ShLIOp::create(b_, arith::ExtUIOp::create(b_, i64, w0), intConstant(b_, i64, 21)),
        arith::ShRUIOp::create(b_, arith::ExtUIOp::create(b_, i64, w1), intConstant(b_, i64, 11)));
    u = arith::MulFOp::create(b_, arith::UIToFPOp::create(b_, type, bits),
                              cpu::floatConstant(b_, type, 0x1p-53));
  } else {
    u = unitDraw(w0, type, 0);
  }
  Value scaled = arith::MulFOp::create(b_, cpu::floatConstant(b_, type, range), u);
  return wrap(arith::AddFOp::create(b_, cpu::floatConstant(b_, type, low), scaled));
}

// Box-Muller on the first two words, in f32 (f64 for f64 results).
Val CpuTarget::normal(Val index, Val offset, uint64_t seed, double mean, double stddev,
                      DType dtype) {
  auto [w0, w1] = philox(index, offset, seed);
  Type type = dtype == DType::f64 ? Type(b_.getF64Type()) : Type(b_.getF32Type());
  Value u1 = unitDraw(w0, type, 1), u2 = unitDraw(w1, type, 0);
  Value radius = math::SqrtOp::create(
      b_, arith::MulFOp::create(b_, cpu::floatConstant(b_, type, -2.0), logarithm(b_, u1)));
  Value angle = arith::MulFOp::create(b_, cpu::floatConstant(b_, type, 2 * M_PI), u2);
  Value z = arith::MulFOp::create(b_, radius, math::CosOp::create(b_, angle));
  Value scaled = arith::MulFOp::create(b_, cpu::floatConstant(b_, type, stddev), z);
  return wrap(arith::AddFOp::create(b_, cpu::floatConstant(b_, type, mean), scaled));
}

// Clamped in the element's own width before widening, so an i64 past 2^63 - size cannot wrap
// into range.
Val CpuTarget::elementToIndex(Val element, DType dtype, int64_t size) {
  Value x = value(element);
  Type type = x.getType();
  Value low = intConstant(b_, type, 0), high = intConstant(b_, type, size - 1);
  if (dtype == DType::i32 && size - 1 > INT32_MAX) // every i32 is below the last row
    high = intConstant(b_, type, INT32_MAX);
  Value clamped = arith::MinSIOp::create(b_, arith::MaxSIOp::create(b_, x, low), high);
  if (type == b_.getI64Type())
    return wrap(clamped);
  return wrap(arith::ExtSIOp::create(b_, b_.getI64Type(), clamped));
}

} // namespace smelt::codegen::cpu
