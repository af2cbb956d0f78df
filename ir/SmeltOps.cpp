// Shape rules, verifiers, folders and custom assembly of the smelt ops. Each inferred op's rule
// is the one check the parser, the verifier and the C++ builder all run, so a shape error reads
// the same wherever it is caught.
#include "ir/SmeltDialect.h"

#include "ir/Bracketed.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <numeric>

using namespace mlir;

namespace smelt {

namespace {

/// Emits "'smelt.<op>' op <message>" at `location` (when there is one) and returns failure.
template <typename... Args>
LogicalResult fail(std::optional<Location> location, StringRef opName, Args &&...args) {
  if (!location)
    return failure();
  InFlightDiagnostic diag = emitError(*location) << "'" << opName << "' op ";
  (diag << ... << std::forward<Args>(args));
  return diag;
}

RankedTensorType tensorOf(Value value) { return cast<RankedTensorType>(value.getType()); }

/// Checks that `attrName` holds `count` values, each at least `minimum`.
LogicalResult checkWindowAttr(std::optional<Location> location, StringRef opName,
                              StringRef attrName, ArrayRef<int64_t> values, size_t count,
                              int64_t minimum) {
  if (values.size() != count)
    return fail(location, opName, "attribute '", attrName, "' needs ", count, " values, got ",
                bracketed(values));
  for (int64_t v : values)
    if (v < minimum)
      return fail(location, opName, "attribute '", attrName, "' = ", bracketed(values),
                  " has a value below ", minimum);
  return success();
}

LogicalResult checkRank(std::optional<Location> location, StringRef opName, StringRef operand,
                        RankedTensorType type, int64_t rank, StringRef layout) {
  if (type.getRank() != rank)
    return fail(location, opName, "operand '", operand, "' must be rank ", rank, " (", layout,
                "), got ", type);
  return success();
}

/// The NHWC result shape of a convolution of `input` (NHWC) with `filter` (HWIO, or OHWI by
/// `layout`) in `groups` feature groups.
FailureOr<SmallVector<int64_t>>
convResultShape(std::optional<Location> location, StringRef opName, RankedTensorType input,
                RankedTensorType filter, ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                ArrayRef<int64_t> dilation, int64_t groups, FilterLayout layout) {
  bool ohwi = layout == FilterLayout::ohwi;
  if (failed(checkRank(location, opName, "input", input, 4, "NHWC")) ||
      failed(checkRank(location, opName, "filter", filter, 4, ohwi ? "OHWI" : "HWIO")) ||
      failed(checkWindowAttr(location, opName, "strides", strides, 2, 1)) ||
      failed(checkWindowAttr(location, opName, "padding", padding, 4, 0)) ||
      failed(checkWindowAttr(location, opName, "dilation", dilation, 2, 1)))
    return failure();
  ArrayRef<int64_t> in = input.getShape(), stored = filter.getShape();
  // The filter's dimensions in HWIO order, whatever its layout.
  SmallVector<int64_t> k = ohwi ? SmallVector<int64_t>{stored[1], stored[2], stored[3], stored[0]}
                                : SmallVector<int64_t>(stored);
  if (groups < 1)
    return fail(location, opName, "feature_group_count = ", groups, " must be at least 1");
  if (in[3] % groups != 0 || k[3] % groups != 0)
    return fail(location, opName, "feature_group_count = ", groups, " must divide the input's ",
                in[3], " channels (", input, ") and the filter's ", k[3], " output channels (",
                filter, ")");
  if (in[3] != k[2] * groups)
    return fail(location, opName, "input has ", in[3], " channels (", input,
                ") but filter expects ", k[2] * groups, " (", filter,
                groups == 1 ? ")" : ", " + std::to_string(k[2]) + " per group of " +
                                        std::to_string(groups) + ")");
  if (input.getElementType() != filter.getElementType())
    return fail(location, opName, "input ", input, " and filter ", filter,
                " have different element types");
  SmallVector<int64_t> out = {in[0], 0, 0, k[3]};
  for (int i = 0; i < 2; ++i) {
    int64_t padded = in[1 + i] + padding[2 * i] + padding[2 * i + 1];
    int64_t extent = dilation[i] * (k[i] - 1) + 1;
    if (padded < extent)
      return fail(location, opName, "filter window ", extent, " (dilated) is larger than the ",
                  i ? "width " : "height ", padded, " (padded) of input ", input);
    out[1 + i] = (padded - extent) / strides[i] + 1;
  }
  return out;
}

/// The NHWC result shape of pooling `input` with `window`.
FailureOr<SmallVector<int64_t>> poolResultShape(std::optional<Location> location,
                                                StringRef opName, RankedTensorType input,
                                                ArrayRef<int64_t> window,
                                                ArrayRef<int64_t> strides,
                                                ArrayRef<int64_t> padding) {
  if (failed(checkRank(location, opName, "input", input, 4, "NHWC")) ||
      failed(checkWindowAttr(location, opName, "window", window, 2, 1)) ||
      failed(checkWindowAttr(location, opName, "strides", strides, 2, 1)) ||
      failed(checkWindowAttr(location, opName, "padding", padding, 4, 0)))
    return failure();
  ArrayRef<int64_t> in = input.getShape();
  SmallVector<int64_t> out = {in[0], 0, 0, in[3]};
  for (int i = 0; i < 2; ++i) {
    if (padding[2 * i] >= window[i] || padding[2 * i + 1] >= window[i])
      return fail(location, opName, "padding ", bracketed(padding),
                  " must be smaller than the window ", bracketed(window),
                  " so no window sees only padding");
    int64_t padded = in[1 + i] + padding[2 * i] + padding[2 * i + 1];
    if (padded < window[i])
      return fail(location, opName, "window ", bracketed(window), " is larger than input ", input);
    out[1 + i] = (padded - window[i]) / strides[i] + 1;
  }
  return out;
}

/// Checks that `actual` has `expected` as its shape; `what` names the operand or result.
LogicalResult checkShape(std::optional<Location> location, StringRef opName, StringRef what,
                         RankedTensorType actual, ArrayRef<int64_t> expected) {
  if (actual.getShape() != expected)
    return fail(location, opName, what, " has type ", actual,
                " but the window attributes need "
                "shape ",
                bracketed(expected));
  return success();
}

} // namespace

LogicalResult inferSameTypes(std::optional<Location> location, StringRef opName,
                             ArrayRef<StringRef> names, ValueRange values,
                             SmallVectorImpl<Type> &types) {
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i].getType() != values[0].getType())
      return fail(location, opName, "operand #", i, " (", names[i], ") has type ",
                  values[i].getType(), " but ", names[0], " has type ", values[0].getType());
  types.push_back(values[0].getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Custom assembly: one type for operands that share it; slice ranges
//===----------------------------------------------------------------------===//

static ParseResult parseSameTypes(OpAsmParser &parser, Type &first, Type &second) {
  if (parser.parseType(first))
    return failure();
  second = first;
  if (succeeded(parser.parseOptionalComma()))
    return parser.parseType(second);
  return success();
}

static void printSameTypes(OpAsmPrinter &printer, Operation *, Type first, Type second) {
  printer << first;
  if (second != first)
    printer << ", " << second;
}

// `[start:limit:stride, ...]`, one triple per dimension.
static ParseResult parseSliceRanges(OpAsmParser &parser, DenseI64ArrayAttr &start,
                                    DenseI64ArrayAttr &limit, DenseI64ArrayAttr &strides) {
  SmallVector<int64_t> starts, limits, steps;
  auto parseTriple = [&]() -> ParseResult {
    int64_t a, b, c;
    if (parser.parseInteger(a) || parser.parseColon() || parser.parseInteger(b) ||
        parser.parseColon() || parser.parseInteger(c))
      return failure();
    starts.push_back(a);
    limits.push_back(b);
    steps.push_back(c);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, parseTriple))
    return failure();
  MLIRContext *ctx = parser.getContext();
  start = DenseI64ArrayAttr::get(ctx, starts);
  limit = DenseI64ArrayAttr::get(ctx, limits);
  strides = DenseI64ArrayAttr::get(ctx, steps);
  return success();
}

static void printSliceRanges(OpAsmPrinter &printer, Operation *, DenseI64ArrayAttr start,
                             DenseI64ArrayAttr limit, DenseI64ArrayAttr strides) {
  printer << "[";
  for (size_t i = 0; i < start.size(); ++i)
    printer << (i ? ", " : "") << start[i] << ":" << (i < limit.size() ? limit[i] : 0) << ":"
            << (i < strides.size() ? strides[i] : 0);
  printer << "]";
}

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto type = dyn_cast<RankedTensorType>(adaptor.getValue().getType());
  if (!type || !type.hasStaticShape())
    return fail(location, getOperationName(), "value must have a static tensor type, got ",
                adaptor.getValue().getType());
  types.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult IotaOp::verify() {
  int64_t rank = getType().getRank();
  if (getDimension() < 0 || getDimension() >= rank)
    return emitOpError("dimension ") << getDimension() << " is out of range for result "
                                     << getType() << " of rank " << rank;
  return success();
}

LogicalResult RngUniformOp::verify() {
  if (!(getLow().convertToDouble() < getHigh().convertToDouble()))
    return emitOpError("low = ") << getLow().convertToDouble() << " must be below high = "
                                 << getHigh().convertToDouble();
  return success();
}

LogicalResult RngNormalOp::verify() {
  if (!(getStddev().convertToDouble() >= 0))
    return emitOpError("stddev = ") << getStddev().convertToDouble() << " must be >= 0";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(inferSameTypes(location, getOperationName(), {"lhs", "rhs"},
                            {adaptor.getLhs(), adaptor.getRhs()}, types)))
    return failure();
  types[0] = tensorOf(adaptor.getLhs()).clone(IntegerType::get(ctx, 1));
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (failed(inferSameTypes(location, getOperationName(), {"on_true", "on_false"},
                            {adaptor.getOnTrue(), adaptor.getOnFalse()}, types)))
    return failure();
  RankedTensorType pred = tensorOf(adaptor.getPred()), value = tensorOf(adaptor.getOnTrue());
  if (pred.getShape() != value.getShape())
    return fail(location, getOperationName(), "operand #0 (pred) has type ", pred,
                " but on_true has type ", value, ": shapes must match");
  return success();
}

LogicalResult ConvertOp::verify() {
  if (getX().getType().getShape() != getType().getShape())
    return emitOpError("result ") << getType() << " must have the shape of operand "
                                  << getX().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  RankedTensorType in = getX().getType(), out = getType();
  ArrayRef<int64_t> map = getBroadcastDimensions();
  if (in.getElementType() != out.getElementType())
    return emitOpError("result ") << out << " must have the element type of operand " << in;
  if ((int64_t)map.size() != in.getRank())
    return emitOpError("dims = ") << bracketed(map) << " needs one entry per dimension of operand "
                                  << in;
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0 || map[i] >= out.getRank())
      return emitOpError("dims = ")
             << bracketed(map) << ": entry " << i << " is out of range for result " << out;
    if (i && map[i] <= map[i - 1])
      return emitOpError("dims = ") << bracketed(map) << " must be strictly increasing";
    int64_t from = in.getDimSize(i), to = out.getDimSize(map[i]);
    if (from != 1 && from != to)
      return emitOpError("operand ") << in << " dimension " << i << " (size " << from
                                     << ") cannot broadcast to result " << out << " dimension "
                                     << map[i] << " (size " << to << ")";
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getX().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("result ") << out << " must have the element type of operand " << in;
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("operand ") << in << " has " << in.getNumElements()
                                   << " elements but result " << out << " has "
                                   << out.getNumElements();
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType in = tensorOf(adaptor.getX());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  SmallVector<int64_t> identity(in.getRank());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    return fail(location, getOperationName(), "permutation = ", bracketed(perm),
                " is not a permutation of the ", in.getRank(), " dimensions of ", in);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(in.getDimSize(p));
  types.push_back(in.clone(shape));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType in = tensorOf(adaptor.getX());
  ArrayRef<int64_t> start = adaptor.getStartIndices(), limit = adaptor.getLimitIndices(),
                    strides = adaptor.getStrides();
  size_t rank = in.getRank();
  if (start.size() != rank || limit.size() != rank || strides.size() != rank)
    return fail(location, getOperationName(), "needs one start:limit:stride per dimension of ",
                in, ", got ", start.size(), "/", limit.size(), "/", strides.size());
  SmallVector<int64_t> shape;
  for (size_t i = 0; i < rank; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > in.getDimSize(i) || strides[i] < 1)
      return fail(location, getOperationName(), "range ", start[i], ":", limit[i], ":",
                  strides[i], " of dimension ", i, " is invalid for ", in,
                  " (need 0 <= start <= limit <= size and stride >= 1)");
    shape.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  types.push_back(in.clone(shape));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return fail(location, getOperationName(), "needs at least one operand");
  RankedTensorType first = tensorOf(inputs[0]);
  int64_t dim = adaptor.getDimension();
  if (dim < 0 || dim >= first.getRank())
    return fail(location, getOperationName(), "dimension ", dim, " is out of range for ",
                first);
  SmallVector<int64_t> shape(first.getShape());
  for (size_t i = 1; i < inputs.size(); ++i) {
    RankedTensorType t = tensorOf(inputs[i]);
    bool fits = t.getElementType() == first.getElementType() && t.getRank() == first.getRank();
    for (int64_t d = 0; fits && d < t.getRank(); ++d)
      fits = d == dim || t.getDimSize(d) == first.getDimSize(d);
    if (!fits)
      return fail(location, getOperationName(), "operand #", i, " has type ", t,
                  " which does not match operand #0 ", first, " outside dimension ", dim);
    shape[dim] += t.getDimSize(dim);
  }
  types.push_back(first.clone(shape));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType in = tensorOf(adaptor.getX());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if ((int64_t)low.size() != in.getRank() || (int64_t)high.size() != in.getRank())
    return fail(location, getOperationName(), "low = ", bracketed(low),
                " and high = ", bracketed(high), " need one entry per dimension of ", in);
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (low[i] < 0 || high[i] < 0)
      return fail(location, getOperationName(), "low = ", bracketed(low),
                  " and high = ", bracketed(high), " must not be negative");
    shape.push_back(in.getDimSize(i) + low[i] + high[i]);
  }
  types.push_back(in.clone(shape));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType in = tensorOf(adaptor.getX());
  ArrayRef<int64_t> axes = adaptor.getAxes();
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= in.getRank())
      return fail(location, getOperationName(), "axes = ", bracketed(axes), ": axis ", axes[i],
                  " is out of range for ", in);
    if (i && axes[i] <= axes[i - 1])
      return fail(location, getOperationName(), "axes = ", bracketed(axes),
                  " must be strictly increasing");
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!llvm::is_contained(axes, d))
      shape.push_back(in.getDimSize(d));
  types.push_back(in.clone(shape));
  return success();
}

//===----------------------------------------------------------------------===//
// Gather and scatter
//===----------------------------------------------------------------------===//

namespace {

/// The operand `indices` of a gather or scatter_add: i32 or i64 elements.
LogicalResult checkIndices(std::optional<Location> location, StringRef opName,
                           RankedTensorType indices) {
  if (!indices.getElementType().isSignlessInteger(32) &&
      !indices.getElementType().isSignlessInteger(64))
    return fail(location, opName, "operand 'indices' must hold i32 or i64, got ", indices);
  return success();
}

} // namespace

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType table = tensorOf(adaptor.getTable()), indices = tensorOf(adaptor.getIndices());
  StringRef name = getOperationName();
  if (failed(checkIndices(location, name, indices)))
    return failure();
  if (table.getRank() < 1 || table.getDimSize(0) < 1)
    return fail(location, name, "operand 'table' must have at least one row to gather from, got ",
                table);
  SmallVector<int64_t> shape(indices.getShape());
  llvm::append_range(shape, table.getShape().drop_front());
  types.push_back(table.clone(shape));
  return success();
}

LogicalResult ScatterAddOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType updates = tensorOf(adaptor.getUpdates()),
                   indices = tensorOf(adaptor.getIndices());
  StringRef name = getOperationName();
  if (failed(checkIndices(location, name, indices)))
    return failure();
  if (!isa<FloatType>(updates.getElementType()))
    return fail(location, name, "operand 'updates' must hold floats (it sums gradients), got ",
                updates);
  int64_t size = adaptor.getSize();
  if (size < 1)
    return fail(location, name, "size = ", size, " must be at least 1 (the result's rows)");
  if (updates.getRank() < indices.getRank() ||
      updates.getShape().take_front(indices.getRank()) != indices.getShape())
    return fail(location, name, "operand 'updates' ", updates,
                " must start with the shape of operand 'indices' ", indices);
  SmallVector<int64_t> shape = {size};
  llvm::append_range(shape, updates.getShape().drop_front(indices.getRank()));
  types.push_back(updates.clone(shape));
  return success();
}

LogicalResult ArgmaxOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType in = tensorOf(adaptor.getX());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= in.getRank())
    return fail(location, getOperationName(), "axis ", axis, " is out of range for ", in);
  if (in.getDimSize(axis) == 0)
    return fail(location, getOperationName(), "axis ", axis, " of ", in, " is empty");
  SmallVector<int64_t> shape(in.getShape());
  shape.erase(shape.begin() + axis);
  types.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType lhs = tensorOf(adaptor.getLhs()), rhs = tensorOf(adaptor.getRhs());
  StringRef name = getOperationName();
  if (lhs.getRank() < 2 || rhs.getRank() != lhs.getRank())
    return fail(location, name, "operands must have the same rank >= 2, got lhs ", lhs,
                " and rhs ", rhs);
  if (lhs.getElementType() != rhs.getElementType())
    return fail(location, name, "lhs ", lhs, " and rhs ", rhs,
                " have different element types");
  int64_t r = lhs.getRank();
  if (lhs.getShape().drop_back(2) != rhs.getShape().drop_back(2))
    return fail(location, name, "batch dimensions of lhs ", lhs, " and rhs ", rhs, " differ");
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  int64_t m = lhs.getDimSize(tl ? r - 1 : r - 2), kl = lhs.getDimSize(tl ? r - 2 : r - 1);
  int64_t kr = rhs.getDimSize(tr ? r - 1 : r - 2), n = rhs.getDimSize(tr ? r - 2 : r - 1);
  if (kl != kr)
    return fail(location, name, "contracting dimensions differ: lhs ", lhs,
                tl ? " (transposed)" : "", " has K = ", kl, " but rhs ", rhs,
                tr ? " (transposed)" : "", " has K = ", kr);
  SmallVector<int64_t> shape(lhs.getShape().drop_back(2));
  shape.append({m, n});
  types.push_back(lhs.clone(shape));
  return success();
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  FailureOr<SmallVector<int64_t>> shape = convResultShape(
      location, getOperationName(), input, tensorOf(adaptor.getFilter()), adaptor.getStrides(),
      adaptor.getPadding(), adaptor.getDilation(),
      // Inference runs before the parser fills in default attributes.
      adaptor.getFeatureGroupCountAttr() ? adaptor.getFeatureGroupCountAttr().getInt() : 1,
      adaptor.getFilterLayoutAttr() ? adaptor.getFilterLayout() : FilterLayout::hwio);
  if (failed(shape))
    return failure();
  types.push_back(input.clone(*shape));
  return success();
}

/// A contraction's epilogue bias: one value per column of the result (its last dimension),
/// of the result's element type.
static LogicalResult verifyBias(Operation *op, Value bias, RankedTensorType result) {
  if (!bias)
    return success();
  auto type = cast<RankedTensorType>(bias.getType());
  int64_t n = result.getShape().back();
  if (type.getRank() != 1 || type.getDimSize(0) != n ||
      type.getElementType() != result.getElementType())
    return op->emitOpError() << "bias has type " << type << " but the result " << result
                             << " needs " << RankedTensorType::get({n}, result.getElementType())
                             << ": one value per element of its last dimension";
  return success();
}

LogicalResult MatmulOp::verify() { return verifyBias(*this, getBias(), getType()); }
LogicalResult Conv2DOp::verify() { return verifyBias(*this, getBias(), getType()); }

LogicalResult Conv2DBackwardInputOp::verify() {
  FailureOr<SmallVector<int64_t>> forward =
      convResultShape(getLoc(), getOperationName(), getType(), getFilter().getType(), getStrides(),
                      getPadding(), getDilation(), getFeatureGroupCount(), getFilterLayout());
  if (failed(forward))
    return failure();
  return checkShape(getLoc(), getOperationName(), "grad_output", getGradOutput().getType(),
                    *forward);
}

LogicalResult Conv2DBackwardFilterOp::verify() {
  FailureOr<SmallVector<int64_t>> forward =
      convResultShape(getLoc(), getOperationName(), getInput().getType(), getType(), getStrides(),
                      getPadding(), getDilation(), getFeatureGroupCount(), getFilterLayout());
  if (failed(forward))
    return failure();
  return checkShape(getLoc(), getOperationName(), "grad_output", getGradOutput().getType(),
                    *forward);
}

template <typename PoolOp>
static LogicalResult inferPool(std::optional<Location> location,
                               typename PoolOp::Adaptor adaptor, SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  FailureOr<SmallVector<int64_t>> shape =
      poolResultShape(location, PoolOp::getOperationName(), input, adaptor.getWindow(),
                      adaptor.getStrides(), adaptor.getPadding());
  if (failed(shape))
    return failure();
  types.push_back(input.clone(*shape));
  return success();
}

LogicalResult MaxPool2DOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferPool<MaxPool2DOp>(location, adaptor, types);
}

LogicalResult AvgPool2DOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferPool<AvgPool2DOp>(location, adaptor, types);
}

LogicalResult MaxPool2DBackwardOp::inferReturnTypes(MLIRContext *,
                                                    std::optional<Location> location,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
  RankedTensorType input = tensorOf(adaptor.getInput()), grad = tensorOf(adaptor.getGradOutput());
  FailureOr<SmallVector<int64_t>> forward =
      poolResultShape(location, getOperationName(), input, adaptor.getWindow(),
                      adaptor.getStrides(), adaptor.getPadding());
  if (failed(forward) ||
      failed(checkShape(location, getOperationName(), "grad_output", grad, *forward)))
    return failure();
  if (grad.getElementType() != input.getElementType())
    return fail(location, getOperationName(), "grad_output ", grad, " and input ", input,
                " have different element types");
  types.push_back(input);
  return success();
}

LogicalResult AvgPool2DBackwardOp::verify() {
  FailureOr<SmallVector<int64_t>> forward = poolResultShape(
      getLoc(), getOperationName(), getType(), getWindow(), getStrides(), getPadding());
  if (failed(forward))
    return failure();
  if (getGradOutput().getType().getElementType() != getType().getElementType())
    return emitOpError("grad_output ") << getGradOutput().getType() << " and result "
                                       << getType() << " have different element types";
  return checkShape(getLoc(), getOperationName(), "grad_output", getGradOutput().getType(),
                    *forward);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  llvm::append_range(types, adaptor.getXs().getTypes());
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getXs().empty())
    return emitOpError("needs at least one operand");
  if (getReplicas() < 1)
    return emitOpError("replicas = ") << getReplicas() << " must be at least 1";
  Type element = tensorOf(getXs()[0]).getElementType();
  for (auto [i, x] : llvm::enumerate(getXs())) {
    // One collective moves all operands as one flat buffer of one element type.
    if (tensorOf(x).getElementType() != element)
      return emitOpError("operand #") << i << " is " << x.getType() << " but operand #0 has "
                                      << element << " elements; a bucket has one element type";
  }
  if (getKind() == AllReduceKind::mean && !isa<FloatType>(element))
    return emitOpError("mean needs float operands, got ") << element;
  return success();
}

LogicalResult AllReduceOp::fold(FoldAdaptor, SmallVectorImpl<OpFoldResult> &results) {
  // Alone, a replica's sum and mean are its own values.
  if (getReplicas() != 1)
    return failure();
  for (Value x : getXs())
    results.push_back(x);
  return success();
}

} // namespace smelt

#define GET_OP_CLASSES
#include "ir/SmeltOps.cpp.inc"
