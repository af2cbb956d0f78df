// MaxPool's Indices output and MaxUnpool, which a SegNet-style decoder uses to put each pooled
// maximum back where it came from. Indices are positions in the whole input, row-major over
// N, C and the spatial axes (column-major over the spatial axes with storage_order 1), as ONNX
// Runtime and PyTorch give them: the first window tap, in scan order, that holds the maximum
// and lies inside the input, found by comparing each tap's strided slice of the input with the
// pooled result. MaxUnpool scatters the values to their indices in zeros.
#include "frontend/onnx/NodeImporter.h"

#include <limits>

namespace smelt::onnx {

Tensor maxPoolIndices(Tensor x, Tensor pooled, const std::vector<int64_t> &kernel,
                      const std::vector<int64_t> &strides, const std::vector<int64_t> &low,
                      const std::vector<int64_t> &high, bool columnMajor) {
  Graph &g = x.graph();
  int64_t r = x.rank() - 2;
  std::vector<int64_t> shape = pooled.shape(), padLow = {0, 0}, padHigh = {0, 0};
  padLow.insert(padLow.end(), low.begin(), low.end());
  padHigh.insert(padHigh.end(), high.begin(), high.end());
  Tensor padded = pad(x, padLow, padHigh, -std::numeric_limits<double>::infinity());
  // Each spatial axis's order in the flat index: row-major, or reversed (column-major).
  std::vector<int64_t> order(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i)
    order[size_t(i)] = columnMajor ? r - 1 - i : i;
  auto i64 = [&](double v) { return constant(g, v, {}, DType::i64); };
  // (n * C + c) * (D1 * ... * Dr): where each (n, c) plane starts.
  int64_t planeSize = 1;
  for (int64_t i = 0; i < r; ++i)
    planeSize *= x.dim(2 + i);
  Tensor plane = mul(add(mul(iota(g, shape, 0), i64(double(x.dim(1)))), iota(g, shape, 1)),
                     i64(double(planeSize)));
  std::vector<int64_t> tap(static_cast<size_t>(r), 0);
  int64_t taps = 1;
  for (int64_t k : kernel)
    taps *= k;
  std::optional<Tensor> index;
  // The taps from the last to the first, so that the first one holding the maximum wins.
  for (int64_t t = taps - 1; t >= 0; --t) {
    for (int64_t i = r - 1, rest = t; i >= 0; rest /= kernel[size_t(i)], --i)
      tap[size_t(i)] = rest % kernel[size_t(i)];
    std::vector<int64_t> start = {0, 0}, limit = {shape[0], shape[1]}, step = {1, 1};
    std::optional<Tensor> inside;
    std::vector<Tensor> coordinates(static_cast<size_t>(r), plane);
    for (int64_t i = 0; i < r; ++i) {
      int64_t out = shape[size_t(2 + i)], s = strides[size_t(i)];
      start.push_back(tap[size_t(i)]);
      limit.push_back(tap[size_t(i)] + (out - 1) * s + 1);
      step.push_back(s);
      // The input coordinate: o * stride - low + tap.
      Tensor at = add(mul(iota(g, shape, 2 + i), i64(double(s))),
                      i64(double(tap[size_t(i)] - low[size_t(i)])));
      Tensor in = andOf(compare(at, i64(0), CompareDirection::ge),
                        compare(at, i64(double(x.dim(2 + i))), CompareDirection::lt));
      inside = inside ? andOf(*inside, in) : in;
      coordinates[size_t(i)] = at;
    }
    Tensor offset = coordinates[size_t(order[0])];
    for (int64_t j = 1; j < r; ++j)
      offset = add(mul(offset, i64(double(x.dim(2 + order[size_t(j)])))),
                   coordinates[size_t(order[size_t(j)])]);
    Tensor position = add(plane, offset);
    Tensor holds = compare(slice(padded, start, limit, step), pooled, CompareDirection::eq);
    Tensor hit = andOf(*inside, holds);
    index = index ? select(hit, position, *index) : select(hit, position, plane);
  }
  return *index;
}

namespace {

/// MaxUnpool: X [N, C, O...] put at indices I into zeros of [N, C, D...], D = (O - 1) * stride +
/// kernel - pads (then padded with zeros to output_shape when it is given). Indices that repeat
/// (overlapping windows that share their maximum) carry one value: the mean of the landed copies,
/// which is that value (exactly for two or four copies, within a rounding for three).
void maxUnpool(NodeImporter &n) {
  Tensor x = floatInput(n, 0), indices = n.input(1);
  int64_t r = x.rank() - 2;
  if (r < 1 || indices.shape() != x.shape() || rt::isFloat(indices.dtype()))
    fail(ImportErrorKind::BadFile, "X is " + shapeString(x.shape()) + " and I " +
                                       shapeString(indices.shape()) +
                                       ", expected one shape [N, C, spatial...] and integer I");
  std::vector<int64_t> ones(static_cast<size_t>(r), 1);
  std::vector<int64_t> kernel = n.attrInts("kernel_shape", {}),
                       strides = n.attrInts("strides", ones),
                       pads = n.attrInts("pads", std::vector<int64_t>(size_t(2 * r), 0));
  if (int64_t(kernel.size()) != r || int64_t(strides.size()) != r || int64_t(pads.size()) != 2 * r)
    fail(ImportErrorKind::BadFile,
         "kernel_shape, strides or pads do not match X's " + std::to_string(r) + " spatial axes");
  // The indices are positions in the inferred shape, (O - 1) * stride + kernel - pads; a
  // larger output_shape ([N, C, D...]) gets zeros after it along each axis, as in ONNX's
  // reference.
  std::vector<int64_t> shape = {x.dim(0), x.dim(1)};
  for (int64_t i = 0; i < r; ++i)
    shape.push_back((x.dim(2 + i) - 1) * strides[size_t(i)] + kernel[size_t(i)] - pads[size_t(i)] -
                    pads[size_t(i + r)]);
  std::vector<int64_t> outputShape = shape;
  if (n.hasInput(2)) {
    outputShape.clear();
    for (double v : n.constantInput(2, "output_shape").values)
      outputShape.push_back(int64_t(v));
    bool fits = int64_t(outputShape.size()) == r + 2;
    for (size_t d = 0; fits && d < shape.size(); ++d)
      fits = d < 2 ? outputShape[d] == shape[d] : outputShape[d] >= shape[d];
    if (!fits)
      fail(ImportErrorKind::BadFile, "output_shape " + shapeString(outputShape) +
                                         " does not hold the unpooled " + shapeString(shape));
  }
  int64_t total = 1, count = x.numElements();
  for (int64_t d : shape)
    total *= d;
  Tensor at = reshape(convert(indices, DType::i64), {count});
  Tensor values = reshape(x, {count});
  Tensor landed = scatterAdd(values, at, total);
  Tensor hits = scatterAdd(broadcastTo(scalarLike(values, 1), {count}), at, total);
  Tensor anyHit = compare(hits, scalarLike(hits, 0), CompareDirection::gt);
  Tensor unpooled =
      select(anyHit, div(landed, select(anyHit, hits, broadcastTo(scalarLike(hits, 1), {total}))),
             broadcastTo(scalarLike(landed, 0), {total}));
  Tensor y = reshape(unpooled, shape);
  if (outputShape != shape) {
    std::vector<int64_t> low(shape.size(), 0), high;
    for (size_t d = 0; d < shape.size(); ++d)
      high.push_back(outputShape[d] - shape[d]);
    y = pad(y, low, high);
  }
  n.setOutput(0, y);
}

} // namespace

void addUnpoolOps(ConverterTable &t) { t["MaxUnpool"] = maxUnpool; }

} // namespace smelt::onnx
