// The shared walk over a fusion body: index mapping of the shape ops and dispatch of each op
// to the target (FusionWalk.h explains the design).
#include "codegen/FusionWalk.h"

#include "ir/SplatConstant.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;

namespace smelt::codegen {

std::optional<rt::DType> dtypeOf(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    type = tensor.getElementType();
  if (type.isF32())
    return rt::DType::f32;
  if (type.isF16())
    return rt::DType::f16;
  if (type.isBF16())
    return rt::DType::bf16;
  if (type.isF64())
    return rt::DType::f64;
  if (type.isSignlessInteger(32))
    return rt::DType::i32;
  if (type.isSignlessInteger(64))
    return rt::DType::i64;
  if (type.isSignlessInteger(1))
    return rt::DType::i1;
  return std::nullopt;
}

rt::DType elementDType(Value value) { return *dtypeOf(value.getType()); }

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

static bool hasNoElements(Value value) { return llvm::is_contained(shapeOf(value), 0); }

SmallVector<int64_t> concatBounds(ConcatOp concat) {
  int64_t dim = concat.getDimension();
  SmallVector<int64_t> bounds{0};
  for (Value input : concat.getInputs())
    bounds.push_back(bounds.back() + shapeOf(input)[dim]);
  return bounds;
}

SmallVector<Val> delinearize(ElementTarget &target, Val linear, ArrayRef<int64_t> shape) {
  SmallVector<Val> coords(shape.size());
  Val rest = linear;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) {
      coords[d] = target.indexConstant(0);
      continue;
    }
    coords[d] = d == 0 ? rest : target.indexRem(rest, shape[d]);
    if (d > 0)
      rest = target.indexDiv(rest, shape[d]);
  }
  return coords;
}

FusionWalk::FusionWalk(FusionOp fusion, ElementTarget &target)
    : fusion_(fusion), target_(target) {}

void FusionWalk::newScope() {
  indices_.clear();
  emitted_.clear();
  derived_.clear();
  indicesIndex_.clear();
  ranges_.clear();
}

void FusionWalk::setRange(Val index, int64_t low, int64_t high) { ranges_[index] = {low, high}; }

std::optional<std::pair<int64_t, int64_t>> FusionWalk::rangeOf(Val index) const {
  auto it = ranges_.find(index);
  return it == ranges_.end() ? std::nullopt : std::optional(it->second);
}

Val FusionWalk::offsetCoordinate(Val index, int64_t offset, int64_t size) {
  std::optional<std::pair<int64_t, int64_t>> range = rangeOf(index);
  if (!range || range->first + offset < 0 || range->second + offset > size)
    return target_.indexOffsetClamped(index, offset, size);
  Val result = offset ? target_.indexOffset(index, offset) : index;
  ranges_[result] = {range->first + offset, range->second + offset};
  return result;
}

SmallVector<Val> FusionWalk::movedCoords(Operation *op, IndexRef at, unsigned operand) {
  SmallVector<Val> result(coords(at)); // a copy: adding indices may move indices_
  ArrayRef<int64_t> from = shapeOf(op->getOperand(operand));
  if (auto slice = dyn_cast<SliceOp>(op)) {
    for (auto [d, start, stride] : llvm::enumerate(slice.getStartIndices(), slice.getStrides())) {
      Val outer = result[d];
      if (stride != 1)
        result[d] = target_.indexMul(result[d], stride);
      if (start != 0)
        result[d] = target_.indexAdd(result[d], target_.indexConstant(start));
      if (std::optional<std::pair<int64_t, int64_t>> range = rangeOf(outer))
        ranges_[result[d]] = {range->first * stride + start,
                              (range->second - 1) * stride + start + 1};
    }
  } else if (auto pad = dyn_cast<PadOp>(op)) {
    for (auto [d, low, high] : llvm::enumerate(pad.getLow(), pad.getHigh()))
      if (low != 0 || high != 0)
        result[d] = offsetCoordinate(result[d], -low, from[d]);
  } else {
    auto concat = cast<ConcatOp>(op);
    int64_t dim = concat.getDimension();
    result[dim] = offsetCoordinate(result[dim], -concatBounds(concat)[operand], from[dim]);
  }
  return result;
}

std::pair<unsigned, unsigned> FusionWalk::concatCandidates(ConcatOp concat, IndexRef at) {
  SmallVector<int64_t> bounds = concatBounds(concat);
  unsigned last = concat.getInputs().size() - 1;
  std::optional<std::pair<int64_t, int64_t>> range = rangeOf(coords(at)[concat.getDimension()]);
  if (!range)
    return {0, last};
  unsigned first = 0;
  while (first < last && bounds[first + 1] <= range->first)
    ++first;
  unsigned end = first;
  while (end < last && bounds[end + 1] < range->second)
    ++end;
  return {first, end};
}

bool FusionWalk::onlyPadding(PadOp pad, IndexRef at) {
  if (hasNoElements(pad.getX()))
    return true;
  ArrayRef<int64_t> from = shapeOf(pad.getX());
  ArrayRef<Val> outer = coords(at);
  for (auto [d, low] : llvm::enumerate(pad.getLow()))
    if (std::optional<std::pair<int64_t, int64_t>> range = rangeOf(outer[d]);
        range && (range->second <= low || range->first >= low + from[d]))
      return true;
  return false;
}

Val FusionWalk::constantOf(double value, rt::DType dtype) {
  if (rt::isFloat(dtype))
    return target_.floatConstant(value, dtype);
  return target_.integerConstant(dtype == rt::DType::i1 ? value != 0 : int64_t(value), dtype);
}

Val FusionWalk::emitPad(PadOp pad, IndexRef at) {
  rt::DType dtype = elementDType(pad.getResult());
  Val constant = constantOf(pad.getValue().convertToDouble(), dtype);
  if (onlyPadding(pad, at))
    return constant;
  SmallVector<Val> outer(coords(at));
  Val value = emitted_.lookup({pad.getX(), operandIndex(pad, at)});
  ArrayRef<int64_t> from = shapeOf(pad.getX());
  for (auto [d, low, high] : llvm::enumerate(pad.getLow(), pad.getHigh())) {
    std::optional<std::pair<int64_t, int64_t>> range = rangeOf(outer[d]);
    if (low > 0 && !(range && range->first >= low))
      value = target_.select(target_.indexBelow(outer[d], low), constant, value, dtype);
    if (high > 0 && !(range && range->second <= low + from[d]))
      value = target_.select(target_.indexBelow(outer[d], low + from[d]), value, constant, dtype);
  }
  return value;
}

Val FusionWalk::emitConcat(ConcatOp concat, IndexRef at) {
  rt::DType dtype = elementDType(concat.getResult());
  int64_t dim = concat.getDimension();
  SmallVector<int64_t> bounds = concatBounds(concat);
  auto [first, last] = concatCandidates(concat, at);
  Val coordinate = coords(at)[dim];
  std::optional<Val> result;
  for (unsigned k = last + 1; k-- > first;) {
    if (bounds[k] == bounds[k + 1])
      continue; // an empty operand holds no element
    Val value = emitted_.lookup({concat.getInputs()[k], operandIndex(concat, at, k)});
    result = result ? target_.select(target_.indexBelow(coordinate, bounds[k + 1]), value, *result,
                                     dtype)
                    : value;
  }
  // No result element exists when every operand is empty; the kernel then runs no element.
  return result ? *result : constantOf(0, dtype);
}

FusionWalk::IndexRef FusionWalk::linearIndex(ArrayRef<int64_t> shape, Val linear) {
  indices_.push_back({SmallVector<int64_t>(shape), linear, {}, shape.empty()});
  return IndexRef(indices_.size() - 1);
}

FusionWalk::IndexRef FusionWalk::coordIndex(ArrayRef<int64_t> shape, ArrayRef<Val> coords) {
  indices_.push_back({SmallVector<int64_t>(shape), std::nullopt, SmallVector<Val>(coords), true});
  return IndexRef(indices_.size() - 1);
}

FusionWalk::IndexRef FusionWalk::knownIndex(ArrayRef<int64_t> shape, std::optional<Val> linear,
                                            ArrayRef<Val> coords) {
  indices_.push_back({SmallVector<int64_t>(shape), linear, SmallVector<Val>(coords), true});
  return IndexRef(indices_.size() - 1);
}

Val FusionWalk::linear(IndexRef at) {
  Index &index = indices_[at];
  if (!index.linear) {
    // Horner's rule over the coordinates; a size-1 dimension contributes nothing.
    std::optional<Val> sum;
    for (size_t d = 0; d < index.shape.size(); ++d) {
      if (sum)
        sum = target_.indexMul(*sum, index.shape[d]);
      if (index.shape[d] == 1)
        continue;
      sum = sum ? target_.indexAdd(*sum, index.coords[d]) : index.coords[d];
    }
    index.linear = sum ? *sum : target_.indexConstant(0);
  }
  return *index.linear;
}

ArrayRef<Val> FusionWalk::coords(IndexRef at) {
  Index &index = indices_[at];
  if (!index.hasCoords) {
    SmallVector<Val> coords = delinearize(target_, *index.linear, index.shape);
    Index &again = indices_[at]; // the target may not grow indices_, but be safe
    again.coords = std::move(coords);
    again.hasCoords = true;
  }
  return indices_[at].coords;
}

FusionWalk::IndexRef FusionWalk::reduceOperandIndex(ReduceOp reduce, ArrayRef<Val> kept,
                                                    ArrayRef<Val> reduced) {
  ArrayRef<int64_t> shape = shapeOf(reduce.getX());
  ArrayRef<int64_t> axes = reduce.getAxes();
  SmallVector<Val> coords;
  size_t nextKept = 0, nextReduced = 0;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d)
    coords.push_back(llvm::is_contained(axes, d) ? reduced[nextReduced++] : kept[nextKept++]);
  return coordIndex(shape, coords);
}

std::optional<SmallVector<Val>> FusionWalk::reshapedCoords(ArrayRef<int64_t> from, IndexRef at) {
  SmallVector<int64_t> to = indices_[at].shape;
  if (!indices_[at].hasCoords || to.empty() || from.empty() || llvm::is_contained(to, 0) ||
      llvm::is_contained(from, 0))
    return std::nullopt;
  SmallVector<Val> outer(indices_[at].coords);
  SmallVector<Val> result(from.size());
  size_t i = 0, j = 0;
  while (i < to.size() || j < from.size()) {
    // A group: one dimension from each side (while there are), then the side with the smaller
    // product grows until the products meet; size-1 dimensions left over form groups alone.
    size_t i0 = i, j0 = j;
    int64_t toCount = 1, fromCount = 1;
    while (true) {
      if (i < to.size() && (i == i0 || toCount < fromCount))
        toCount *= to[i++];
      else if (j < from.size() && (j == j0 || fromCount < toCount))
        fromCount *= from[j++];
      else
        break;
    }
    // The position within the group, row-major over its result dimensions...
    std::optional<Val> position;
    for (size_t d = i0; d < i; ++d) {
      if (to[d] == 1)
        continue;
      position = position ? target_.indexAdd(target_.indexMul(*position, to[d]), outer[d])
                          : outer[d];
    }
    // ...peeled into its operand dimensions from the last; the first that is not 1 takes the
    // rest without a remainder.
    size_t firstWide = j;
    for (size_t d = j0; d < j; ++d)
      if (from[d] != 1) {
        firstWide = d;
        break;
      }
    Val rest = position ? *position : target_.indexConstant(0);
    for (size_t d = j; d-- > j0;) {
      if (from[d] == 1) {
        result[d] = target_.indexConstant(0);
        continue;
      }
      if (d == firstWide) {
        result[d] = rest;
        continue;
      }
      result[d] = target_.indexRem(rest, from[d]);
      rest = target_.indexDiv(rest, from[d]);
    }
  }
  return result;
}

FusionWalk::IndexRef FusionWalk::gatherIndicesIndex(GatherOp gather, IndexRef at) {
  auto [it, inserted] = indicesIndex_.try_emplace({gather, at}, 0);
  if (!inserted)
    return it->second;
  ArrayRef<int64_t> shape = shapeOf(gather.getIndices());
  // A table of rank 1 gives the result the indices' shape: the same row-major position.
  IndexRef result = shape.size() == indices_[at].shape.size()
                        ? linearIndex(shape, linear(at))
                        : coordIndex(shape, coords(at).take_front(shape.size()));
  indicesIndex_[{gather, at}] = result;
  return result;
}

FusionWalk::IndexRef FusionWalk::operandIndex(Operation *op, IndexRef at, unsigned number) {
  OpOperand *key = &op->getOpOperand(number);
  auto [it, inserted] = derived_.try_emplace({key, at}, 0);
  if (!inserted)
    return it->second;
  Value operand = op->getOperand(number);
  ArrayRef<int64_t> from = shapeOf(operand);
  IndexRef result;
  bool sameShape = from == ArrayRef<int64_t>(indices_[at].shape);
  std::optional<SmallVector<Val>> reshaped;
  if (isa<ReshapeOp>(op) && (reshaped = reshapedCoords(from, at))) {
    // The linear position is the same (when known), and the coordinates came cheaply.
    result = knownIndex(from, indices_[at].linear, *reshaped);
  } else if (isa<ReshapeOp>(op) || (isa<BroadcastInDimOp>(op) && sameShape)) {
    // Same row-major position, counted in the operand's shape (an identity broadcast too).
    result = linearIndex(from, linear(at));
  } else if (auto broadcast = dyn_cast<BroadcastInDimOp>(op)) {
    ArrayRef<int64_t> dims = broadcast.getBroadcastDimensions();
    int64_t count = 1;
    for (int64_t size : from)
      count *= size;
    if (count == 1) {
      result = linearIndex(from, target_.indexConstant(0)); // one value for every element
    } else {
      SmallVector<Val> coords;
      ArrayRef<Val> outer = this->coords(at);
      for (size_t i = 0; i < from.size(); ++i)
        coords.push_back(from[i] == 1 ? target_.indexConstant(0) : outer[dims[i]]);
      result = coordIndex(from, coords);
    }
  } else if (isa<RngUniformOp, RngNormalOp>(op)) {
    result = linearIndex(from, target_.indexConstant(0)); // the rank-0 offset
  } else if (auto gather = dyn_cast<GatherOp>(op)) {
    // The row is data: the index element read for this result element, clamped into the
    // table (emit() emitted it first); the other coordinates are the result's trailing ones.
    Value indices = gather.getIndices();
    Val row = target_.elementToIndex(emitted_.lookup({indices, gatherIndicesIndex(gather, at)}),
                                     elementDType(indices), from[0]);
    if (from.size() == 1) {
      result = linearIndex(from, row);
    } else {
      SmallVector<Val> coords = {row};
      llvm::append_range(coords, this->coords(at).drop_front(shapeOf(indices).size()));
      result = coordIndex(from, coords);
    }
  } else if (auto transpose = dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    ArrayRef<Val> outer = this->coords(at);
    SmallVector<Val> coords(from.size());
    for (size_t i = 0; i < permutation.size(); ++i)
      coords[permutation[i]] = outer[i];
    result = coordIndex(from, coords);
  } else if (isa<SliceOp, PadOp, ConcatOp>(op)) {
    result = coordIndex(from, movedCoords(op, at, number));
  } else {
    llvm_unreachable("only shape ops remap indices");
  }
  derived_[{key, at}] = result;
  return result;
}

// Depth first with an explicit stack rather than recursion: a chain of n elementwise ops is n
// levels deep, and tens of thousands of levels overflow the thread's stack. An item stays on
// the stack until its operands are emitted; the first missing operand is pushed on top of it,
// so operands are emitted in order, subtree by subtree, as a recursive walk would: as call
// arguments their order would be unspecified, and the rendered statements would differ from
// one host compiler to another.
Val FusionWalk::emit(Value value, IndexRef at) {
  SmallVector<std::pair<Value, IndexRef>> stack{{value, at}};
  while (!stack.empty()) {
    auto [next, nextAt] = stack.back();
    if (emitted_.contains({next, nextAt})) {
      stack.pop_back();
      continue;
    }
    std::optional<Val> result;
    if (auto arg = dyn_cast<BlockArgument>(next)) {
      result = target_.load(arg.getArgNumber(), linear(nextAt));
    } else {
      Operation *op = next.getDefiningOp();
      if (auto missing = firstMissingOperand(op, nextAt)) {
        stack.push_back(*missing);
        continue;
      }
      result = emitOp(op, nextAt);
    }
    emitted_[{next, nextAt}] = *result;
    stack.pop_back();
  }
  return emitted_.lookup({value, at});
}

std::optional<std::pair<Value, FusionWalk::IndexRef>>
FusionWalk::firstMissingOperand(Operation *op, IndexRef at) {
  if (isa<ConstantOp, IotaOp>(op))
    return std::nullopt; // computed in place, from no operand
  if (auto gather = dyn_cast<GatherOp>(op)) {
    // The index element first: where the table is read depends on it.
    std::pair<Value, IndexRef> indices{gather.getIndices(), gatherIndicesIndex(gather, at)};
    if (!emitted_.contains(indices))
      return indices;
  }
  if (isa<RngUniformOp, RngNormalOp>(op) && op->getNumOperands() == 0)
    return std::nullopt; // computed in place, from its element index alone
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    auto [first, last] = concatCandidates(concat, at);
    for (unsigned k = first; k <= last; ++k) {
      if (hasNoElements(concat.getInputs()[k]))
        continue;
      std::pair<Value, IndexRef> operand{concat.getInputs()[k], operandIndex(op, at, k)};
      if (!emitted_.contains(operand))
        return operand;
    }
    return std::nullopt;
  }
  if (auto pad = dyn_cast<PadOp>(op); pad && onlyPadding(pad, at))
    return std::nullopt; // the constant alone
  if (isa<BroadcastInDimOp, ReshapeOp, TransposeOp, GatherOp, RngUniformOp, RngNormalOp, SliceOp,
          PadOp>(op)) {
    std::pair<Value, IndexRef> operand{op->getOperand(0), operandIndex(op, at)};
    return emitted_.contains(operand) ? std::nullopt : std::optional(operand);
  }
  for (Value operand : op->getOperands())
    if (!emitted_.contains({operand, at}))
      return std::pair{operand, at};
  return std::nullopt;
}

// Every operand is emitted when this runs (emit sees to it).
Val FusionWalk::emitOp(Operation *op, IndexRef at) {
  rt::DType dtype = elementDType(op->getResult(0));
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto splat = cast<SplatElementsAttr>(constant.getValue());
    if (rt::isFloat(dtype))
      return target_.floatConstant(splat.getSplatValue<APFloat>().convertToDouble(), dtype);
    return target_.integerConstant(
        dtype == rt::DType::i1 ? int64_t(splat.getSplatValue<APInt>().getBoolValue())
                               : splat.getSplatValue<APInt>().getSExtValue(),
        dtype);
  }
  if (auto iota = dyn_cast<IotaOp>(op))
    return target_.indexToElement(coords(at)[iota.getDimension()], dtype);
  if (isa<BroadcastInDimOp, ReshapeOp, TransposeOp, GatherOp, SliceOp>(op))
    return emitted_.lookup({op->getOperand(0), operandIndex(op, at)});
  if (auto pad = dyn_cast<PadOp>(op))
    return emitPad(pad, at);
  if (auto concat = dyn_cast<ConcatOp>(op))
    return emitConcat(concat, at);
  if (isa<RngUniformOp, RngNormalOp>(op)) {
    Val offset = op->getNumOperands() ? emitted_.lookup({op->getOperand(0), operandIndex(op, at)})
                                      : target_.integerConstant(0, rt::DType::i64);
    if (auto normal = dyn_cast<RngNormalOp>(op))
      return target_.normal(linear(at), offset, normal.getSeed(),
                            normal.getMean().convertToDouble(),
                            normal.getStddev().convertToDouble(), dtype);
    auto rng = cast<RngUniformOp>(op);
    // low and high - low as docs/ops.md has them: float(high) - float(low) in float
    // arithmetic, except for f64.
    double low = rng.getLow().convertToDouble(), high = rng.getHigh().convertToDouble();
    bool wide = dtype == rt::DType::f64;
    double range = wide ? high - low : double(float(high) - float(low));
    return target_.uniform(linear(at), offset, rng.getSeed(), wide ? low : double(float(low)),
                           range, dtype);
  }
  SmallVector<Val, 3> operands;
  for (Value operand : op->getOperands())
    operands.push_back(emitted_.lookup({operand, at}));
  if (auto convert = dyn_cast<ConvertOp>(op))
    return target_.convert(operands[0], elementDType(convert.getX()), dtype);
  if (auto compare = dyn_cast<CompareOp>(op))
    return target_.compare(compare.getDirection(), operands[0], operands[1],
                           elementDType(compare.getLhs()));
  if (isa<SelectOp>(op))
    return target_.select(operands[0], operands[1], operands[2], dtype);
  // x^2 and x^3 (GELU's cube, the gradients of squares) as products: pow per element is a
  // libm call that keeps the loop from vectorizing (28 ns an element in the GPT's GELU); the
  // products round once or twice, within pow's own error (docs/ops.md).
  if (isa<PowOp>(op))
    if (std::optional<double> exponent = floatSplatConstant(op->getOperand(1));
        exponent && (*exponent == 2 || *exponent == 3)) {
      Val square = target_.binary("mul", operands[0], operands[0], dtype);
      return *exponent == 2 ? square : target_.binary("mul", square, operands[0], dtype);
    }
  llvm::StringRef name = op->getName().stripDialect();
  if (operands.size() == 1)
    return target_.unary(name, operands[0], dtype);
  if (operands.size() == 2)
    return target_.binary(name, operands[0], operands[1], dtype);
  llvm_unreachable("the fusion verifier admits only the ops above");
}

} // namespace smelt::codegen
