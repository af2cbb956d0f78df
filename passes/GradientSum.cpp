// Summing a value's gradients, pads of pieces joined into concats (GradientSum.h).
#include "passes/GradientSum.h"

#include "ir/SmeltDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>
#include <optional>

using namespace mlir;

namespace smelt {

namespace {

/// The one axis along which a zero pad places its operand (every other axis unpadded, no
/// negative amount); nullopt for any other pad.
std::optional<int64_t> placedAlong(PadOp pad) {
  if (pad.getValue().convertToDouble() != 0.0)
    return std::nullopt;
  std::optional<int64_t> axis;
  for (auto [d, low, high] : llvm::enumerate(pad.getLow(), pad.getHigh())) {
    if (low == 0 && high == 0)
      continue;
    if (low < 0 || high < 0 || axis)
      return std::nullopt;
    axis = int64_t(d);
  }
  return axis;
}

/// One concat along `axis` of the pads' pieces (sorted by offset, not overlapping), zeros
/// filling the gaps, in the pads' result type.
Value joinPieces(OpBuilder &b, MutableArrayRef<PadOp> pads, int64_t axis) {
  Location loc = pads.front().getLoc();
  auto type = cast<RankedTensorType>(pads.front().getType());
  SmallVector<Value> parts;
  int64_t at = 0;
  auto fill = [&](int64_t until) {
    if (until <= at)
      return;
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = until - at;
    parts.push_back(zerosLike(b, loc, type.clone(shape)));
  };
  for (PadOp pad : pads) {
    int64_t low = pad.getLow()[axis];
    fill(low);
    parts.push_back(pad.getX());
    at = low + pad.getX().getType().getDimSize(axis);
  }
  fill(type.getDimSize(axis));
  return ConcatOp::create(b, loc, parts, uint64_t(axis));
}

} // namespace

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(tensor, b.getFloatAttr(tensor.getElementType(), 0.0)));
}

Value sumGradients(OpBuilder &b, ArrayRef<Value> contributions) {
  // Pads by axis, in the order they came; everything else as it is.
  llvm::MapVector<int64_t, SmallVector<PadOp>> byAxis;
  SmallVector<Value> terms;
  for (Value g : contributions) {
    auto pad = g.getDefiningOp<PadOp>();
    std::optional<int64_t> axis = pad ? placedAlong(pad) : std::nullopt;
    if (axis)
      byAxis[*axis].push_back(pad);
    else
      terms.push_back(g);
  }
  SmallVector<Operation *> joined;
  for (auto &[axis, pads] : byAxis) {
    int64_t along = axis;
    std::stable_sort(pads.begin(), pads.end(), [&](PadOp x, PadOp y) {
      return x.getLow()[along] < y.getLow()[along];
    });
    // Rounds of greedy picks: each takes the pads that start past the last one it took.
    while (!pads.empty()) {
      SmallVector<PadOp> round, rest;
      int64_t end = 0;
      for (PadOp pad : pads) {
        if (pad.getLow()[along] >= end) {
          round.push_back(pad);
          end = pad.getLow()[along] + pad.getX().getType().getDimSize(along);
        } else {
          rest.push_back(pad);
        }
      }
      if (round.size() == 1) {
        terms.push_back(round.front());
      } else {
        terms.push_back(joinPieces(b, round, along));
        joined.append(round.begin(), round.end());
      }
      pads = std::move(rest);
    }
  }
  Value sum = terms.front();
  for (Value term : ArrayRef<Value>(terms).drop_front())
    sum = AddOp::create(b, term.getLoc(), sum, term);
  for (Operation *pad : joined)
    if (pad->use_empty())
      pad->erase();
  return sum;
}

} // namespace smelt
