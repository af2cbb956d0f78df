// How autodiff sums the gradients a value gets from its several users. Most are added one to
// the next, but gradients of slices are zero pads of a piece back to the sliced value's shape:
// an unrolled recurrence slices one step's input out of a [batch, time, features] tensor per
// step, and adding T full-size pads costs time and memory growing with T squared (issue 35: an
// LSTM over 128 steps peaked at 2 GiB). Pads that place pieces along one axis without
// overlapping become one concat of the pieces, with zeros between (what XLA's algebraic
// simplifier makes of add(pad, pad)); each value is then written once.
#pragma once

#include "mlir/IR/Builders.h"

namespace smelt {

/// The sum of `contributions` (one or more tensors of one type), built at `b`'s insertion
/// point. Zero pads of pieces along one axis are joined into concats, greedily in the order
/// of their offsets (a pad that overlaps one already taken starts another concat); the pads
/// joined are erased when nothing else uses them. The rest, and the concats, are added in
/// order.
mlir::Value sumGradients(mlir::OpBuilder &b, mlir::ArrayRef<mlir::Value> contributions);

/// A smelt.constant of zeros of the float tensor `type`: the gradient of a value the loss does
/// not depend on, and the gaps between joined pieces.
mlir::Value zerosLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type);

} // namespace smelt
