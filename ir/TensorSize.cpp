// The size limit on smelt tensors (ir/TensorSize.h). Sizes are multiplied with overflow checks:
// a shape such as 2^40 x 2^40 must be refused, not wrap to a small count.
#include "ir/TensorSize.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace smelt {

std::optional<int64_t> tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return std::nullopt;
  if (llvm::is_contained(tensor.getShape(), 0))
    return 0;
  Type element = tensor.getElementType();
  int64_t bytes = element.isIntOrFloat() ? std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8)
                                         : 1;
  for (int64_t size : tensor.getShape())
    if (llvm::MulOverflow(bytes, size, bytes) || bytes > kMaxTensorBytes)
      return std::nullopt;
  return bytes;
}

LogicalResult verifyTensorSizes(Operation *op) {
  auto check = [&](Type type, StringRef role, unsigned i) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || tensorBytes(type))
      return success(); // other types are the type constraints' business
    return op->emitOpError() << role << " #" << i << " has type " << type
                             << ", larger than the limit of 2^48 bytes (256 TiB) on a tensor";
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", i)))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", i)))
      return failure();
  return success();
}

} // namespace smelt
