// Folders of the layout and type changes of constants: transpose, reshape, slice, concat,
// broadcast_in_dim and convert of a smelt.constant are computed at compile time, so that a
// model's constant weights (an ONNX Conv's OIHW filter turned HWIO, GPT-2's tied LM head
// transposed, an LSTM's weights per direction) are stored in the form the step reads instead of
// being recomputed by a kernel on every run.
#include "ir/ConstantData.h"
#include "ir/SmeltDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APSInt.h"

namespace smelt {

using namespace mlir;

namespace {

/// Converts beyond this many elements stay kernels: each element goes through APFloat here.
constexpr int64_t kMaxConvertedElements = int64_t(1) << 24;

/// The elements of a convert's result, as DenseElementsAttr::get takes them.
struct ConvertedElements {
  Type to;
  SmallVector<APFloat> floats; // when `to` is a float type
  SmallVector<APInt> ints;     // otherwise

  // As smelt.convert: floats round to nearest even, float to integer truncates toward zero and
  // saturates (NaN gives 0), anything to i1 is `x != 0`.
  void add(APFloat x) {
    if (auto toFloat = dyn_cast<FloatType>(to)) {
      bool inexact;
      x.convert(toFloat.getFloatSemantics(), APFloat::rmNearestTiesToEven, &inexact);
      floats.push_back(x);
    } else if (to.isInteger(1)) {
      // In place: an APInt temporary trips GCC's -Wfree-nonheap-object.
      ints.emplace_back(1u, uint64_t(!x.isZero()));
    } else {
      APSInt result(to.getIntOrFloatBitWidth(), /*isUnsigned=*/false);
      bool exact;
      if (!x.isNaN())
        x.convertToInteger(result, APFloat::rmTowardZero, &exact); // saturates out of range
      ints.push_back(result);
    }
  }
  void add(const APInt &x, bool isBool) {
    if (auto toFloat = dyn_cast<FloatType>(to)) {
      APFloat result(toFloat.getFloatSemantics());
      result.convertFromAPInt(x, /*IsSigned=*/!isBool, APFloat::rmNearestTiesToEven);
      floats.push_back(result);
    } else if (to.isInteger(1)) {
      // In place: an APInt temporary trips GCC's -Wfree-nonheap-object.
      ints.emplace_back(1u, uint64_t(!x.isZero()));
    } else {
      unsigned width = to.getIntOrFloatBitWidth();
      ints.push_back(isBool ? x.zext(width) : x.sextOrTrunc(width));
    }
  }
  /// One element makes a splat.
  DenseElementsAttr get(ShapedType type) const {
    return isa<FloatType>(to) ? DenseElementsAttr::get(type, floats)
                              : DenseElementsAttr::get(type, ints);
  }
};

/// The constant operand of a fold, when it is one.
ElementsAttr constantOperand(Attribute operand) {
  return dyn_cast_if_present<ElementsAttr>(operand);
}

/// A splat of `value`'s single element with `type`, when it is a splat.
Attribute splatOf(ElementsAttr value, ShapedType type) {
  auto splat = dyn_cast<SplatElementsAttr>(value);
  return splat ? SplatElementsAttr::get(type, splat.getSplatValue<Attribute>()) : nullptr;
}

/// A layout change of `operand` into `type` when it is a constant: a splat becomes a splat of
/// `type`, other constants go to `change`.
OpFoldResult foldLayoutChange(Attribute operand, ShapedType type,
                              llvm::function_ref<OpFoldResult(ElementsAttr)> change) {
  ElementsAttr value = constantOperand(operand);
  if (!value)
    return nullptr;
  if (Attribute splat = splatOf(value, type))
    return splat;
  return change(value);
}

/// The row-major strides, in elements, of a tensor of `shape`.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The elements of `value` that a result of `type` takes: result element `index` is the source
/// element at `origin` + sum of index[d] * strides[d] (in elements). Each element's bytes move;
/// null for i1 (packed bits), which the kernel keeps. A transpose and a slice are both this.
OpFoldResult gathered(ElementsAttr value, int64_t origin, ArrayRef<int64_t> strides,
                      ShapedType type) {
  std::optional<ArrayRef<char>> bytes = rawElementBytes(value);
  if (!bytes)
    return nullptr;
  int64_t width = int64_t(*rawElementWidth(type.getElementType()));
  ArrayRef<int64_t> outShape = type.getShape();
  size_t rank = outShape.size();
  std::vector<char> out(size_t(type.getNumElements() * width));
  if (out.empty())
    return elementsFromBytes(type, std::move(out));
  if (rank == 0) {
    std::memcpy(out.data(), bytes->data() + origin * width, size_t(width));
    return elementsFromBytes(type, std::move(out));
  }
  // Row-major over the result, the source offset following an odometer of the indices.
  SmallVector<int64_t> index(rank, 0);
  int64_t source = origin * width, inner = outShape[rank - 1];
  int64_t innerStride = strides[rank - 1] * width;
  for (char *to = out.data(), *end = out.data() + out.size(); to < end;) {
    const char *from = bytes->data() + source;
    for (int64_t i = 0; i < inner; ++i, to += width, from += innerStride)
      std::memcpy(to, from, size_t(width));
    for (size_t d = rank - 1; d-- > 0;) {
      source += strides[d] * width;
      if (++index[d] < outShape[d])
        break;
      source -= strides[d] * width * outShape[d];
      index[d] = 0;
    }
  }
  releaseMappedPages(*bytes);
  return elementsFromBytes(type, std::move(out));
}

} // namespace

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  return foldLayoutChange(adaptor.getX(), getType(), [&](ElementsAttr value) -> OpFoldResult {
    // The same row-major bytes under the new shape: a resource's blob is shared, not copied.
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(value))
      return DenseResourceElementsAttr::get(getType(), resource.getRawHandle());
    if (auto dense = dyn_cast<DenseElementsAttr>(value))
      return dense.reshape(getType());
    return nullptr;
  });
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  // Only a splat: a broadcast of other constants would store the larger tensor.
  return foldLayoutChange(adaptor.getX(), getType(),
                          [](ElementsAttr) -> OpFoldResult { return nullptr; });
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> permutation = getPermutation();
  bool identity = true;
  for (size_t d = 0; d < permutation.size(); ++d)
    identity &= permutation[d] == int64_t(d);
  if (identity)
    return getX();
  return foldLayoutChange(adaptor.getX(), getType(), [&](ElementsAttr value) {
    SmallVector<int64_t> inStrides = rowMajorStrides(getX().getType().getShape()), strides;
    for (int64_t d : permutation)
      strides.push_back(inStrides[size_t(d)]);
    return gathered(value, 0, strides, getType());
  });
}

// A slice of a constant is one too: an ONNX LSTM's per-direction weights, a Split of a fused
// QKV projection's weights. The result is never larger than the operand, which dies once every
// slice of it is folded.
OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  return foldLayoutChange(adaptor.getX(), getType(), [&](ElementsAttr value) {
    SmallVector<int64_t> inStrides = rowMajorStrides(getX().getType().getShape()), strides;
    int64_t origin = 0;
    for (size_t d = 0; d < inStrides.size(); ++d) {
      origin += getStartIndices()[d] * inStrides[d];
      strides.push_back(getStrides()[d] * inStrides[d]);
    }
    return gathered(value, origin, strides, getType());
  });
}

// A concat of constants is one: the PyTorch exporter's LSTM and GRU weights are concats of
// slices of the module's (its gate order is not ONNX's).
OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs()[0];
  ShapedType type = getType();
  std::optional<size_t> width = rawElementWidth(type.getElementType());
  if (!width || type.getElementType().isInteger(1))
    return nullptr;
  // Each operand's row-major bytes; a splat's one element, repeated as it is copied.
  SmallVector<ArrayRef<char>> parts;
  SmallVector<bool> splats;
  for (Attribute operand : adaptor.getInputs()) {
    ElementsAttr value = constantOperand(operand);
    if (!value)
      return nullptr;
    if (std::optional<ArrayRef<char>> bytes = rawElementBytes(value)) {
      parts.push_back(*bytes);
      splats.push_back(false);
    } else if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && dense.isSplat()) {
      parts.push_back(dense.getRawData());
      splats.push_back(true);
    } else {
      return nullptr;
    }
  }
  int64_t axis = int64_t(getDimension()), outer = 1, inner = int64_t(*width);
  for (int64_t d = 0; d < type.getRank(); ++d)
    (d < axis ? outer : inner) *= d == axis ? 1 : type.getDimSize(d);
  std::vector<char> out(size_t(type.getNumElements()) * *width);
  char *to = out.data();
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < parts.size(); ++i) {
      int64_t block = cast<ShapedType>(getInputs()[i].getType()).getDimSize(axis) * inner;
      if (splats[i]) {
        for (int64_t b = 0; b < block; b += int64_t(*width), to += *width)
          std::memcpy(to, parts[i].data(), *width);
      } else {
        std::memcpy(to, parts[i].data() + o * block, size_t(block));
        to += block;
      }
    }
  return elementsFromBytes(type, std::move(out));
}

OpFoldResult ConvertOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  ElementsAttr value = constantOperand(adaptor.getX());
  if (!value || value.getNumElements() > kMaxConvertedElements)
    return nullptr;
  // A resource is read through a dense copy of its bytes.
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    if (std::optional<ArrayRef<char>> bytes = rawElementBytes(value))
      dense = DenseElementsAttr::getFromRawBuffer(value.getShapedType(), *bytes);
  if (!dense)
    return nullptr;
  ConvertedElements result{getType().getElementType(), {}, {}};
  bool isFloat = isa<FloatType>(dense.getElementType());
  bool isBool = dense.getElementType().isInteger(1);
  if (dense.isSplat() && isFloat)
    result.add(dense.getSplatValue<APFloat>());
  else if (dense.isSplat())
    result.add(dense.getSplatValue<APInt>(), isBool);
  else if (isFloat)
    for (APFloat x : dense.getValues<APFloat>())
      result.add(x);
  else
    for (const APInt &x : dense.getValues<APInt>())
      result.add(x, isBool);
  return result.get(getType());
}

} // namespace smelt
