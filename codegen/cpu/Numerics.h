// Element numerics of the CPU kernels as arith ops: the types elements compute in and are
// stored as, loads and stores, and smelt.convert. Every rounding is bit for bit the runtime's
// (runtime/Half.h, runtime/DTypeDispatch.h), so a fused kernel stores what the unfused ops do.
#pragma once

#include "runtime/DType.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace smelt::codegen::cpu {

/// f32 for f32/f16/bf16, f64, i32, i64, and i1 for i1.
mlir::Type computeType(mlir::MLIRContext *context, rt::DType dtype);

/// The lowest and highest value of integer `dtype` (i32 or i64).
std::pair<int64_t, int64_t> integerLimits(rt::DType dtype);

/// An integer or float constant of `type` (integers wrap to the type's width).
mlir::Value intConstant(mlir::ImplicitLocOpBuilder &b, mlir::Type type, int64_t value);
mlir::Value floatConstant(mlir::ImplicitLocOpBuilder &b, mlir::Type type, double value);

/// Element `index` (i64) of the `dtype` buffer at `base` (an !llvm.ptr), in its compute type.
mlir::Value loadElement(mlir::ImplicitLocOpBuilder &b, mlir::Value base, mlir::Value index,
                        rt::DType dtype);
/// Stores compute value `value` as element `index` of the `dtype` buffer at `base`: f16 and
/// bf16 round to nearest even, i1 is one byte 0 or 1.
void storeElement(mlir::ImplicitLocOpBuilder &b, mlir::Value base, mlir::Value index,
                  mlir::Value value, rt::DType dtype);

/// smelt.convert of compute value `x` from `from` to `to` (docs/ops.md): floats round once,
/// float to integer truncates and saturates with NaN -> 0, anything to i1 is x != 0.
mlir::Value convertElement(mlir::ImplicitLocOpBuilder &b, mlir::Value x, rt::DType from,
                           rt::DType to);

} // namespace smelt::codegen::cpu
