// Reverse-mode automatic differentiation over a block of smelt ops, shared by the
// smelt-autodiff pass (passes/Autodiff.cpp) and the builder's Graph::gradients.
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/Support/LLVM.h"

namespace smelt {

/// Builds, at `builder`'s insertion point, the gradient of the rank-0 float `loss` with
/// respect to each value of `wrt` (float tensors of the same block, usually its arguments):
///  1. marks the values that depend on some `wrt` (a forward walk) and those `loss` depends on
///     (a backward walk); only ops on both paths are differentiated, so unused gradient work is
///     never built;
///  2. seeds d loss = 1 and visits those ops in reverse, asking each for its vector-Jacobian
///     product (DifferentiableOpInterface) and summing the gradients of values used twice;
///  3. non-differentiable ops (compare, argmax, iota, rng, constant) stop the gradient.
/// A `wrt` value the loss does not depend on gets a zero gradient. Fails with a diagnostic on
/// the op that has no gradient rule.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> buildGradients(mlir::OpBuilder &builder,
                                                               mlir::Value loss,
                                                               mlir::ValueRange wrt);

} // namespace smelt
