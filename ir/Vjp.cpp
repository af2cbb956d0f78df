// Gradient rules (vector-Jacobian products) of the differentiable smelt ops. Each builds the
// operands' gradients from the result's gradient `g` with smelt ops at the forward op's
// location, so a backward op in an IR dump points at the line that made its forward op.
#include "ir/SmeltDialect.h"
#include "ir/SplatConstant.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <numeric>

using namespace mlir;

namespace smelt {

namespace {

bool isFloatTensor(Value v) {
  return isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
}

/// A constant of `like`'s type with every element `value`.
Value splat(OpBuilder &b, Location loc, Value like, double value) {
  auto type = cast<RankedTensorType>(like.getType());
  Type element = type.getElementType();
  Attribute scalar = isa<FloatType>(element) ? Attribute(b.getFloatAttr(element, value))
                                             : Attribute(b.getIntegerAttr(element, int64_t(value)));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, scalar));
}

Value mul(OpBuilder &b, Location loc, Value x, Value y) { return MulOp::create(b, loc, x, y); }
Value div(OpBuilder &b, Location loc, Value x, Value y) { return DivOp::create(b, loc, x, y); }
Value neg(OpBuilder &b, Location loc, Value x) { return NegOp::create(b, loc, x); }
Value select(OpBuilder &b, Location loc, Value p, Value x, Value y) {
  return SelectOp::create(b, loc, p, x, y);
}
Value compare(OpBuilder &b, Location loc, CompareDirection d, Value x, Value y) {
  return CompareOp::create(b, loc, d, x, y);
}

/// `g` summed over the dimensions `x` was broadcast along, reshaped to `x`'s shape.
Value unbroadcast(OpBuilder &b, Location loc, Value g, RankedTensorType xType,
                  ArrayRef<int64_t> dims) {
  auto gType = cast<RankedTensorType>(g.getType());
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < gType.getRank(); ++d) {
    auto it = llvm::find(dims, d);
    bool kept = it != dims.end() && xType.getDimSize(it - dims.begin()) == gType.getDimSize(d);
    if (!kept)
      axes.push_back(d);
  }
  Value summed = axes.empty() ? g : Value(ReduceOp::create(b, loc, ReduceKind::sum, g, axes));
  if (summed.getType() == xType)
    return summed;
  return ReshapeOp::create(b, loc, xType, summed);
}

/// Broadcasts `reduced` (x reduced over `axes`) back to `xType`.
Value rebroadcast(OpBuilder &b, Location loc, Value reduced, RankedTensorType xType,
                  ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < xType.getRank(); ++d)
    if (!llvm::is_contained(axes, d))
      kept.push_back(d);
  return BroadcastInDimOp::create(b, loc, xType.clone(cast<RankedTensorType>(reduced.getType())
                                                          .getElementType()),
                                  reduced, kept);
}

/// Spreads `g` along `axis` so its elements land `stride` apart: [n] -> [(n-1)*stride+1] with
/// zeros between (the adjoint of taking every stride-th element).
Value dilate(OpBuilder &b, Location loc, Value g, int64_t axis, int64_t stride) {
  auto type = cast<RankedTensorType>(g.getType());
  SmallVector<int64_t> shape(type.getShape());
  int64_t n = shape[axis];
  SmallVector<int64_t> split(shape);
  split.insert(split.begin() + axis + 1, 1);
  Value x = ReshapeOp::create(b, loc, type.clone(split), g);
  SmallVector<int64_t> low(split.size(), 0), high(split.size(), 0);
  high[axis + 1] = stride - 1;
  x = PadOp::create(b, loc, x, low, high, llvm::APFloat(0.0));
  SmallVector<int64_t> merged(shape);
  merged[axis] = n * stride;
  x = ReshapeOp::create(b, loc, type.clone(merged), x);
  SmallVector<int64_t> start(shape.size(), 0), limit(merged), steps(shape.size(), 1);
  limit[axis] = (n - 1) * stride + 1;
  return SliceOp::create(b, loc, x, start, limit, steps);
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Integer-typed elementwise ops have no gradient: their operands get none.
#define SMELT_FLOAT_ONLY(grads)                                                                \
  if (!isFloatTensor(getResult())) {                                                           \
    grads.append(getOperation()->getNumOperands(), Value());                                   \
    return success();                                                                          \
  }

LogicalResult NegOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  grads.push_back(neg(b, getLoc(), g));
  return success();
}

LogicalResult AbsOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  Location loc = getLoc();
  Value negative = compare(b, loc, CompareDirection::lt, getX(), splat(b, loc, getX(), 0));
  grads.push_back(select(b, loc, negative, neg(b, loc, g), g));
  return success();
}

LogicalResult ReluOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  Location loc = getLoc();
  Value zero = splat(b, loc, getX(), 0);
  // relu(x) > 0 exactly where x > 0: reading the result leaves x to relu alone, so smelt-fuse
  // can fold the relu into the matmul or conv2d that computes x.
  grads.push_back(
      select(b, loc, compare(b, loc, CompareDirection::gt, getResult(), zero), g, zero));
  return success();
}

LogicalResult ExpOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.push_back(mul(b, getLoc(), g, getResult()));
  return success();
}

LogicalResult LogOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.push_back(div(b, getLoc(), g, getX()));
  return success();
}

LogicalResult TanhOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value y = getResult();
  Value slope = SubOp::create(b, loc, splat(b, loc, y, 1), mul(b, loc, y, y));
  grads.push_back(mul(b, loc, g, slope));
  return success();
}

LogicalResult LogisticOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value y = getResult();
  Value slope = mul(b, loc, y, SubOp::create(b, loc, splat(b, loc, y, 1), y));
  grads.push_back(mul(b, loc, g, slope));
  return success();
}

LogicalResult SqrtOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value y = getResult();
  grads.push_back(div(b, loc, g, mul(b, loc, splat(b, loc, y, 2), y)));
  return success();
}

LogicalResult RsqrtOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3.
  Location loc = getLoc();
  Value y = getResult();
  Value cube = mul(b, loc, mul(b, loc, y, y), y);
  grads.push_back(mul(b, loc, g, mul(b, loc, splat(b, loc, y, -0.5), cube)));
  return success();
}

LogicalResult ErfOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  Value x = getX();
  Value gauss = ExpOp::create(b, loc, neg(b, loc, mul(b, loc, x, x)));
  Value slope = mul(b, loc, splat(b, loc, x, 2 / std::sqrt(M_PI)), gauss);
  grads.push_back(mul(b, loc, g, slope));
  return success();
}

LogicalResult SinOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.push_back(mul(b, getLoc(), g, CosOp::create(b, getLoc(), getX())));
  return success();
}

LogicalResult CosOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.push_back(mul(b, loc, g, neg(b, loc, SinOp::create(b, loc, getX()))));
  return success();
}

LogicalResult AddOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  grads.append({g, g});
  return success();
}

LogicalResult SubOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  grads.append({g, neg(b, getLoc(), g)});
  return success();
}

LogicalResult MulOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  grads.append({mul(b, getLoc(), g, getRhs()), mul(b, getLoc(), g, getLhs())});
  return success();
}

LogicalResult DivOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  // d(a/b)/db = -a/b^2 = -(a/b)/b.
  Location loc = getLoc();
  Value gb = div(b, loc, g, getRhs());
  grads.append({gb, neg(b, loc, mul(b, loc, gb, getResult()))});
  return success();
}

/// max and min send the gradient to the operand they picked; ties go to lhs.
static void chooserVjp(OpBuilder &b, Location loc, CompareDirection lhsWins, Value lhs,
                       Value rhs, Value g, SmallVectorImpl<Value> &grads) {
  Value zero = splat(b, loc, g, 0);
  Value pick = compare(b, loc, lhsWins, lhs, rhs);
  grads.append({select(b, loc, pick, g, zero), select(b, loc, pick, zero, g)});
}

LogicalResult MaxOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  chooserVjp(b, getLoc(), CompareDirection::ge, getLhs(), getRhs(), g, grads);
  return success();
}

LogicalResult MinOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  chooserVjp(b, getLoc(), CompareDirection::le, getLhs(), getRhs(), g, grads);
  return success();
}

LogicalResult PowOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  // d(a^b)/da = b a^(b-1); d(a^b)/db = log(a) a^b.
  Location loc = getLoc();
  Value a = getLhs(), e = getRhs(), y = getResult();
  // A constant exponent c gets the constant c - 1 (and a itself for c = 2), not a tensor of
  // e - 1 computed at run time: a kernel then sees x^2 as the product it is (FusionWalk).
  std::optional<double> c = floatSplatConstant(e);
  Value lower = c && *c == 2 ? a
                : c ? PowOp::create(b, loc, a, splat(b, loc, e, *c - 1))
                    : PowOp::create(b, loc, a, SubOp::create(b, loc, e, splat(b, loc, e, 1)));
  grads.push_back(mul(b, loc, g, mul(b, loc, e, lower)));
  grads.push_back(mul(b, loc, g, mul(b, loc, LogOp::create(b, loc, a), y)));
  return success();
}

LogicalResult SelectOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  if (!isFloatTensor(getResult())) {
    grads.append(3, Value());
    return success();
  }
  Location loc = getLoc();
  Value zero = splat(b, loc, g, 0);
  grads.append({Value(), select(b, loc, getPred(), g, zero), select(b, loc, getPred(), zero, g)});
  return success();
}

LogicalResult ConvertOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  // Through an integer the value is piecewise constant: no gradient.
  if (!isFloatTensor(getX()) || !isFloatTensor(getResult())) {
    grads.push_back(Value());
    return success();
  }
  grads.push_back(ConvertOp::create(b, getLoc(), getX().getType(), g));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.push_back(unbroadcast(b, getLoc(), g, getX().getType(), getBroadcastDimensions()));
  return success();
}

LogicalResult ReshapeOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.push_back(ReshapeOp::create(b, getLoc(), getX().getType(), g));
  return success();
}

LogicalResult TransposeOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = int64_t(i);
  grads.push_back(TransposeOp::create(b, getLoc(), g, inverse));
  return success();
}

LogicalResult SliceOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  // Spread strided picks apart, then pad back to the operand's extent.
  Location loc = getLoc();
  RankedTensorType x = getX().getType();
  ArrayRef<int64_t> start = getStartIndices(), strides = getStrides();
  Value spread = g;
  for (size_t d = 0; d < strides.size(); ++d)
    if (strides[d] > 1 && cast<RankedTensorType>(g.getType()).getDimSize(d) > 0)
      spread = dilate(b, loc, spread, int64_t(d), strides[d]);
  auto spreadType = cast<RankedTensorType>(spread.getType());
  SmallVector<int64_t> high;
  for (int64_t d = 0; d < x.getRank(); ++d)
    high.push_back(x.getDimSize(d) - start[d] - spreadType.getDimSize(d));
  grads.push_back(PadOp::create(b, loc, spread, start, high, llvm::APFloat(0.0)));
  return success();
}

// Each row of the table gets the sum of the gradients of the places that read it; an index
// gets no gradient (it is piecewise constant).
LogicalResult GatherOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  SMELT_FLOAT_ONLY(grads);
  int64_t rows = getTable().getType().getDimSize(0);
  grads.append({ScatterAddOp::create(b, getLoc(), g, getIndices(), rows), Value()});
  return success();
}

// scatter_add is linear in `updates`: each update's gradient is the result's gradient at the
// (clamped) row it was added to.
LogicalResult ScatterAddOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.append({GatherOp::create(b, getLoc(), g, getIndices()), Value()});
  return success();
}

LogicalResult ConcatOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  int64_t dim = getDimension(), offset = 0;
  auto gType = cast<RankedTensorType>(g.getType());
  for (Value input : getInputs()) {
    auto t = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> start(t.getRank(), 0), limit(gType.getShape()), steps(t.getRank(), 1);
    start[dim] = offset;
    limit[dim] = offset + t.getDimSize(dim);
    offset += t.getDimSize(dim);
    grads.push_back(SliceOp::create(b, getLoc(), g, start, limit, steps));
  }
  return success();
}

LogicalResult PadOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  RankedTensorType x = getX().getType();
  SmallVector<int64_t> start(getLow()), limit, steps(x.getRank(), 1);
  for (int64_t d = 0; d < x.getRank(); ++d)
    limit.push_back(start[d] + x.getDimSize(d));
  grads.push_back(SliceOp::create(b, getLoc(), g, start, limit, steps));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  if (!isFloatTensor(getX())) {
    grads.push_back(Value());
    return success();
  }
  Location loc = getLoc();
  RankedTensorType x = getX().getType();
  ArrayRef<int64_t> axes = getAxes();
  Value spread = rebroadcast(b, loc, g, x, axes);
  if (getKind() == ReduceKind::sum) {
    grads.push_back(spread);
    return success();
  }
  // max / min: split the gradient evenly between the elements that tie for the extreme.
  Value hit = compare(b, loc, CompareDirection::eq, getX(),
                      rebroadcast(b, loc, getResult(), x, axes));
  Value mask = ConvertOp::create(b, loc, x, hit);
  Value count = rebroadcast(b, loc, ReduceOp::create(b, loc, ReduceKind::sum, mask, axes), x, axes);
  grads.push_back(div(b, loc, mul(b, loc, spread, mask), count));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// Epilogues are folded after autodiff; a contraction that has one is past differentiating.
static LogicalResult refuseEpilogue(Operation *op, Value bias, std::optional<Epilogue> act) {
  if (!bias && !act)
    return success();
  return op->emitOpError("has a folded epilogue (bias or activation) and no gradient rule: "
                         "differentiate before smelt-fuse folds epilogues");
}

LogicalResult MatmulOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  if (failed(refuseEpilogue(*this, getBias(), getActivation())))
    return failure();
  // With C = op(A) op(B): d op(A) = G op(B)^T and d op(B) = op(A)^T G; transposing back where
  // an operand was transposed picks these flag combinations.
  Location loc = getLoc();
  Value a = getLhs(), bm = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  auto mm = [&](Value x, Value y, bool tx, bool ty) -> Value {
    return MatmulOp::create(b, loc, x, y, /*bias=*/Value(), tx ? b.getUnitAttr() : UnitAttr(),
                            ty ? b.getUnitAttr() : UnitAttr(), EpilogueAttr());
  };
  if (!ta && !tb)
    grads.append({mm(g, bm, false, true), mm(a, g, true, false)});
  else if (!ta && tb)
    grads.append({mm(g, bm, false, false), mm(g, a, true, false)});
  else if (ta && !tb)
    grads.append({mm(bm, g, false, true), mm(a, g, false, false)});
  else
    grads.append({mm(bm, g, true, true), mm(g, a, true, true)});
  return success();
}

LogicalResult Conv2DOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  if (failed(refuseEpilogue(*this, getBias(), getActivation())))
    return failure();
  Location loc = getLoc();
  grads.push_back(Conv2DBackwardInputOp::create(b, loc, getInput().getType(), g, getFilter(),
                                                getStrides(), getPadding(), getDilation(),
                                                getFeatureGroupCount(), getFilterLayout()));
  grads.push_back(Conv2DBackwardFilterOp::create(b, loc, getFilter().getType(), getInput(), g,
                                                 getStrides(), getPadding(), getDilation(),
                                                 getFeatureGroupCount(), getFilterLayout()));
  return success();
}

// conv2d_backward_input (ONNX's ConvTranspose) is the adjoint of conv2d's map from input to
// result, so its own adjoint is that conv2d; and as <dL/dr, conv2d(x, w)^T g> equals
// <conv2d(dL/dr, w), g>, its filter gradient is conv2d's with the roles of input and result
// gradient swapped.
LogicalResult Conv2DBackwardInputOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  Location loc = getLoc();
  grads.push_back(Conv2DOp::create(b, loc, getGradOutput().getType(), g, getFilter(),
                                   /*bias=*/Value(), getStrides(), getPadding(), getDilation(),
                                   getFeatureGroupCount(), EpilogueAttr(), getFilterLayout()));
  grads.push_back(Conv2DBackwardFilterOp::create(b, loc, getFilter().getType(), g, getGradOutput(),
                                                 getStrides(), getPadding(), getDilation(),
                                                 getFeatureGroupCount(), getFilterLayout()));
  return success();
}

LogicalResult MaxPool2DOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.push_back(MaxPool2DBackwardOp::create(b, getLoc(), getInput(), g, getWindow(),
                                              getStrides(), getPadding()));
  return success();
}

LogicalResult AvgPool2DOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  grads.push_back(AvgPool2DBackwardOp::create(b, getLoc(), getInput().getType(), g, getWindow(),
                                              getStrides(), getPadding()));
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::vjp(OpBuilder &b, Value g, SmallVectorImpl<Value> &grads) {
  // Every replica's result depends on every replica's operand, so an operand's gradient sums
  // (or averages) the result gradients of all replicas: the same all_reduce, transposed.
  // Autodiff only hands single-result ops a gradient (passes/Autodiff.cpp).
  if (!isFloatTensor(getXs()[0])) {
    grads.push_back(Value());
    return success();
  }
  grads.push_back(AllReduceOp::create(b, getLoc(), getKind(), ValueRange{g}, getReplicas())
                      .getResult(0));
  return success();
}

} // namespace smelt
