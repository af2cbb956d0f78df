// Converters of ONNX's shape ops, all static: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
// Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth,
// and the ops whose result is known at import time (Shape, Size, Constant, ConstantOfShape,
// Range), which later ops may read as constants.
#include "frontend/onnx/NodeImporter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace smelt::onnx {
namespace {

/// The most elements a value computed at import time (ConstantOfShape, Range) may have.
constexpr int64_t kMaxKnownElements = int64_t(1) << 28;

TensorValue int64Vector(const std::vector<int64_t> &ints) {
  TensorValue v;
  v.type = DType::i64;
  v.shape = {int64_t(ints.size())};
  v.values.assign(ints.begin(), ints.end());
  return v;
}

/// Axes from input `i` (opset >= 13 style) or the `axes` attribute (older opsets).
std::vector<int64_t> axesOf(const NodeImporter &n, int i, int64_t sinceOpset) {
  if (n.opset >= sinceOpset)
    return n.hasInput(i) ? n.intsInput(i, "axes") : std::vector<int64_t>{};
  return n.attrInts("axes", {});
}

void reshapeOp(NodeImporter &n) {
  Tensor x = n.input(0);
  std::vector<int64_t> shape = n.intsInput(1, "the target shape");
  bool allowZero = n.attrInt("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0 && !allowZero) {
      if (int64_t(i) >= x.rank())
        fail(ImportErrorKind::BadFile, "a 0 in the target shape copies a missing dimension");
      shape[i] = x.dim(int64_t(i));
    }
  n.setOutput(0, reshape(x, shape));
}

void flatten(NodeImporter &n) {
  Tensor x = n.input(0);
  int64_t axis = n.attrInt("axis", 1);
  axis = axis < 0 ? axis + x.rank() : axis;
  if (axis < 0 || axis > x.rank())
    fail(ImportErrorKind::BadFile, "axis out of range");
  std::vector<int64_t> s = x.shape();
  int64_t outer = std::accumulate(s.begin(), s.begin() + axis, int64_t(1), std::multiplies<>());
  int64_t inner = std::accumulate(s.begin() + axis, s.end(), int64_t(1), std::multiplies<>());
  n.setOutput(0, reshape(x, {outer, inner}));
}

void squeeze(NodeImporter &n) {
  Tensor x = n.input(0);
  std::vector<int64_t> axes = axesOf(n, 1, 13);
  std::vector<bool> drop(size_t(x.rank()), axes.empty());
  if (axes.empty())
    for (int64_t d = 0; d < x.rank(); ++d)
      drop[size_t(d)] = x.dim(d) == 1;
  for (int64_t a : axes) {
    a = normalizeAxis(n, a, x.rank(), "axis");
    if (x.dim(a) != 1)
      fail(ImportErrorKind::BadFile, "squeezed axis " + std::to_string(a) + " has size " +
                                         std::to_string(x.dim(a)));
    drop[size_t(a)] = true;
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (!drop[size_t(d)])
      shape.push_back(x.dim(d));
  n.setOutput(0, reshape(x, shape));
}

void unsqueeze(NodeImporter &n) {
  Tensor x = n.input(0);
  std::vector<int64_t> axes = axesOf(n, 1, 13);
  int64_t rank = x.rank() + int64_t(axes.size());
  std::vector<bool> inserted(size_t(rank), false);
  for (int64_t a : axes)
    inserted[size_t(normalizeAxis(n, a, rank, "axis"))] = true;
  std::vector<int64_t> shape;
  int64_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[size_t(d)] ? 1 : x.dim(next++));
  n.setOutput(0, reshape(x, shape));
}

void transposeOp(NodeImporter &n) {
  Tensor x = n.input(0);
  std::vector<int64_t> reversed(size_t(x.rank()));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  n.setOutput(0, foldingTranspose(x, n.attrInts("perm", reversed)));
}

void concatOp(NodeImporter &n) {
  std::vector<Tensor> parts;
  for (int i = 0; i < n.numInputs(); ++i)
    parts.push_back(n.input(i));
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), parts[0].rank(), "axis");
  n.setOutput(0, concat(parts, axis));
}

/// Split's sizes: the 'split' input (an attribute before opset 13), or equal parts, one an
/// output; from opset 18 num_outputs parts of ceil(dim / parts), the last one smaller.
std::vector<int64_t> splitSizes(const NodeImporter &n, int64_t dim) {
  std::vector<int64_t> sizes = n.opset >= 13 ? (n.hasInput(1) ? n.intsInput(1, "split")
                                                              : std::vector<int64_t>{})
                                             : n.attrInts("split", {});
  const ::onnx::AttributeProto *numOutputs = n.opset >= 18 ? n.attribute("num_outputs") : nullptr;
  if (numOutputs && n.hasInput(1))
    fail(ImportErrorKind::BadFile, "Split has both the 'split' input and num_outputs");
  if (numOutputs && numOutputs->i() != n.numOutputs())
    fail(ImportErrorKind::BadFile, "num_outputs is " + std::to_string(numOutputs->i()) +
                                       " but the node has " + std::to_string(n.numOutputs()) +
                                       " outputs");
  if (sizes.empty()) {
    int64_t parts = n.numOutputs(), chunk = (dim + parts - 1) / parts;
    if (dim % parts && !numOutputs)
      n.unsupported("an uneven split of " + std::to_string(dim) + " into " +
                    std::to_string(parts) + " without 'split' sizes or num_outputs");
    if (chunk * (parts - 1) >= dim)
      fail(ImportErrorKind::BadFile, std::to_string(dim) + " entries do not split into " +
                                         std::to_string(parts) + " parts of " +
                                         std::to_string(chunk) + " and a smaller last one");
    sizes.assign(size_t(parts), chunk);
    sizes.back() = dim - chunk * (parts - 1);
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      fail(ImportErrorKind::BadFile, "a negative split size");
    total += size;
  }
  if (total != dim || int64_t(sizes.size()) != n.numOutputs())
    fail(ImportErrorKind::BadFile, "the split sizes " + shapeString(sizes) + " do not cover " +
                                       std::to_string(dim) + " entries with " +
                                       std::to_string(n.numOutputs()) + " outputs");
  return sizes;
}

void split(NodeImporter &n) {
  Tensor x = n.input(0);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), x.rank(), "axis");
  std::vector<int64_t> sizes = splitSizes(n, x.dim(axis));
  std::vector<int64_t> start(size_t(x.rank()), 0), limit = x.shape();
  for (size_t i = 0; i < sizes.size(); ++i) {
    limit[size_t(axis)] = start[size_t(axis)] + sizes[i];
    n.setOutput(int(i), slice(x, start, limit));
    start[size_t(axis)] = limit[size_t(axis)];
  }
}

void sliceOp(NodeImporter &n) {
  Tensor x = n.input(0);
  std::vector<SliceAxis> axes = sliceAxes(n, x.shape());
  std::vector<int64_t> start(size_t(x.rank()), 0), limit = x.shape(),
                       stride(size_t(x.rank()), 1);
  std::vector<std::pair<int64_t, std::vector<int64_t>>> backwards; // axis, entries
  for (int64_t a = 0; a < x.rank(); ++a) {
    const SliceAxis &s = axes[size_t(a)];
    if (s.step < 0) {
      // Backwards: the picked entries, in order (Smelt's slice only steps forwards).
      if (s.count == 0)
        n.unsupported("an empty backwards slice");
      std::vector<int64_t> picks;
      for (int64_t k = 0; k < s.count; ++k)
        picks.push_back(s.start + k * s.step);
      backwards.push_back({a, picks});
      continue;
    }
    start[size_t(a)] = s.start;
    limit[size_t(a)] = s.count ? s.start + (s.count - 1) * s.step + 1 : s.start;
    stride[size_t(a)] = s.step;
  }
  Tensor y = slice(x, start, limit, stride);
  for (const auto &[axis, picks] : backwards)
    y = pickAlong(y, axis, picks);
  n.setOutput(0, y);
}

void expand(NodeImporter &n) {
  Tensor x = n.input(0);
  n.setOutput(0, broadcastTo(x, broadcastShapes(x.shape(), n.intsInput(1, "the shape"))));
}

void tile(NodeImporter &n) {
  Tensor x = n.input(0);
  std::vector<int64_t> repeats = n.intsInput(1, "repeats");
  if (int64_t(repeats.size()) != x.rank())
    fail(ImportErrorKind::BadFile, "repeats needs one entry per dimension");
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t r = repeats[size_t(d)];
    if (r < 1 || r > (int64_t(1) << 16))
      n.unsupported("a repeat count of " + std::to_string(r) + " (1 to 65536)");
    if (r != 1)
      x = concat(std::vector<Tensor>(size_t(r), x), d);
  }
  n.setOutput(0, x);
}

/// Pad's pads per dimension (low, high): the 'pads' input (an attribute before opset 11), over
/// the dimensions the 'axes' input names (opset 18) or all of them.
std::pair<std::vector<int64_t>, std::vector<int64_t>> padWidths(const NodeImporter &n,
                                                                 int64_t rank) {
  std::vector<int64_t> pads = n.opset >= 11 ? n.intsInput(1, "pads") : n.attrInts("pads", {});
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  std::iota(axes.begin(), axes.end(), 0);
  if (n.opset >= 18 && n.hasInput(3)) {
    axes = n.intsInput(3, "axes");
    for (int64_t &a : axes)
      a = normalizeAxis(n, a, rank, "axis");
  }
  if (pads.size() != 2 * axes.size())
    fail(ImportErrorKind::BadFile, "pads has " + std::to_string(pads.size()) +
                                       " entries; it needs two for each of " +
                                       std::to_string(axes.size()) + " axes");
  std::vector<int64_t> low(size_t(rank), 0), high(size_t(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    low[size_t(axes[i])] = pads[i];
    high[size_t(axes[i])] = pads[i + axes.size()];
  }
  return {low, high};
}

/// Negative pads remove entries: `x` cropped by them, and the pads left non-negative.
Tensor cropNegative(const NodeImporter &n, Tensor x, std::vector<int64_t> &low,
                    std::vector<int64_t> &high) {
  std::vector<int64_t> start(size_t(x.rank()), 0), limit = x.shape();
  for (size_t d = 0; d < low.size(); ++d) {
    start[d] = std::max<int64_t>(-low[d], 0);
    limit[d] += std::min<int64_t>(high[d], 0);
    if (start[d] > limit[d])
      fail(ImportErrorKind::BadFile, "negative pads remove more than dimension " +
                                         std::to_string(d) + "'s " + std::to_string(x.dim(int64_t(d))) +
                                         " entries");
    low[d] = std::max<int64_t>(low[d], 0);
    high[d] = std::max<int64_t>(high[d], 0);
  }
  return x.shape() == limit && std::all_of(start.begin(), start.end(), [](int64_t v) { return !v; })
             ? x
             : slice(x, start, limit);
}

void padOp(NodeImporter &n) {
  Tensor x = n.input(0);
  std::string mode = n.attrString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    n.unsupported("pad mode '" + mode + "'");
  double value = n.opset >= 11 ? (n.hasInput(2) ? n.constantInput(2, "the pad value").values.at(0)
                                                : 0.0)
                               : n.attrFloat("value", 0);
  auto [low, high] = padWidths(n, x.rank());
  x = cropNegative(n, x, low, high);
  if (mode == "constant") {
    n.setOutput(0, pad(x, low, high, value));
    return;
  }
  // edge repeats the border entry, reflect mirrors the entries next to it, wrap continues from
  // the other end: all picks along the axis.
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t dim = x.dim(d), before = low[size_t(d)], after = high[size_t(d)];
    if (!before && !after)
      continue;
    if (mode == "reflect" && (before >= dim || after >= dim))
      n.unsupported("reflect pads as large as the dimension");
    if (dim == 0)
      n.unsupported("edge or wrap padding of an empty dimension");
    std::vector<int64_t> picks;
    for (int64_t p = -before; p < dim + after; ++p) {
      if (mode == "wrap")
        picks.push_back(((p % dim) + dim) % dim);
      else if (p < 0)
        picks.push_back(mode == "edge" ? 0 : -p);
      else if (p >= dim)
        picks.push_back(mode == "edge" ? dim - 1 : 2 * (dim - 1) - p);
      else
        picks.push_back(p);
    }
    x = pickAlong(x, d, picks);
  }
  n.setOutput(0, x);
}

/// DepthToSpace and SpaceToDepth: a reshape to 6-D, a transpose, a reshape back.
void depthToSpace(NodeImporter &n) {
  Tensor x = n.input(0);
  int64_t b = n.attrInt("blocksize", 0);
  if (x.rank() != 4 || b < 1 || x.dim(1) % (b * b))
    fail(ImportErrorKind::BadFile, "DepthToSpace needs NCHW with C divisible by blocksize^2");
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), c = C / (b * b);
  bool crd = n.attrString("mode", "DCR") == "CRD";
  Tensor six = crd ? transpose(reshape(x, {N, c, b, b, H, W}), {0, 1, 4, 2, 5, 3})
                   : transpose(reshape(x, {N, b, b, c, H, W}), {0, 3, 4, 1, 5, 2});
  n.setOutput(0, reshape(six, {N, c, H * b, W * b}));
}
/// The inverse of DepthToSpace in either mode (CRD from opset 28).
void spaceToDepth(NodeImporter &n) {
  Tensor x = n.input(0);
  int64_t b = n.attrInt("blocksize", 0);
  if (x.rank() != 4 || b < 1 || x.dim(2) % b || x.dim(3) % b)
    fail(ImportErrorKind::BadFile, "SpaceToDepth needs NCHW with H and W divisible by blocksize");
  int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  std::string mode = n.attrString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    n.unsupported("mode '" + mode + "' (DCR or CRD)");
  Tensor six = transpose(reshape(x, {N, C, H / b, b, W / b, b}),
                         mode == "CRD" ? std::vector<int64_t>{0, 1, 3, 5, 2, 4}
                                       : std::vector<int64_t>{0, 3, 5, 1, 2, 4});
  n.setOutput(0, reshape(six, {N, C * b * b, H / b, W / b}));
}

/// Range's length depends on its operands' values: they must be known now.
void range(NodeImporter &n) {
  const TensorValue &start = n.constantInput(0, "start"), &limit = n.constantInput(1, "limit"),
                    &delta = n.constantInput(2, "delta");
  double s = start.values.at(0), l = limit.values.at(0), d = delta.values.at(0);
  if (d == 0)
    fail(ImportErrorKind::BadFile, "Range's delta is 0");
  TensorValue v;
  v.type = start.type;
  double length = std::ceil((l - s) / d);
  if (!(length <= double(kMaxKnownElements)))
    fail(ImportErrorKind::BadFile, "a Range of " + std::to_string(length) + " elements");
  int64_t count = std::max<int64_t>(int64_t(length), 0);
  for (int64_t i = 0; i < count; ++i)
    v.values.push_back(s + double(i) * d);
  v.shape = {count};
  n.setConstantOutput(0, v);
}

void shapeOp(NodeImporter &n) {
  std::vector<int64_t> shape = n.input(0).shape();
  int64_t rank = int64_t(shape.size());
  auto clampIndex = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t(0), rank); };
  int64_t start = clampIndex(n.attrInt("start", 0)), end = clampIndex(n.attrInt("end", rank));
  n.setConstantOutput(0, int64Vector(std::vector<int64_t>(shape.begin() + start,
                                                          shape.begin() + std::max(start, end))));
}

void size(NodeImporter &n) {
  TensorValue v = int64Vector({n.input(0).numElements()});
  v.shape = {};
  n.setConstantOutput(0, v);
}

void constantOp(NodeImporter &n) {
  if (const ::onnx::AttributeProto *a = n.attribute("value"))
    return n.setConstantOutput(0, tensorValue(a->t(), "the constant"));
  TensorValue v;
  if (const ::onnx::AttributeProto *a = n.attribute("value_float")) {
    v.values = {double(a->f())};
  } else if (const ::onnx::AttributeProto *a = n.attribute("value_floats")) {
    v.values.assign(a->floats().begin(), a->floats().end());
    v.shape = {int64_t(v.values.size())};
  } else if (const ::onnx::AttributeProto *a = n.attribute("value_int")) {
    v = int64Vector({a->i()});
    v.shape = {};
  } else if (const ::onnx::AttributeProto *a = n.attribute("value_ints")) {
    v = int64Vector(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
  } else {
    n.unsupported("a sparse or string constant");
  }
  n.setConstantOutput(0, v);
}

void constantOfShape(NodeImporter &n) {
  TensorValue v;
  v.values = {0.0};
  if (const ::onnx::AttributeProto *a = n.attribute("value"))
    v = tensorValue(a->t(), "the fill value");
  if (v.values.size() != 1)
    fail(ImportErrorKind::BadFile, "the fill value must have one element");
  v.shape = n.intsInput(0, "the shape");
  int64_t count = 1;
  for (int64_t d : v.shape) {
    if (d < 0 || (d > 0 && count > kMaxKnownElements / d))
      fail(ImportErrorKind::BadFile, "the shape " + shapeString(v.shape) +
                                         " is negative or too large for a constant");
    count *= d;
  }
  v.values.assign(size_t(count), v.values[0]);
  n.setConstantOutput(0, v);
}

} // namespace

std::vector<SliceAxis> sliceAxes(const NodeImporter &n, const std::vector<int64_t> &shape) {
  int64_t rank = int64_t(shape.size());
  bool fromInputs = n.opset >= 10;
  std::vector<int64_t> starts = fromInputs ? n.intsInput(1, "starts") : n.attrInts("starts", {});
  std::vector<int64_t> ends = fromInputs ? n.intsInput(2, "ends") : n.attrInts("ends", {});
  std::vector<int64_t> axes = fromInputs ? (n.hasInput(3) ? n.intsInput(3, "axes")
                                                          : std::vector<int64_t>{})
                                         : n.attrInts("axes", {});
  std::vector<int64_t> steps = fromInputs && n.hasInput(4) ? n.intsInput(4, "steps")
                                                           : std::vector<int64_t>{};
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty())
    steps.resize(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    fail(ImportErrorKind::BadFile, "starts, ends, axes and steps differ in length");
  std::vector<SliceAxis> result;
  for (int64_t d : shape)
    result.push_back({0, 1, d});
  std::vector<bool> seen(size_t(rank), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normalizeAxis(n, axes[i], rank, "axis"), dim = shape[size_t(a)];
    if (seen[size_t(a)])
      fail(ImportErrorKind::BadFile, "axis " + std::to_string(a) + " is sliced twice");
    seen[size_t(a)] = true;
    int64_t step = steps[i];
    if (step == 0)
      fail(ImportErrorKind::BadFile, "a slice step of 0");
    if (dim == 0) {
      result[size_t(a)] = {0, step, 0};
      continue;
    }
    // Negative starts and ends count from the end; then both are clamped, to [0, dim] going
    // forwards and to [0, dim - 1] (start) and [-1, dim - 1] (end) going backwards, so an end
    // of INT64_MIN walks back past entry 0. (INT64_MIN + dim cannot overflow.)
    int64_t low = step > 0 ? 0 : -1, high = step > 0 ? dim : dim - 1;
    int64_t start = std::clamp<int64_t>(starts[i] < 0 ? starts[i] + dim : starts[i],
                                        std::max<int64_t>(low, 0), high);
    int64_t end = std::clamp<int64_t>(ends[i] < 0 ? ends[i] + dim : ends[i], low, high);
    // ceil(distance / |step|) entries, none when the end lies behind the start.
    int64_t distance = step > 0 ? end - start : start - end, stride = step > 0 ? step : -step;
    int64_t count = distance > 0 ? (distance - 1) / stride + 1 : 0;
    result[size_t(a)] = {start, step, count};
  }
  return result;
}

void addShapeOps(ConverterTable &t) {
  t["Reshape"] = reshapeOp;
  t["Flatten"] = flatten;
  t["Squeeze"] = squeeze;
  t["Unsqueeze"] = unsqueeze;
  t["Transpose"] = transposeOp;
  t["Concat"] = concatOp;
  t["Split"] = split;
  t["Slice"] = sliceOp;
  t["Expand"] = expand;
  t["Tile"] = tile;
  t["Pad"] = padOp;
  t["DepthToSpace"] = depthToSpace;
  t["SpaceToDepth"] = spaceToDepth;
  t["Range"] = range;
  t["Shape"] = shapeOp;
  t["Size"] = size;
  t["Constant"] = constantOp;
  t["ConstantOfShape"] = constantOfShape;
}

} // namespace smelt::onnx
