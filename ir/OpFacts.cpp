// Element types as the bits the op facts use (ir/OpFacts.h).
#include "ir/OpFacts.h"

#include "mlir/IR/BuiltinTypes.h"

namespace smelt {

unsigned elementBit(mlir::Type type) {
  if (auto shaped = mlir::dyn_cast<mlir::ShapedType>(type))
    type = shaped.getElementType();
  if (type.isF32())
    return kF32;
  if (type.isF16())
    return kF16;
  if (type.isBF16())
    return kBF16;
  if (type.isF64())
    return kF64;
  if (type.isInteger(32))
    return kI32;
  if (type.isInteger(64))
    return kI64;
  if (type.isInteger(1))
    return kI1;
  return 0;
}

} // namespace smelt
