// Loads, stores and converts of CPU kernel elements as arith ops. The f16/bf16 roundings are
// runtime/Half.h's integer algorithms, not LLVM's fptrunc: the results are the same bits
// (NaNs included), they vectorize, and no target needs a soft-float library call.
#include "codegen/cpu/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;

namespace smelt::codegen::cpu {

using rt::DType;

namespace {

/// What an element occupies in memory: f16/bf16 bits as i16, i1 as one byte.
Type storageType(MLIRContext *context, DType dtype) {
  if (dtype == DType::f16 || dtype == DType::bf16)
    return IntegerType::get(context, 16);
  if (dtype == DType::i1)
    return IntegerType::get(context, 8);
  return computeType(context, dtype);
}

Value address(ImplicitLocOpBuilder &b, Value base, Value index, Type element) {
  // inbounds: an element index never leaves its buffer, which lets LLVM widen the loads.
  return LLVM::GEPOp::create(b, LLVM::LLVMPointerType::get(b.getContext()), element, base,
                             ValueRange{index}, LLVM::GEPNoWrapFlags::inbounds);
}

Value i32Constant(ImplicitLocOpBuilder &b, uint32_t bits) {
  return intConstant(b, b.getI32Type(), int64_t(bits));
}

Value cmp(ImplicitLocOpBuilder &b, arith::CmpIPredicate predicate, Value x, uint32_t bits) {
  return arith::CmpIOp::create(b, predicate, x, i32Constant(b, bits));
}

/// Half(float) of runtime/Half.h: the f16 bits of `x` (f32), rounded to nearest even.
Value f16Bits(ImplicitLocOpBuilder &b, Value x) {
  using P = arith::CmpIPredicate;
  Value u = arith::BitcastOp::create(b, b.getI32Type(), x);
  Value sign = arith::AndIOp::create(b, arith::ShRUIOp::create(b, u, i32Constant(b, 16)),
                                     i32Constant(b, 0x8000));
  Value abs = arith::AndIOp::create(b, u, i32Constant(b, 0x7fffffff));
  Value infinity = arith::OrIOp::create(b, sign, i32Constant(b, 0x7c00));
  // Inf stays Inf, NaN stays a quiet NaN (never rounded to Inf).
  Value nanBit = arith::SelectOp::create(b, cmp(b, P::ugt, abs, 0x7f800000), i32Constant(b, 0x200),
                                         i32Constant(b, 0));
  Value special = arith::OrIOp::create(b, infinity, nanBit);
  // Below 2^-14 the result is subnormal: adding 0.5 aligns 2^-24 to the float's last bit, so
  // the FPU does the rounding.
  Value magnitude = arith::AddFOp::create(b, arith::BitcastOp::create(b, b.getF32Type(), abs),
                                          floatConstant(b, b.getF32Type(), 0.5));
  Value subnormal = arith::OrIOp::create(
      b, sign,
      arith::SubIOp::create(b, arith::BitcastOp::create(b, b.getI32Type(), magnitude),
                            i32Constant(b, 0x3f000000)));
  // Normal: rebias the exponent (-112 << 23) and round to even in one wrapping add.
  Value odd = arith::AndIOp::create(b, arith::ShRUIOp::create(b, abs, i32Constant(b, 13)),
                                    i32Constant(b, 1));
  Value rebiased =
      arith::AddIOp::create(b, arith::AddIOp::create(b, abs, i32Constant(b, 0xc8000fffu)), odd);
  Value normal =
      arith::OrIOp::create(b, sign, arith::ShRUIOp::create(b, rebiased, i32Constant(b, 13)));
  Value bits = arith::SelectOp::create(b, cmp(b, P::ult, abs, 0x38800000), subnormal, normal);
  bits = arith::SelectOp::create(b, cmp(b, P::uge, abs, 0x47800000), infinity, bits);
  bits = arith::SelectOp::create(b, cmp(b, P::uge, abs, 0x7f800000), special, bits);
  return arith::TruncIOp::create(b, b.getI16Type(), bits);
}

/// BFloat16(float) of runtime/Half.h: the bf16 bits of `x` (f32), rounded to nearest even.
Value bf16Bits(ImplicitLocOpBuilder &b, Value x) {
  Value u = arith::BitcastOp::create(b, b.getI32Type(), x);
  Value high = arith::ShRUIOp::create(b, u, i32Constant(b, 16));
  Value isNaN = cmp(b, arith::CmpIPredicate::ugt,
                    arith::AndIOp::create(b, u, i32Constant(b, 0x7fffffff)), 0x7f800000);
  Value quietNaN = arith::OrIOp::create(b, high, i32Constant(b, 0x40));
  Value roundUp = arith::AddIOp::create(b, i32Constant(b, 0x7fff),
                                        arith::AndIOp::create(b, high, i32Constant(b, 1)));
  Value rounded =
      arith::ShRUIOp::create(b, arith::AddIOp::create(b, u, roundUp), i32Constant(b, 16));
  return arith::TruncIOp::create(b, b.getI16Type(),
                                 arith::SelectOp::create(b, isNaN, quietNaN, rounded));
}

/// f16/bf16 bits back to f32, exactly.
Value widenHalf(ImplicitLocOpBuilder &b, Value bits, DType dtype) {
  if (dtype == DType::f16)
    return arith::ExtFOp::create(b, b.getF32Type(),
                                 arith::BitcastOp::create(b, b.getF16Type(), bits), {});
  Value wide =
      arith::ShLIOp::create(b, arith::ExtUIOp::create(b, b.getI32Type(), bits), i32Constant(b, 16));
  return arith::BitcastOp::create(b, b.getF32Type(), wide);
}

/// An f32 rounded to f16 or bf16 and read back: what convert gives while computing in f32.
Value roundToHalf(ImplicitLocOpBuilder &b, Value x, DType dtype) {
  return widenHalf(b, dtype == DType::f16 ? f16Bits(b, x) : bf16Bits(b, x), dtype);
}

/// floatRoundedToOdd of runtime/Half.h: f64 -> f32 truncating and setting the last bit when
/// inexact, so rounding the f32 again to f16/bf16 equals rounding the f64 directly.
Value roundedToOdd(ImplicitLocOpBuilder &b, Value d) {
  using P = arith::CmpFPredicate;
  Value f = arith::TruncFOp::create(b, b.getF32Type(), d);
  Value back = arith::ExtFOp::create(b, b.getF64Type(), f, {});
  Value keep = arith::OrIOp::create(b, arith::CmpFOp::create(b, P::OEQ, back, d),
                                    arith::CmpFOp::create(b, P::UNO, d, d));
  // Rounded away from zero: step one ulp back toward zero (sign-magnitude bits).
  Value away =
      arith::CmpFOp::create(b, P::OGT, math::AbsFOp::create(b, back), math::AbsFOp::create(b, d));
  Value bits = arith::BitcastOp::create(b, b.getI32Type(), f);
  bits = arith::SelectOp::create(b, away, arith::SubIOp::create(b, bits, i32Constant(b, 1)), bits);
  Value odd =
      arith::BitcastOp::create(b, b.getF32Type(), arith::OrIOp::create(b, bits, i32Constant(b, 1)));
  return arith::SelectOp::create(b, keep, f, odd);
}

} // namespace

Type computeType(MLIRContext *context, DType dtype) {
  switch (dtype) {
  case DType::f32:
  case DType::f16:
  case DType::bf16:
    return Float32Type::get(context);
  case DType::f64:
    return Float64Type::get(context);
  case DType::i32:
    return IntegerType::get(context, 32);
  case DType::i64:
    return IntegerType::get(context, 64);
  case DType::i1:
    break;
  }
  return IntegerType::get(context, 1);
}

std::pair<int64_t, int64_t> integerLimits(DType dtype) {
  if (dtype == DType::i64)
    return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
}

Value intConstant(ImplicitLocOpBuilder &b, Type type, int64_t value) {
  unsigned width = type.getIntOrFloatBitWidth();
  return arith::ConstantOp::create(
      b, IntegerAttr::get(type, APInt(width, uint64_t(value), /*isSigned=*/false,
                                      /*implicitTrunc=*/true)));
}

Value floatConstant(ImplicitLocOpBuilder &b, Type type, double value) {
  return arith::ConstantOp::create(b, b.getFloatAttr(type, value));
}

Value loadElement(ImplicitLocOpBuilder &b, Value base, Value index, DType dtype) {
  Type stored = storageType(b.getContext(), dtype);
  Value value = LLVM::LoadOp::create(b, stored, address(b, base, index, stored),
                                     unsigned(rt::byteWidth(dtype)));
  if (dtype == DType::f16 || dtype == DType::bf16)
    return widenHalf(b, value, dtype);
  if (dtype == DType::i1)
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ne, value, intConstant(b, stored, 0));
  return value;
}

void storeElement(ImplicitLocOpBuilder &b, Value base, Value index, Value value, DType dtype) {
  Type stored = storageType(b.getContext(), dtype);
  if (dtype == DType::f16)
    value = f16Bits(b, value);
  else if (dtype == DType::bf16)
    value = bf16Bits(b, value);
  else if (dtype == DType::i1)
    value = arith::ExtUIOp::create(b, stored, value);
  LLVM::StoreOp::create(b, value, address(b, base, index, stored), unsigned(rt::byteWidth(dtype)));
}

Value convertElement(ImplicitLocOpBuilder &b, Value x, DType from, DType to) {
  if (from == to)
    return x;
  Type target = computeType(b.getContext(), to);
  bool half = to == DType::f16 || to == DType::bf16;
  if (to == DType::i1)
    return rt::isFloat(from) ? Value(arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, x,
                                                           floatConstant(b, x.getType(), 0)))
                             : Value(arith::CmpIOp::create(b, arith::CmpIPredicate::ne, x,
                                                           intConstant(b, x.getType(), 0)));
  if (from == DType::i1)
    return rt::isFloat(to) ? Value(arith::UIToFPOp::create(b, target, x))
                           : Value(arith::ExtUIOp::create(b, target, x));
  if (rt::isFloat(from) && rt::isFloat(to)) {
    if (from == DType::f64)
      return half ? roundToHalf(b, roundedToOdd(b, x), to)
                  : Value(arith::TruncFOp::create(b, target, x));
    // f32, f16 and bf16 all compute in f32.
    if (to == DType::f64)
      return arith::ExtFOp::create(b, target, x, {});
    return half ? roundToHalf(b, x, to) : x;
  }
  if (rt::isFloat(from)) {
    // Truncate toward zero, saturate, NaN -> 0. fptosi is poison out of range, but the
    // selects below never pick it there.
    using P = arith::CmpFPredicate;
    auto [lowest, highest] = integerLimits(to);
    // As the runtime compares: against the limits converted to the float type (2^31, 2^63).
    Value low = floatConstant(b, x.getType(), double(lowest));
    Value high = floatConstant(b, x.getType(), double(highest));
    Value result = arith::FPToSIOp::create(b, target, x);
    result = arith::SelectOp::create(b, arith::CmpFOp::create(b, P::OGE, x, high),
                                     intConstant(b, target, highest), result);
    result = arith::SelectOp::create(b, arith::CmpFOp::create(b, P::OLE, x, low),
                                     intConstant(b, target, lowest), result);
    return arith::SelectOp::create(b, arith::CmpFOp::create(b, P::UNO, x, x),
                                   intConstant(b, target, 0), result);
  }
  if (rt::isFloat(to)) {
    // Integers round once: directly to f32/f64, through f64 and round-to-odd to f16/bf16.
    if (!half)
      return arith::SIToFPOp::create(b, target, x);
    Value wide = arith::SIToFPOp::create(b, b.getF64Type(), x);
    return roundToHalf(b, roundedToOdd(b, wide), to);
  }
  if (to == DType::i64)
    return arith::ExtSIOp::create(b, target, x);
  return arith::TruncIOp::create(b, target, x); // i64 -> i32 wraps
}

} // namespace smelt::codegen::cpu
