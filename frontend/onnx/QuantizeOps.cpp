// ONNX's quantization ops, as ONNX Runtime's quantizer writes them: QuantizeLinear and
// DequantizeLinear (the QDQ format: per tensor, per axis, blocked), DynamicQuantizeLinear with
// MatMulInteger (quantize_dynamic's transformers), ConvInteger, and the operator-format
// QLinearMatMul and QLinearConv. Quantized values are narrow integers carried as i32
// (IntegerTypes.cpp). An integer matmul or convolution runs as the f32 one on the values minus
// their zero points: each product and partial sum is an integer, exact in f32 while it stays
// below 2^24 in magnitude (a K of 512 or less always, with 8-bit operands), and then converted
// back to INT32. Requantization multiplies the accumulator by a_scale * b_scale / y_scale and
// rounds half to even, as ONNX Runtime's MlasRequantizeOutput. Quantized weights are
// dequantized at import time into f32 constants, so a quantized model runs as its float one
// plus the activations' quantize-dequantize kernels. Also com.microsoft's quantized ops of the
// QOperator format (QLinearAdd ...), each its float op between a dequantize and a quantize.
#include "frontend/onnx/NodeImporter.h"

#include "frontend/Layers.h"

namespace smelt::onnx {
namespace {

using ::onnx::TensorProto;

std::string shapeOf(Tensor t) { return shapeString(t.shape()); }

/// Input `i` of the node, which must hold quantized integers (a narrow type, or INT32 where
/// `int32Allowed`); its ONNX type.
int quantizedType(const NodeImporter &n, int i, const char *what, bool int32Allowed = false) {
  if (int type = n.narrowType(i))
    return type;
  if (int32Allowed && n.input(i).dtype() == DType::i32)
    return TensorProto::INT32;
  fail(ImportErrorKind::UnsupportedDtype,
       std::string(what) + " is " + std::string(dtypeName(n.input(i).dtype())) +
           ", expected an 8- or 16-bit integer (INT4, UINT4 and the float8 types are not "
           "supported)");
}

/// A scale or zero point `p` laid against `x` for quantization along the node's `axis`: one
/// element (per tensor) as a scalar; a 1-D of x's length along the axis (per axis) shaped to
/// broadcast along it; with block_size, x's shape with the axis in blocks, each entry repeated
/// over its block.
Tensor alongAxis(const NodeImporter &n, Tensor p, Tensor x, const char *what) {
  int64_t rank = x.rank();
  int64_t blockSize = n.attrInt("block_size", 0);
  if (p.numElements() == 1 && p.rank() <= 1 && blockSize == 0)
    return reshape(p, {});
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 1), rank, "axis");
  int64_t length = x.dim(axis);
  if (blockSize == 0) {
    if (p.rank() != 1 || p.dim(0) != length)
      fail(ImportErrorKind::BadFile, std::string(what) + " is " + shapeOf(p) +
                                         "; per-axis quantization along axis " +
                                         std::to_string(axis) + " of " + shapeOf(x) + " needs [" +
                                         std::to_string(length) + "] (or one element, per tensor)");
    std::vector<int64_t> shape(size_t(rank), 1);
    shape[size_t(axis)] = length;
    return reshape(p, shape);
  }
  if (blockSize < 0)
    n.unsupported("block_size " + std::to_string(blockSize) + " (must be positive)");
  std::vector<int64_t> blocks = x.shape();
  blocks[size_t(axis)] = (length + blockSize - 1) / blockSize;
  if (p.shape() != blocks)
    fail(ImportErrorKind::BadFile, std::string(what) + " is " + shapeOf(p) + "; blocks of " +
                                       std::to_string(blockSize) + " along axis " +
                                       std::to_string(axis) + " of " + shapeOf(x) + " need " +
                                       shapeString(blocks));
  // [..., B, ...] -> [..., B, blockSize, ...] -> [..., B * blockSize, ...], cut to the axis
  // (one block spreads over the axis's length only, however large block_size is).
  int64_t spreadBy = blocks[size_t(axis)] == 1 ? length : blockSize;
  std::vector<int64_t> spread = blocks, dims(static_cast<size_t>(rank));
  spread.insert(spread.begin() + axis + 1, spreadBy);
  for (int64_t d = 0; d < rank; ++d)
    dims[size_t(d)] = d <= axis ? d : d + 1;
  std::vector<int64_t> merged = blocks;
  merged[size_t(axis)] *= spreadBy;
  Tensor repeated = reshape(broadcastInDim(p, spread, dims), merged);
  std::vector<int64_t> start(size_t(rank), 0), limit = x.shape();
  return slice(repeated, start, limit);
}

/// A scale or zero point `p` of a tensor of rank `rank`: one element (per tensor) as a scalar,
/// or a 1-D of `length` entries shaped to broadcast along dimension `dim`.
Tensor perIndexAlong(Tensor p, int64_t dim, int64_t rank, int64_t length, const char *what) {
  if (p.numElements() == 1)
    return reshape(p, {});
  if (p.rank() != 1 || p.dim(0) != length)
    fail(ImportErrorKind::BadFile, std::string(what) + " is " + shapeOf(p) +
                                       "; it needs one element or " + std::to_string(length));
  std::vector<int64_t> shape(size_t(rank), 1);
  shape[size_t(dim)] = length;
  return reshape(p, shape);
}

/// An integer operand minus its zero point, as f32 (exact: both are at most 16-bit integers).
Tensor centered(Tensor q, std::optional<Tensor> zeroPoint) {
  return convert(zeroPoint ? sub(q, *zeroPoint) : q, DType::f32);
}

/// f32 `v` of magnitude below 2^22 rounded to the nearest integer, ties to even: adding and
/// subtracting 1.5 * 2^23 leaves no fraction bits, and IEEE addition rounds to nearest even.
/// Four times cheaper than roundHalfEven's floor and selects, for the activations a quantized
/// model rounds at every layer (Smelt's elementwise kernels do not reassociate floats).
Tensor roundedSmall(Tensor v) {
  Tensor magic = scalarLike(v, 12582912.0);
  return sub(add(v, magic), magic);
}

/// f32 `v`, rounded half to even and offset by `zeroPoint`, saturated to `type`'s range: the
/// clamp to [lo - zero point, hi - zero point] comes first, which rounds the same and keeps a
/// huge value from overflowing the integer conversion (and the rounding's range).
Tensor quantized(Tensor v, std::optional<Tensor> zeroPoint, int type) {
  auto [lo, hi] = narrowRange(type);
  if (zeroPoint) {
    Tensor offset = convert(*zeroPoint, DType::f32);
    v = minimum(maximum(v, sub(scalarLike(v, double(lo)), offset)),
                sub(scalarLike(v, double(hi)), offset));
    return add(convert(roundedSmall(v), DType::i32), *zeroPoint);
  }
  return convert(roundedSmall(clamp(v, double(lo), double(hi))), DType::i32);
}

/// The narrow type of the quantized output: the zero point's, else output_dtype, else UINT8.
int outputTypeOf(const NodeImporter &n, int zeroPointInput) {
  if (n.hasInput(zeroPointInput))
    return quantizedType(n, zeroPointInput, "the zero point");
  int64_t type = n.attrInt("output_dtype", TensorProto::UINT8);
  if (!isNarrowInteger(int(type)))
    fail(ImportErrorKind::UnsupportedDtype,
         "output_dtype " + onnxTypeName(int(type)) +
             " (Smelt quantizes to INT8, UINT8, INT16 and UINT16)");
  return int(type);
}

void quantizeLinear(NodeImporter &n) {
  Tensor x = n.input(0);
  int type = outputTypeOf(n, 2);
  Tensor scale = convert(alongAxis(n, floatInput(n, 1), x, "y_scale"), DType::f32);
  std::optional<Tensor> zeroPoint;
  if (n.hasInput(2))
    zeroPoint = alongAxis(n, n.input(2), x, "y_zero_point");
  n.setOutput(0, quantized(div(convert(x, DType::f32), scale), zeroPoint, type));
  n.setNarrowType(0, type);
}

/// Dequantizes `count` integers `q(e)` of a tensor of `shape` into `out(e, value)`: (q - zero
/// point) times scale, in f32 (f64 for an f64 scale), each parameter (null: 0 and 1) one element
/// or one per index along `axis`; the import-time twin of dequantizeLinear's ops. False, writing
/// nothing, when a parameter is neither.
template <typename Q, typename Out>
bool dequantizeEach(const std::vector<int64_t> &shape, int64_t axis, const TensorValue *zeroPoint,
                    const TensorValue *scale, int64_t count, Q q, Out out) {
  int64_t length = shape.empty() ? 1 : shape[size_t(axis)], inner = 1;
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d)
    inner *= shape[d];
  auto fits = [&](const TensorValue *p) {
    return !p || p->values.size() == 1 || (p->shape.size() == 1 && p->shape[0] == length);
  };
  if (!fits(zeroPoint) || !fits(scale))
    return false;
  auto at = [](const TensorValue *p, int64_t index, double fallback) {
    return !p ? fallback : p->values[p->values.size() == 1 ? 0 : size_t(index)];
  };
  bool wide = scale && scale->type == DType::f64;
  for (int64_t e = 0; e < count; ++e) {
    int64_t index = (e / inner) % length;
    double centered = q(e) - at(zeroPoint, index, 0), s = at(scale, index, 1);
    out(e, wide ? centered * s : double(float(centered) * float(s)));
  }
  return true;
}

/// DequantizeLinear of small known values, per tensor or per axis, folded at import time: a
/// quantized pad value (MobileBERT's QDQ export) is one that Pad needs then.
bool foldedDequantize(NodeImporter &n) {
  constexpr int64_t kMaxFolded = 1 << 16; // the importer's known-value size
  for (int i = 0; i < n.numInputs(); ++i)
    if (n.hasInput(i) && (!n.isKnown(i) || n.knownElements(i) > kMaxFolded))
      return false;
  const TensorValue &x = n.constantInput(0, "x"), &scale = n.constantInput(1, "x_scale");
  const TensorValue *zeroPoint = n.hasInput(2) ? &n.constantInput(2, "x_zero_point") : nullptr;
  bool perTensor = scale.values.size() == 1;
  int64_t axis =
      perTensor ? 0 : normalizeAxis(n, n.attrInt("axis", 1), int64_t(x.shape.size()), "axis");
  if ((scale.type != DType::f32 && scale.type != DType::f64) || n.attrInt("block_size", 0) ||
      n.attribute("output_dtype") || (zeroPoint && zeroPoint->values.size() != scale.values.size()))
    return false;
  TensorValue y{scale.type, x.shape, std::vector<double>(x.values.size())};
  if (!dequantizeEach(
          x.shape, axis, zeroPoint, &scale, int64_t(x.values.size()),
          [&](int64_t e) { return x.values[size_t(e)]; },
          [&](int64_t e, double v) { y.values[size_t(e)] = v; }))
    return false;
  n.setConstantOutput(0, y);
  return true;
}

/// Large known weight input `i` less its zero point (known input `zeroPointInput`, if any) and
/// times its scale (known input `scaleInput`, if any), each one element or one per index along
/// `axis` (a `scaleInput` of -1: none), as an f32 constant computed at import time: the float
/// model's kind of weight, which the compiler lays out for its library once, rather than ops that
/// dequantize it every run. None when the inputs are not of that kind.
std::optional<Tensor> dequantizedWeight(const NodeImporter &n, int i, int zeroPointInput,
                                        int scaleInput, int64_t axis) {
  const Weight *w = n.knownWeight(i);
  bool hasZeroPoint = n.hasInput(zeroPointInput),
       hasScale = scaleInput >= 0 && n.hasInput(scaleInput);
  if (!w || w->dtype != DType::i32 || (hasZeroPoint && !n.isKnown(zeroPointInput)) ||
      (hasScale && !n.isKnown(scaleInput)))
    return std::nullopt;
  int64_t rank = int64_t(w->shape.size());
  if (axis < 0 || axis >= rank)
    return std::nullopt;
  const TensorValue *zeroPoint =
      hasZeroPoint ? &n.constantInput(zeroPointInput, "the zero point") : nullptr;
  const TensorValue *scale = hasScale ? &n.constantInput(scaleInput, "the scale") : nullptr;
  if (scale && scale->type != DType::f32)
    return std::nullopt;
  int64_t count = w->count();
  auto values = std::make_shared<std::vector<float>>(size_t(count));
  if (!dequantizeEach(
          w->shape, axis, zeroPoint, scale, count, [&](int64_t e) { return weightElement(*w, e); },
          [&](int64_t e, double v) { (*values)[size_t(e)] = float(v); }))
    return std::nullopt;
  Weight dequantized{
      DType::f32, w->shape,
      WeightBytes{values, llvm::StringRef(reinterpret_cast<const char *>(values->data()),
                                          values->size() * sizeof(float))}};
  return weightConstant(n.g, n.node.input(i) + "_dequantized", dequantized);
}

void dequantizeLinear(NodeImporter &n) {
  if (foldedDequantize(n))
    return;
  if (const Weight *weight = n.knownWeight(0); weight && n.attrInt("block_size", 0) == 0) {
    int64_t axis = normalizeAxis(n, n.attrInt("axis", 1), int64_t(weight->shape.size()), "axis");
    if (std::optional<Tensor> w = dequantizedWeight(n, 0, 2, 1, axis)) {
      n.setOutput(0, convert(*w, n.attrDType("output_dtype", n.input(1).dtype())));
      return;
    }
  }
  Tensor x = n.input(0);
  int type = quantizedType(n, 0, "x", /*int32Allowed=*/true);
  Tensor scale = floatInput(n, 1);
  std::optional<Tensor> zeroPoint;
  if (n.hasInput(2)) {
    // An INT32 x (a bias) has a zero point of 0 if any: ONNX Runtime's quantizer writes one.
    quantizedType(n, 2, "x_zero_point", /*int32Allowed=*/type == TensorProto::INT32);
    zeroPoint = alongAxis(n, n.input(2), x, "x_zero_point");
  }
  DType out = scale.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor y = mul(convert(zeroPoint ? sub(x, *zeroPoint) : x, out),
                 convert(alongAxis(n, scale, x, "x_scale"), out));
  n.setOutput(0, convert(y, n.attrDType("output_dtype", scale.dtype())));
}

/// DynamicQuantizeLinear: UINT8 with the scale and zero point that map [min(x, 0), max(x, 0)]
/// onto [0, 255], as ONNX Runtime computes them (a scale of 1 when x is all zeros).
void dynamicQuantizeLinear(NodeImporter &n) {
  Tensor x = convert(floatInput(n, 0), DType::f32);
  std::vector<int64_t> all(size_t(x.rank()));
  for (int64_t d = 0; d < x.rank(); ++d)
    all[size_t(d)] = d;
  Tensor zero = scalarLike(x, 0);
  Tensor lo = minimum(reduceMin(x, all), zero), hi = maximum(reduceMax(x, all), zero);
  Tensor scale = select(compare(hi, lo, CompareDirection::eq), scalarLike(x, 1),
                        div(sub(hi, lo), scalarLike(x, 255)));
  Tensor zeroPoint = convert(roundHalfEven(clamp(sub(zero, div(lo, scale)), 0, 255)), DType::i32);
  n.setOutput(0, quantized(div(x, scale), zeroPoint, TensorProto::UINT8));
  n.setNarrowType(0, TensorProto::UINT8);
  n.setOutput(1, scale);
  n.setOutput(2, zeroPoint);
  n.setNarrowType(2, TensorProto::UINT8);
}

/// The zero point of a matmul operand (input `i`), shaped to broadcast against `q`: one
/// element, or a 1-D per row of A (`perRow`) or per column of B.
std::optional<Tensor> matmulZeroPoint(const NodeImporter &n, int i, Tensor q, bool perRow,
                                      const char *what) {
  if (!n.hasInput(i))
    return std::nullopt;
  quantizedType(n, i, what);
  Tensor zp = n.input(i);
  if (zp.numElements() == 1)
    return reshape(zp, {});
  int64_t length = perRow ? q.dim(-2) : q.dim(-1);
  if (zp.rank() != 1 || zp.dim(0) != length || q.rank() < 2)
    fail(ImportErrorKind::UnsupportedAttribute,
         std::string(what) + " is " + shapeOf(zp) + "; Smelt takes one element or a 1-D of " +
             std::to_string(length) + (perRow ? " (one per row of A " : " (one per column of B ") +
             shapeOf(q) + ")");
  return perRow ? reshape(zp, {length, 1}) : zp;
}

/// (A - a_zero_point) x (B - b_zero_point) as f32 holding integers; the zero points are inputs
/// `zpA` and `zpB` (MatMulInteger: 2 and 3; QLinearMatMul: 2 and 5).
Tensor integerMatmul(const NodeImporter &n, int a, int b, int zpA, int zpB) {
  quantizedType(n, a, "A");
  quantizedType(n, b, "B");
  Tensor qa = n.input(a);
  // int8 weights, per tensor or per column, dequantized at import time; B itself is then never
  // made a (widened) constant.
  std::optional<Tensor> weight;
  if (const Weight *w = n.knownWeight(b); w && !w->shape.empty())
    weight = dequantizedWeight(n, b, zpB, -1, int64_t(w->shape.size()) - 1);
  if (!weight) {
    Tensor qb = n.input(b);
    weight = centered(qb, matmulZeroPoint(n, zpB, qb, false, "b_zero_point"));
  }
  return numpyMatmul(centered(qa, matmulZeroPoint(n, zpA, qa, true, "a_zero_point")), *weight);
}

void matMulInteger(NodeImporter &n) {
  n.setOutput(0, convert(integerMatmul(n, 0, 1, 2, 3), DType::i32));
}

/// (x - x_zero_point) * (w - w_zero_point) convolved as f32 holding integers, plus an INT32
/// `bias`; w's zero point is one element or one per output channel.
Tensor integerConv(const NodeImporter &n, int x, int w, int wZeroPointInput,
                   std::optional<Tensor> zpX, std::optional<Tensor> bias) {
  quantizedType(n, x, "x");
  quantizedType(n, w, "w");
  Tensor qx = n.input(x);
  if (zpX && zpX->numElements() != 1)
    n.unsupported("x_zero_point " + shapeOf(*zpX) + " (one element, per tensor)");
  if (zpX)
    zpX = reshape(*zpX, {});
  if (bias)
    bias = convert(*bias, DType::f32);
  // int8 filters, per tensor or per output channel, dequantized at import time.
  if (n.knownWeight(w))
    if (std::optional<Tensor> weight = dequantizedWeight(n, w, wZeroPointInput, -1, 0))
      return convolve(n, centered(qx, zpX), *weight, bias);
  Tensor qw = n.input(w);
  std::optional<Tensor> zpW; // one element, or one per output channel
  if (n.hasInput(wZeroPointInput))
    zpW = perIndexAlong(n.input(wZeroPointInput), 0, qw.rank(), qw.dim(0),
                        "w_zero_point (per output channel)");
  return convolve(n, centered(qx, zpX), centered(qw, zpW), bias);
}

void convInteger(NodeImporter &n) {
  n.setOutput(0, convert(integerConv(n, 0, 1, 3, n.optionalInput(2), std::nullopt), DType::i32));
}

/// `accumulator` (f32 integers) requantized: times a_scale * b_scale / y_scale (computed in f32
/// as ONNX Runtime does, per tensor or per row, column or channel as the scales come), rounded
/// and offset by y_zero_point (input `zpY`), saturated to its type.
Tensor requantized(const NodeImporter &n, Tensor accumulator, Tensor scaleA, Tensor scaleB,
                   int scaleY, int zpY) {
  Tensor scale = floatInput(n, scaleY), zeroPoint = n.input(zpY);
  if (scale.numElements() != 1 || zeroPoint.numElements() != 1)
    n.unsupported("y_scale " + shapeOf(scale) + " and y_zero_point " + shapeOf(zeroPoint) +
                  " (one element each, per tensor)");
  Tensor multiplier = div(mul(convert(scaleA, DType::f32), convert(scaleB, DType::f32)),
                          convert(reshape(scale, {}), DType::f32));
  int type = quantizedType(n, zpY, "y_zero_point");
  return quantized(mul(accumulator, multiplier), reshape(zeroPoint, {}), type);
}

/// A QLinear op's scale of an operand (input `i`), per tensor or per index along `dim`.
Tensor scaleAlong(const NodeImporter &n, int i, int64_t dim, int64_t rank, int64_t length,
                  const char *what) {
  return perIndexAlong(floatInput(n, i), dim, rank, length, what);
}

void qLinearMatMul(NodeImporter &n) {
  Tensor y = integerMatmul(n, 0, 3, 2, 5);
  Tensor a = n.input(0), b = n.input(3);
  Tensor scaleA = a.rank() >= 2 ? scaleAlong(n, 1, y.rank() - 2, y.rank(), a.dim(-2), "a_scale")
                                : reshape(floatInput(n, 1), {});
  Tensor scaleB = b.rank() >= 2 ? scaleAlong(n, 4, y.rank() - 1, y.rank(), b.dim(-1), "b_scale")
                                : reshape(floatInput(n, 4), {});
  n.setOutput(0, requantized(n, y, scaleA, scaleB, 6, 7));
  n.setNarrowType(0, quantizedType(n, 7, "y_zero_point"));
}

void qLinearConv(NodeImporter &n) {
  Tensor w = n.input(3);
  std::optional<Tensor> bias = n.optionalInput(8);
  if (bias && bias->dtype() != DType::i32)
    fail(ImportErrorKind::BadFile,
         "QLinearConv's bias B is " + std::string(dtypeName(bias->dtype())) + ", expected INT32");
  Tensor y = integerConv(n, 0, 3, 5, n.input(2), bias);
  Tensor scaleX = reshape(floatInput(n, 1), {});
  Tensor scaleW = scaleAlong(n, 4, 1, y.rank(), w.dim(0), "w_scale");
  n.setOutput(0, requantized(n, y, scaleX, scaleW, 6, 7));
  n.setNarrowType(0, quantizedType(n, 7, "y_zero_point"));
}

// com.microsoft's quantized ops, which ONNX Runtime's quantizer writes in its QOperator format
// (and the ONNX model zoo's int8 models use): per-tensor uint8/int8 operands, each computed as
// its float op on the dequantized inputs and quantized to the output's scale and zero point.

/// Input `i` (quantized, with its scale at `i + 1` and optional zero point at `i + 2`)
/// dequantized to f32.
Tensor dequantizedInput(const NodeImporter &n, int i) {
  quantizedType(n, i, "a quantized operand");
  Tensor scale = floatInput(n, i + 1);
  if (scale.numElements() != 1)
    n.unsupported("scale " + shapeOf(scale) + " of input " + std::to_string(i) +
                  " (com.microsoft's elementwise ops quantize per tensor)");
  std::optional<Tensor> zeroPoint;
  if (n.hasInput(i + 2))
    zeroPoint = reshape(n.input(i + 2), {});
  return mul(centered(n.input(i), zeroPoint), convert(reshape(scale, {}), DType::f32));
}

/// f32 `v` quantized to output 0 with the scale at input `i` and the zero point at `i + 1`
/// (its type; without one, `type`).
void setQuantizedOutput(NodeImporter &n, Tensor v, int i, int type) {
  Tensor scale = convert(reshape(floatInput(n, i), {}), DType::f32);
  std::optional<Tensor> zeroPoint;
  if (n.hasInput(i + 1)) {
    type = quantizedType(n, i + 1, "the output's zero point");
    zeroPoint = reshape(n.input(i + 1), {});
  }
  n.setOutput(0, quantized(div(v, scale), zeroPoint, type));
  n.setNarrowType(0, type);
}

void qLinearAdd(NodeImporter &n) {
  setQuantizedOutput(n, add(dequantizedInput(n, 0), dequantizedInput(n, 3)), 6,
                     quantizedType(n, 0, "A"));
}
void qLinearMul(NodeImporter &n) {
  setQuantizedOutput(n, mul(dequantizedInput(n, 0), dequantizedInput(n, 3)), 6,
                     quantizedType(n, 0, "A"));
}
void qLinearSigmoid(NodeImporter &n) {
  setQuantizedOutput(n, logistic(dequantizedInput(n, 0)), 3, quantizedType(n, 0, "X"));
}
void qLinearLeakyRelu(NodeImporter &n) {
  Tensor x = dequantizedInput(n, 0);
  Tensor negative = compare(x, scalarLike(x, 0), CompareDirection::lt);
  setQuantizedOutput(n, select(negative, mul(x, scalarLike(x, n.attrFloat("alpha", 0.01))), x), 3,
                     quantizedType(n, 0, "X"));
}

/// QLinearConcat(Y_scale, Y_zero_point, (X, X_scale, X_zero_point)...): each input
/// requantized to the output's scale and zero point.
void qLinearConcat(NodeImporter &n) {
  if (n.numInputs() < 5 || (n.numInputs() - 2) % 3 != 0)
    fail(ImportErrorKind::BadFile, "QLinearConcat takes Y_scale, Y_zero_point and triples of "
                                   "X, X_scale, X_zero_point; it has " +
                                       std::to_string(n.numInputs()) + " inputs");
  std::vector<Tensor> parts;
  for (int i = 2; i < n.numInputs(); i += 3)
    parts.push_back(dequantizedInput(n, i));
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), parts[0].rank(), "axis");
  setQuantizedOutput(n, concat(parts, axis), 0, quantizedType(n, 2, "X"));
}

/// QLinearSoftmax: Softmax's semantics of its `opset` attribute (before 13: the input read as
/// 2-D from the axis on).
void qLinearSoftmax(NodeImporter &n) {
  Tensor x = dequantizedInput(n, 0);
  int64_t opset = n.attrInt("opset", 13);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", opset >= 13 ? -1 : 1), x.rank(), "axis");
  Tensor y;
  if (opset >= 13) {
    y = softmax(x, axis);
  } else {
    std::vector<int64_t> s = x.shape();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < x.rank(); ++d)
      (d < axis ? outer : inner) *= s[size_t(d)];
    y = reshape(softmax(reshape(x, {outer, inner}), 1), s);
  }
  setQuantizedOutput(n, y, 3, quantizedType(n, 0, "X"));
}

/// QLinearGlobalAveragePool: the mean over the spatial axes (after the channels, or before them
/// with channels_last).
void qLinearGlobalAveragePool(NodeImporter &n) {
  Tensor x = dequantizedInput(n, 0);
  if (x.rank() < 3)
    fail(ImportErrorKind::BadFile, "QLinearGlobalAveragePool's X is " + shapeOf(x) +
                                       "; it needs a batch, channels and spatial axes");
  bool channelsLast = n.attrInt("channels_last", 0) != 0;
  std::vector<int64_t> axes;
  for (int64_t d = channelsLast ? 1 : 2; d < x.rank() - (channelsLast ? 1 : 0); ++d)
    axes.push_back(d);
  setQuantizedOutput(n, mean(x, axes, KeepDims::yes), 3, quantizedType(n, 0, "X"));
}

/// QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point): alpha
/// A B (either transposed) plus C, an INT32 bias at scale a_scale * b_scale; quantized when
/// y_scale is given, else f32. B's scale and zero point may be per column; int8 weights are
/// dequantized at import time.
void qGemm(NodeImporter &n) {
  Tensor a = dequantizedInput(n, 0);
  bool transA = n.attrInt("transA", 0) != 0, transB = n.attrInt("transB", 0) != 0;
  quantizedType(n, 3, "B");
  if (a.rank() != 2)
    fail(ImportErrorKind::BadFile, "QGemm's A is 2-D; it is " + shapeOf(a));
  int64_t columnAxis = transB ? 0 : 1;
  const Weight *weight = n.knownWeight(3);
  std::optional<Tensor> b;
  if (weight && weight->shape.size() == 2)
    b = dequantizedWeight(n, 3, 5, 4, columnAxis);
  if (!b) {
    Tensor qb = n.input(3);
    if (qb.rank() != 2)
      fail(ImportErrorKind::BadFile, "QGemm's B is 2-D; it is " + shapeOf(qb));
    int64_t columns = qb.dim(columnAxis);
    std::optional<Tensor> zeroPoint;
    if (n.hasInput(5))
      zeroPoint = perIndexAlong(n.input(5), columnAxis, 2, columns, "b_zero_point");
    b = mul(centered(qb, zeroPoint),
            convert(scaleAlong(n, 4, columnAxis, 2, columns, "b_scale"), DType::f32));
  }
  Tensor y = mul(matmul(a, *b, transA, transB), scalarLike(a, n.attrFloat("alpha", 1.0)));
  if (std::optional<Tensor> c = n.optionalInput(6)) {
    Tensor scaleA = convert(reshape(floatInput(n, 1), {}), DType::f32);
    Tensor scaleB = convert(floatInput(n, 4), DType::f32);
    y = add(y, mul(convert(*c, DType::f32), mul(scaleA, scaleB)));
  }
  if (!n.hasInput(7)) {
    n.setOutput(0, y);
    return;
  }
  setQuantizedOutput(n, y, 7, quantizedType(n, 0, "A"));
}

} // namespace

void addMicrosoftQuantizeOps(ConverterTable &t) {
  t["QLinearAdd"] = qLinearAdd;
  t["QLinearMul"] = qLinearMul;
  t["QLinearSigmoid"] = qLinearSigmoid;
  t["QLinearLeakyRelu"] = qLinearLeakyRelu;
  t["QLinearConcat"] = qLinearConcat;
  t["QLinearSoftmax"] = qLinearSoftmax;
  t["QLinearGlobalAveragePool"] = qLinearGlobalAveragePool;
  t["QGemm"] = qGemm;
  t["QuantizeLinear"] = quantizeLinear; // com.microsoft's older int16 forms: the same formula
  t["DequantizeLinear"] = dequantizeLinear;
  t["QLinearConv"] = qLinearConv;
  t["QLinearMatMul"] = qLinearMatMul;
}

void addQuantizeOps(ConverterTable &t) {
  t["QuantizeLinear"] = quantizeLinear;
  t["DequantizeLinear"] = dequantizeLinear;
  t["DynamicQuantizeLinear"] = dynamicQuantizeLinear;
  t["MatMulInteger"] = matMulInteger;
  t["ConvInteger"] = convInteger;
  t["QLinearMatMul"] = qLinearMatMul;
  t["QLinearConv"] = qLinearConv;
}

} // namespace smelt::onnx
