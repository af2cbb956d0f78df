// The size limit on smelt tensors, checked on every smelt op's operands and results when the
// module is verified (a trait every Smelt_Op has): element counts and byte sizes must fit
// comfortably in int64, so no pass, back end or runtime step computes a size that wraps.
#pragma once

#include "mlir/IR/OpDefinition.h"

#include <optional>

namespace smelt {

/// The largest byte size a smelt tensor may have: 2^48 (256 TiB), more than any device holds
/// and far below where int64 offsets and element counts (times 8 bytes) could overflow.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

/// The bytes a static tensor of `type` occupies (i1 as one byte), or nullopt when its element
/// count or byte size is above kMaxTensorBytes (or the type has no static shape).
std::optional<int64_t> tensorBytes(mlir::Type type);

/// An error at `op` naming the first operand or result whose type is too large.
mlir::LogicalResult verifyTensorSizes(mlir::Operation *op);

namespace OpTrait {
template <typename ConcreteOp>
class TensorsFitInMemory : public mlir::OpTrait::TraitBase<ConcreteOp, TensorsFitInMemory> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) { return verifyTensorSizes(op); }
};
} // namespace OpTrait

} // namespace smelt
