// The converters of GridSample (opsets 16 and 20) and AffineGrid (20), which makes the
// sampling grid of an affine transform (a spatial transformer's F.affine_grid, as the
// TorchScript exporter writes it). GridSample: each output position reads the input at the
// grid's coordinates there, interpolated (nearest, linear or cubic) and padded (zeros, border or
// reflection) as ONNX's reference (onnx/reference/ops/op_grid_sample.py) and PyTorch's
// grid_sampler do. The coordinates are known only at run time, so each interpolation tap is one
// smelt.gather of the input's [N * D1 * ... * Dr, C] rows at positions computed from the grid,
// weighted and summed: a bilinear sample is 4 gathers, a bicubic one 16. Gather's gradient is
// scatter_add and the weights are arithmetic on the grid, so an imported model trains through
// both operands (floor's gradient is zero, as in PyTorch's).
#include "frontend/onnx/NodeImporter.h"

namespace smelt::onnx {
namespace {

enum class Interpolation { nearest, linear, cubic };
enum class Padding { zeros, border, reflection };

/// One spatial axis of the input: its length, and the range [lo, hi] that coordinates outside
/// of are moved back (the edges' centres with align_corners, else their outer edges).
struct SampleAxis {
  int64_t length;
  double lo, hi;
};

/// One interpolation tap along an axis: the input index it reads (i64, in range), its weight
/// (none for nearest, whose one tap weighs 1), and `inside` (i1) where zeros padding reads
/// nothing, else null.
struct Tap {
  Tensor index;
  std::optional<Tensor> weight, inside;
};

/// `x` reflected into [lo, hi], bouncing off the borders as often as it takes (PyTorch's
/// reflect_coordinates): after an even number of bounces it comes back in from the border it
/// crossed, after an odd number from the other one.
Tensor reflected(Tensor x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) // one entry, with align_corners: every coordinate is its centre
    return broadcastTo(scalarLike(x, lo), x.shape());
  Tensor below = compare(x, scalarLike(x, lo), CompareDirection::lt);
  Tensor above = compare(x, scalarLike(x, hi), CompareDirection::gt);
  Tensor distance = select(below, sub(scalarLike(x, lo), x), sub(x, scalarLike(x, hi)));
  Tensor bounces = floorOf(div(distance, scalarLike(x, range)));
  Tensor rest = sub(distance, mul(bounces, scalarLike(x, range)));
  Tensor halfBounces = mul(bounces, scalarLike(x, 0.5));
  Tensor odd = compare(floorOf(halfBounces), halfBounces, CompareDirection::ne);
  Tensor fromLow = compare(below, odd, CompareDirection::ne);
  Tensor inside = select(fromLow, add(scalarLike(x, lo), rest), sub(scalarLike(x, hi), rest));
  return select(orOf(below, above), inside, x);
}

/// The input index `at` (a float, integral) reads along `axis`: in range, by the padding mode.
Tap tapAt(Tensor at, std::optional<Tensor> weight, const SampleAxis &axis, Padding padding) {
  double last = double(axis.length - 1);
  if (padding == Padding::zeros) {
    Tensor notBelow = compare(at, scalarLike(at, 0), CompareDirection::ge);
    Tensor inside = andOf(notBelow, compare(at, scalarLike(at, last), CompareDirection::le));
    Tensor index = select(inside, at, broadcastTo(scalarLike(at, 0), at.shape()));
    return {convert(index, DType::i64), weight, inside};
  }
  Tensor index = padding == Padding::border ? at : reflected(at, axis.lo, axis.hi);
  // Clamped for reflection too: a NaN coordinate must still read inside the input.
  return {convert(clamp(index, 0, last), DType::i64), weight, std::nullopt};
}

/// Keys' cubic convolution weights (A = -0.75, PyTorch's and ONNX's) of the four taps around a
/// coordinate whose fraction past its floor is `t`.
std::vector<Tensor> cubicWeights(Tensor t) {
  const double a = -0.75;
  auto c = [&](double v) { return scalarLike(t, v); };
  auto outer = [&](Tensor s) { // |s| in [1, 2]
    return sub(mul(add(mul(sub(mul(c(a), s), c(5 * a)), s), c(8 * a)), s), c(4 * a));
  };
  auto inner = [&](Tensor s) { // |s| in [0, 1]
    return add(mul(mul(sub(mul(c(a + 2), s), c(a + 3)), s), s), c(1));
  };
  return {outer(add(t, c(1))), inner(t), inner(sub(c(1), t)), outer(sub(c(2), t))};
}

/// The taps along `axis` of coordinate `x` (unnormalized, float) by the interpolation and the
/// padding, following the reference: nearest rounds half to even first; a coordinate outside
/// [lo, hi] is clamped (border) or reflected (reflection); then each tap's index is padded.
std::vector<Tap> tapsAlong(Tensor x, const SampleAxis &axis, Interpolation mode, Padding padding) {
  if (mode == Interpolation::nearest)
    x = roundHalfEven(x);
  if (padding != Padding::zeros) {
    Tensor outside = orOf(compare(x, scalarLike(x, axis.lo), CompareDirection::lt),
                          compare(x, scalarLike(x, axis.hi), CompareDirection::gt));
    Tensor moved = padding == Padding::border ? clamp(x, 0, double(axis.length - 1))
                                              : reflected(x, axis.lo, axis.hi);
    x = select(outside, moved, x);
  }
  if (mode == Interpolation::nearest)
    return {tapAt(x, std::nullopt, axis, padding)};
  Tensor below = floorOf(x), t = sub(x, below);
  std::vector<Tap> taps;
  if (mode == Interpolation::linear) {
    taps.push_back(tapAt(below, sub(scalarLike(t, 1), t), axis, padding));
    taps.push_back(tapAt(add(below, scalarLike(below, 1)), t, axis, padding));
    return taps;
  }
  std::vector<Tensor> weights = cubicWeights(t);
  for (int k = 0; k < 4; ++k)
    taps.push_back(
        tapAt(add(below, scalarLike(below, double(k - 1))), weights[size_t(k)], axis, padding));
  return taps;
}

Interpolation interpolationOf(const NodeImporter &n) {
  // Opset 20 renamed bilinear and bicubic, which now also name 1-D and 3-D sampling.
  std::string mode = n.attrString("mode", n.opset >= 20 ? "linear" : "bilinear");
  if (mode == "nearest")
    return Interpolation::nearest;
  if (mode == (n.opset >= 20 ? "linear" : "bilinear"))
    return Interpolation::linear;
  if (mode == (n.opset >= 20 ? "cubic" : "bicubic"))
    return Interpolation::cubic;
  fail(ImportErrorKind::BadFile,
       "mode '" + mode + "' is not one of GridSample-" + std::to_string(n.opset >= 20 ? 20 : 16) +
           "'s (" + (n.opset >= 20 ? "linear, nearest, cubic" : "bilinear, nearest, bicubic") +
           ")");
}

Padding paddingOf(const NodeImporter &n) {
  std::string padding = n.attrString("padding_mode", "zeros");
  if (padding == "zeros")
    return Padding::zeros;
  if (padding == "border")
    return Padding::border;
  if (padding == "reflection")
    return Padding::reflection;
  fail(ImportErrorKind::BadFile,
       "padding_mode '" + padding + "' is not one of zeros, border, reflection");
}

/// GridSample: X [N, C, D1..Dr] sampled at grid [N, O1..Or, r] (coordinates in [-1, 1], the
/// last axis's first), giving [N, C, O1..Or].
void gridSample(NodeImporter &n) {
  Tensor x = n.input(0), grid = floatInput(n, 1);
  Interpolation mode = interpolationOf(n);
  Padding padding = paddingOf(n);
  bool alignCorners = n.attrInt("align_corners", 0) != 0;
  int64_t r = x.rank() - 2;
  if (r < 1 || (n.opset < 20 && r != 2))
    fail(ImportErrorKind::BadFile, "X is " + shapeString(x.shape()) + ", expected [N, C, H, W]" +
                                       (n.opset < 20 ? "" : " or another count of spatial axes"));
  if (grid.rank() != r + 2 || grid.dim(0) != x.dim(0) || grid.dim(-1) != r)
    fail(ImportErrorKind::BadFile, "grid is " + shapeString(grid.shape()) + ", expected [" +
                                       std::to_string(x.dim(0)) + ", output sizes (" +
                                       std::to_string(r) + " of them), " + std::to_string(r) + "]");
  if (!rt::isFloat(x.dtype()) && mode != Interpolation::nearest)
    n.unsupported(std::string("linear and cubic sampling of ") + dtypeName(x.dtype()) +
                  " data (nearest samples integers)");
  // Coordinates and weights in f32 at least (f16 coordinates would round before the floor).
  DType work = grid.dtype() == DType::f64 ? DType::f64 : DType::f32;
  grid = convert(grid, work);
  std::vector<int64_t> outShape = grid.shape(); // [N, O...]
  outShape.pop_back();
  // The input's rows: [N, D1..Dr, C] flattened to [N * D1 * ... * Dr, C].
  std::vector<int64_t> channelsLast = {0}, rowsShape = {x.dim(0)};
  for (int64_t d = 2; d < x.rank(); ++d) {
    channelsLast.push_back(d);
    rowsShape[0] *= x.dim(d);
  }
  channelsLast.push_back(1);
  rowsShape.push_back(x.dim(1));
  Tensor rows = reshape(transpose(x, channelsLast), rowsShape);

  // Taps per spatial axis (axis i of the input is the grid's coordinate r - 1 - i) and the
  // row stride of each; the batch's stride starts the positions.
  std::vector<std::vector<Tap>> taps;
  std::vector<double> strides(static_cast<size_t>(r));
  double stride = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    strides[size_t(i)] = stride;
    stride *= double(x.dim(i + 2));
  }
  for (int64_t i = 0; i < r; ++i) {
    int64_t length = x.dim(i + 2);
    std::vector<int64_t> start(size_t(grid.rank()), 0), limit = grid.shape();
    start.back() = r - 1 - i;
    limit.back() = r - i;
    Tensor normalized = reshape(slice(grid, start, limit), outShape);
    Tensor plus1 = add(normalized, scalarLike(normalized, 1));
    Tensor coordinate =
        alignCorners ? mul(div(plus1, scalarLike(plus1, 2)), scalarLike(plus1, double(length - 1)))
                     : div(sub(mul(plus1, scalarLike(plus1, double(length))), scalarLike(plus1, 1)),
                           scalarLike(plus1, 2));
    SampleAxis axis{length, alignCorners ? 0.0 : -0.5,
                    alignCorners ? double(length - 1) : double(length) - 0.5};
    taps.push_back(tapsAlong(coordinate, axis, mode, padding));
  }
  Tensor batchStart =
      mul(iota(n.g, outShape, 0, DType::i64), constant(n.g, stride, {}, DType::i64));

  // Every combination of one tap per axis: one gather, weighted by the product of the taps'
  // weights, nothing where zeros padding reads outside.
  std::vector<int64_t> withChannels = outShape, weightShape = outShape;
  withChannels.push_back(x.dim(1));
  weightShape.push_back(1);
  std::optional<Tensor> sum;
  std::vector<size_t> pick(size_t(r), 0);
  while (true) {
    Tensor position = batchStart;
    std::optional<Tensor> weight, inside; // the taps' product; where each reads inside the input
    for (int64_t i = 0; i < r; ++i) {
      const Tap &tap = taps[size_t(i)][pick[size_t(i)]];
      Tensor index = tap.index;
      position = add(position, strides[size_t(i)] == 1
                                   ? index
                                   : mul(index, constant(n.g, strides[size_t(i)], {}, DType::i64)));
      if (tap.weight)
        weight = weight ? mul(*weight, *tap.weight) : *tap.weight;
      if (tap.inside)
        inside = inside ? andOf(*inside, *tap.inside) : *tap.inside;
    }
    Tensor values = gatherRows(rows, position); // [N, O..., C]
    // Nearest has one tap of weight 1: integer data stays exact.
    Tensor term = weight ? mul(convert(values, work),
                               broadcastTo(reshape(*weight, weightShape), withChannels))
                         : values;
    if (inside)
      term = select(broadcastTo(reshape(*inside, weightShape), withChannels), term,
                    broadcastTo(scalarLike(term, 0), withChannels));
    sum = sum ? add(*sum, term) : term;
    // The next combination, the last axis's tap fastest.
    int64_t i = r - 1;
    while (i >= 0 && ++pick[size_t(i)] == taps[size_t(i)].size())
      pick[size_t(i--)] = 0;
    if (i < 0)
      break;
  }
  // [N, O..., C] -> [N, C, O...].
  std::vector<int64_t> channelsFirst = {0, r + 1};
  for (int64_t i = 1; i <= r; ++i)
    channelsFirst.push_back(i);
  n.setOutput(0, transpose(convert(*sum, x.dtype()), channelsFirst));
}

/// AffineGrid: theta [N, 2, 3] (or [N, 3, 4]) and size [N, C, H, W] (or [N, C, D, H, W], known
/// at import time) -> grid [N, H, W, 2] (or [N, D, H, W, 3]): each position's normalized
/// coordinates (x, y[, z], 1), the last axis's first, times theta. A coordinate along an axis
/// of L entries is -1 + 2i / (L - 1) with align_corners (-1 when L is 1), else -1 + (2i + 1) / L.
void affineGrid(NodeImporter &n) {
  Tensor theta = floatInput(n, 0);
  std::vector<int64_t> size;
  for (double v : n.constantInput(1, "the size").values)
    size.push_back(int64_t(v));
  bool alignCorners = n.attrInt("align_corners", 0) != 0;
  int64_t r = int64_t(size.size()) - 2;
  if ((r != 2 && r != 3) || theta.rank() != 3 || theta.dim(1) != r || theta.dim(2) != r + 1 ||
      theta.dim(0) != size[0])
    fail(
        ImportErrorKind::BadFile,
        "theta is " + shapeString(theta.shape()) + " and size " + shapeString(size) +
            ", expected theta [N, 2, 3] with size [N, C, H, W], or [N, 3, 4] with [N, C, D, H, W]");
  for (int64_t d : size)
    if (d < 1)
      fail(ImportErrorKind::BadFile, "size " + shapeString(size) + " has an empty dimension");
  std::vector<int64_t> spatial(size.begin() + 2, size.end());
  int64_t positions = 1;
  for (int64_t d : spatial)
    positions *= d;
  // The homogeneous coordinates of every position, row-major over the spatial axes: [P, r + 1].
  std::vector<double> base;
  for (int64_t p = 0; p < positions; ++p) {
    std::vector<double> coordinates(static_cast<size_t>(r) + 1, 1.0);
    int64_t rest = p;
    for (int64_t i = r - 1; i >= 0; --i) {
      double length = double(spatial[size_t(i)]), index = double(rest % spatial[size_t(i)]);
      rest /= spatial[size_t(i)];
      coordinates[size_t(r - 1 - i)] = alignCorners
                                           ? (length > 1 ? -1 + 2 * index / (length - 1) : -1.0)
                                           : -1 + (2 * index + 1) / length;
    }
    base.insert(base.end(), coordinates.begin(), coordinates.end());
  }
  // grid[n, p, j] = sum_k theta[n, j, k] base[p, k]: [N, P, r, r + 1] summed over k.
  int64_t batch = size[0];
  Tensor positionsTable = constant(n.g, base, {1, positions, 1, r + 1}, theta.dtype());
  std::vector<int64_t> products = {batch, positions, r, r + 1};
  Tensor grid = reduceSum(mul(broadcastTo(reshape(theta, {batch, 1, r, r + 1}), products),
                              broadcastTo(positionsTable, products)),
                          {3});
  std::vector<int64_t> gridShape = {batch};
  gridShape.insert(gridShape.end(), spatial.begin(), spatial.end());
  gridShape.push_back(r);
  n.setOutput(0, reshape(grid, gridShape));
}

} // namespace

void addGridOps(ConverterTable &t) {
  t["GridSample"] = gridSample;
  t["AffineGrid"] = affineGrid;
}

} // namespace smelt::onnx
