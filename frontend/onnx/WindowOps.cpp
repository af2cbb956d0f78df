// Converters of ONNX's windowed ops: Conv, ConvTranspose, MaxPool, AveragePool (1-D, 2-D and 3-D)
// and the global pools. ONNX is NCHW, Smelt's conv2d and pools NHWC: the
// input is transposed in and the result back out with foldingTranspose, so between two
// consecutive windowed ops the pair cancels and no transpose is left. 1-D runs as 2-D with a
// height of 1. 3-D runs as 2-D over H and W with the depth folded into the batch
// ([N, D, H, W, C] as [N*D, H, W, C]), and the depth window as one slice per kernel tap along D
// (depthTaps): a max pool takes the largest of its taps of a 2-D pool, an average pool sums
// them and divides by how many lie inside the input (a 3-D window's count is the product of its
// depth and planar counts). A convolution is one conv2d over the taps side by side along the
// channels (its filter reshaped to match): the work is the 3-D op's, and what it adds is one
// copy of the input per depth tap when the kernel's depth is above 1. A ConvTranspose is one
// transposed 2-D convolution with a column of output channels per depth tap, each spread along
// the depth to where it writes (convTranspose3d).
#include "frontend/onnx/NodeImporter.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace smelt::onnx {
namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};
const std::vector<int64_t> kToNdhwc = {0, 2, 3, 4, 1}, kToNcdhw = {0, 4, 1, 2, 3};

/// A window axis by axis over the spatial dims (1 to 3), with the padding at each end; `extra`
/// is the part of `high` that ceil_mode adds (padding no declared pad asked for).
struct Axes {
  std::vector<int64_t> kernel, strides, dilation, low, high, extra;
};

/// A window in 2-D, as Smelt's ops take it.
struct Window {
  Pair kernel, strides, dilation;
  Quad padding; // top, bottom, left, right
};

/// The node's window over the spatial dims `input` for a kernel of `kernel`; `ceilMode` pads
/// the end so the last partial window counts.
Axes axesOf(const NodeImporter &n, const std::vector<int64_t> &input,
            const std::vector<int64_t> &kernel, bool ceilMode) {
  size_t rank = input.size();
  std::vector<int64_t> ones(rank, 1);
  std::vector<int64_t> strides = n.attrInts("strides", ones);
  std::vector<int64_t> dilation = n.attrInts("dilations", ones);
  std::vector<int64_t> pads = n.attrInts("pads", std::vector<int64_t>(2 * rank, 0));
  if (strides.size() != rank || dilation.size() != rank || pads.size() != 2 * rank ||
      kernel.size() != rank)
    fail(ImportErrorKind::BadFile, "strides, dilations, pads or kernel_shape do not match the "
                                   "input's spatial rank");
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  Axes axes{kernel, strides, dilation, {}, {}, std::vector<int64_t>(rank, 0)};
  for (size_t i = 0; i < rank; ++i) {
    int64_t extent = (kernel[i] - 1) * dilation[i] + 1;
    if (strides[i] < 1 || dilation[i] < 1 || pads[i] < 0 || pads[i + rank] < 0)
      n.unsupported("strides, dilations and pads must be positive");
    if (autoPad == "VALID") {
      pads[i] = pads[i + rank] = 0;
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = (input[i] + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + extent - input[i]);
      int64_t small = total / 2;
      pads[i] = autoPad == "SAME_UPPER" ? small : total - small;
      pads[i + rank] = total - pads[i];
    } else if (autoPad != "NOTSET") {
      n.unsupported("auto_pad '" + autoPad + "'");
    }
    if (ceilMode) {
      int64_t span = input[i] + pads[i] + pads[i + rank] - extent;
      int64_t out = (span + strides[i] - 1) / strides[i] + 1;
      axes.extra[i] = std::max<int64_t>(0, (out - 1) * strides[i] + extent -
                                               (input[i] + pads[i] + pads[i + rank]));
    }
    axes.low.push_back(pads[i]);
    axes.high.push_back(pads[i + rank] + axes.extra[i]);
  }
  return axes;
}

/// The 2-D window of the last two axes (1-D: a height of 1 in front).
Window planar(const Axes &a) {
  size_t rank = a.kernel.size();
  // The value of `v` on the axis `fromEnd` places before the last, or `lifted` for 1-D's height.
  auto at = [&](const std::vector<int64_t> &v, size_t fromEnd, int64_t lifted) {
    return fromEnd < rank ? v[rank - 1 - fromEnd] : lifted;
  };
  return {{at(a.kernel, 1, 1), at(a.kernel, 0, 1)},
          {at(a.strides, 1, 1), at(a.strides, 0, 1)},
          {at(a.dilation, 1, 1), at(a.dilation, 0, 1)},
          {at(a.low, 1, 0), at(a.high, 1, 0), at(a.low, 0, 0), at(a.high, 0, 0)}};
}

/// The spatial dims of NC... tensor `x`, which must have one, two or three.
std::vector<int64_t> spatialDims(const NodeImporter &n, Tensor x) {
  if (x.rank() < 3 || x.rank() > 5)
    n.unsupported("a " + std::to_string(x.rank() - 2) +
                  "-D window (Smelt's convolutions and pools are 1-D, 2-D or 3-D)");
  std::vector<int64_t> s = x.shape();
  return {s.begin() + 2, s.end()};
}

/// x [N, C, W] as [N, C, 1, W]; x itself when 2-D.
Tensor lift(Tensor x) { return x.rank() == 3 ? reshape(x, {x.dim(0), x.dim(1), 1, x.dim(2)}) : x; }
/// The NHWC result of a window op back to NCHW (or NCW for a 1-D input).
Tensor lower(Tensor y, bool oneD) {
  Tensor nchw = foldingTranspose(y, kToNchw);
  return oneD ? reshape(nchw, {nchw.dim(0), nchw.dim(1), nchw.dim(3)}) : nchw;
}

/// [N, D, H, W, C] as [N*D, H, W, C], and back with `batch` N.
Tensor foldDepth(Tensor t) {
  return reshape(t, {t.dim(0) * t.dim(1), t.dim(2), t.dim(3), t.dim(4)});
}
Tensor unfoldDepth(Tensor t, int64_t batch) {
  return reshape(t, {batch, t.dim(0) / batch, t.dim(1), t.dim(2), t.dim(3)});
}

/// The depth window of `a` (its first axis) over y [N, D, ...], padded at both ends with
/// `fill`: per kernel tap k, the depths tap k reads for each output depth, each [N, OD, ...].
std::vector<Tensor> depthTaps(const NodeImporter &n, Tensor y, const Axes &a, double fill) {
  if (a.low[0] > 0 || a.high[0] > 0) {
    std::vector<int64_t> low(size_t(y.rank()), 0), high(size_t(y.rank()), 0);
    low[1] = a.low[0];
    high[1] = a.high[0];
    y = pad(y, low, high, fill);
  }
  int64_t depth = y.dim(1), stride = a.strides[0], dilation = a.dilation[0];
  int64_t extent = (a.kernel[0] - 1) * dilation + 1;
  if (a.kernel[0] < 1 || depth < extent)
    fail(ImportErrorKind::BadFile, "the window's depth " + std::to_string(extent) +
                                       " is more than the padded input's " + std::to_string(depth));
  int64_t out = (depth - extent) / stride + 1;
  std::vector<Tensor> taps;
  for (int64_t k = 0; k < a.kernel[0]; ++k) {
    int64_t first = k * dilation;
    if (first == 0 && out == depth) {
      taps.push_back(y); // every depth, in order: no copy
      continue;
    }
    std::vector<int64_t> start(size_t(y.rank()), 0), limit = y.shape(),
                                                     strides(size_t(y.rank()), 1);
    start[1] = first;
    limit[1] = first + (out - 1) * stride + 1;
    strides[1] = stride;
    taps.push_back(slice(y, start, limit, strides));
  }
  return taps;
}

/// A 3-D Conv as one 2-D convolution over H and W with the depth folded into the batch, whose
/// input channels are the depth taps side by side: in group j, tap k's channel c at k*C/g + c
/// (groups stay contiguous, and each tap's channels a contiguous run that its slice copies
/// whole), and the filter [F, C/g, KD, KH, KW] as HWIO [KH, KW, KD*C/g, F] in the same order.
/// The taps are slices of the input, their concatenation one kernel.
Tensor conv3d(const NodeImporter &n, Tensor x, Tensor w, const Axes &axes, int64_t groups,
              std::optional<Tensor> bias) {
  Window win = planar(axes);
  std::vector<Tensor> taps = depthTaps(n, foldingTranspose(x, kToNdhwc), axes, 0.0);
  int64_t perGroup = w.dim(1), depthTapCount = int64_t(taps.size());
  std::vector<Tensor> grouped;
  for (Tensor tap : taps) {
    std::vector<int64_t> shape = tap.shape();
    shape.back() = groups;
    shape.push_back(1);
    shape.push_back(perGroup);
    grouped.push_back(reshape(tap, shape));
  }
  Tensor stacked = grouped.size() == 1 ? grouped[0] : concat(grouped, 5);
  Tensor input = reshape(stacked, {stacked.dim(0) * stacked.dim(1), stacked.dim(2), stacked.dim(3),
                                   groups * depthTapCount * perGroup});
  Tensor filter = reshape(transpose(w, {3, 4, 2, 1, 0}),
                          {w.dim(3), w.dim(4), depthTapCount * perGroup, w.dim(0)});
  Tensor y = conv2d(input, filter, win.strides, win.padding, win.dilation, groups);
  if (bias)
    y = add(y, *bias); // conv2d's epilogue
  return foldingTranspose(unfoldDepth(y, x.dim(0)), kToNcdhw);
}

} // namespace

Tensor convolve(const NodeImporter &n, Tensor x, Tensor w, std::optional<Tensor> bias) {
  std::vector<int64_t> spatial = spatialDims(n, x);
  if (w.rank() != x.rank())
    fail(ImportErrorKind::BadFile, "the filter's rank differs from the input's");
  // Groups (depthwise when each has one channel): group k convolves input channels
  // [k*C/g, (k+1)*C/g) with filters [k*F/g, (k+1)*F/g), each [F/g, C/g, KH, KW]: conv2d's
  // feature_group_count, whose HWIO filter [KH, KW, C/g, F] is the ONNX filter transposed.
  int64_t groups = n.attrInt("group", 1);
  if (groups < 1 || x.dim(1) % groups != 0 || w.dim(0) % groups != 0 ||
      w.dim(1) * groups != x.dim(1))
    fail(ImportErrorKind::BadFile, "group=" + std::to_string(groups) + " does not divide " +
                                       std::to_string(x.dim(1)) + " input channels into " +
                                       std::to_string(w.dim(0)) + " filters of " +
                                       std::to_string(w.dim(1)) + " channels");
  std::vector<int64_t> filterShape = w.shape();
  std::vector<int64_t> kernel(filterShape.begin() + 2, filterShape.end());
  if (std::vector<int64_t> given = n.attrInts("kernel_shape", kernel); given != kernel)
    fail(ImportErrorKind::BadFile, "kernel_shape disagrees with the filter");
  Axes axes = axesOf(n, spatial, kernel, false);
  if (spatial.size() == 3)
    return conv3d(n, x, w, axes, groups, bias);
  Window win = planar(axes);
  Tensor filter = transpose(lift(w), {2, 3, 1, 0}); // [F, C, KH, KW] -> HWIO
  Tensor input = foldingTranspose(lift(x), kToNhwc);
  Tensor y = conv2d(input, filter, win.strides, win.padding, win.dilation, groups);
  if (bias)
    y = add(y, *bias); // [F] along NHWC's last dimension: conv2d's epilogue
  return lower(y, spatial.size() == 1);
}

namespace {

void conv(NodeImporter &n) {
  n.setOutput(0, convolve(n, n.input(0), n.input(1), n.optionalInput(2)));
}

/// The values of z [N, D, ...] spread along D at every `stride`-th place from `offset` on, zeros
/// between and around them, `length` places in all.
Tensor spreadDepth(Tensor z, int64_t stride, int64_t offset, int64_t length) {
  std::vector<int64_t> shape = z.shape(), low(shape.size(), 0), high(shape.size(), 0);
  if (stride > 1) {
    // [N, D, ...] -> [N, D, 1, ...] padded to [N, D, stride, ...] -> [N, D*stride, ...], cut
    // after the last value.
    std::vector<int64_t> split = shape;
    split.insert(split.begin() + 2, 1);
    std::vector<int64_t> splitLow(split.size(), 0), splitHigh(split.size(), 0);
    splitHigh[2] = stride - 1;
    Tensor spaced = pad(reshape(z, split), splitLow, splitHigh);
    std::vector<int64_t> merged = shape;
    merged[1] = shape[1] * stride;
    std::vector<int64_t> start(shape.size(), 0), limit = merged;
    limit[1] = (shape[1] - 1) * stride + 1;
    z = slice(reshape(spaced, merged), start, limit);
  }
  low[1] = offset;
  high[1] = length - offset - z.dim(1);
  return pad(z, low, high);
}

/// A 3-D ConvTranspose (per axis: `pads` at each end, `outputPadding`, `out` the result's
/// size) as one 2-D one over H and W with the depth folded into the batch, whose filter has a
/// column of output channels per depth tap ([C_in, C_out/g, KD, KH, KW] as [KH, KW,
/// KD*C_out/g, C_in], tap-major in each group), each tap's channels then spread along the
/// depth to where the tap writes (input depth i, tap k: i*stride + k*dilation), summed and cut
/// by the pads.
Tensor convTranspose3d(const NodeImporter &n, Tensor x, Tensor w, int64_t groups,
                       const std::vector<int64_t> &strides, const std::vector<int64_t> &dilation,
                       const std::vector<int64_t> &pads, const std::vector<int64_t> &outputPadding,
                       const std::vector<int64_t> &out) {
  int64_t batch = x.dim(0), depth = x.dim(2), taps = w.dim(2), perGroup = w.dim(1);
  Pair planarStrides = {strides[1], strides[2]}, planarDilation = {dilation[1], dilation[2]};
  Quad padding = {pads[1], pads[4], pads[2], pads[5]};
  Tensor filter =
      reshape(transpose(w, {3, 4, 2, 1, 0}), {w.dim(3), w.dim(4), taps * perGroup, w.dim(0)});
  Tensor planar = conv2dBackwardInput(foldDepth(foldingTranspose(x, kToNdhwc)), filter,
                                      {batch * depth, out[1], out[2], groups * taps * perGroup},
                                      planarStrides, padding, planarDilation, groups);
  // [N, D, OH, OW, g, KD, C_out/g]: tap k's channels, spread along the depth and summed.
  Tensor byTap = reshape(planar, {batch, depth, out[1], out[2], groups, taps, perGroup});
  int64_t full = strides[0] * (depth - 1) + outputPadding[0] + (taps - 1) * dilation[0] + 1;
  Tensor sum;
  for (int64_t k = 0; k < taps; ++k) {
    Tensor tap = slice(byTap, {0, 0, 0, 0, 0, k, 0},
                       {batch, depth, out[1], out[2], groups, k + 1, perGroup});
    Tensor placed = spreadDepth(reshape(tap, {batch, depth, out[1], out[2], groups * perGroup}),
                                strides[0], k * dilation[0], full);
    sum = k == 0 ? placed : add(sum, placed);
  }
  Tensor y = slice(sum, {0, pads[0], 0, 0, 0},
                   {batch, pads[0] + out[0], out[1], out[2], groups * perGroup});
  if (std::optional<Tensor> bias = n.optionalInput(2))
    y = add(y, *bias);
  return foldingTranspose(y, kToNcdhw);
}

/// ConvTranspose is the gradient of a convolution with respect to its input: conv2d's
/// backward-input op, whose forward convolution maps the result's C_out channels to X's C_in.
void convTranspose(NodeImporter &n) {
  Tensor x = n.input(0), w = n.input(1);
  std::vector<int64_t> spatial = spatialDims(n, x), filterShape = w.shape();
  size_t rank = spatial.size();
  if (w.rank() != x.rank())
    fail(ImportErrorKind::BadFile, "the filter's rank differs from the input's");
  // W is [C_in, C_out/g, KH, KW]: the forward convolution's grouped filter, mapping C_out
  // channels to C_in in g groups.
  int64_t groups = n.attrInt("group", 1);
  if (groups < 1 || x.dim(1) % groups != 0 || w.dim(0) != x.dim(1))
    fail(ImportErrorKind::BadFile, "group=" + std::to_string(groups) + " does not divide " +
                                       std::to_string(x.dim(1)) +
                                       " input channels, or the "
                                       "filter's first dimension " +
                                       std::to_string(w.dim(0)) + " is not their count");
  std::vector<int64_t> kernel(filterShape.begin() + 2, filterShape.end()), ones(rank, 1);
  std::vector<int64_t> strides = n.attrInts("strides", ones),
                       dilation = n.attrInts("dilations", ones);
  std::vector<int64_t> outputPadding = n.attrInts("output_padding", std::vector<int64_t>(rank, 0));
  std::vector<int64_t> pads = n.attrInts("pads", std::vector<int64_t>(2 * rank, 0));
  std::vector<int64_t> outputShape = n.attrInts("output_shape", {});
  if (outputShape.size() == rank + 2)
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  if (strides.size() != rank || dilation.size() != rank || outputPadding.size() != rank ||
      pads.size() != 2 * rank || (!outputShape.empty() && outputShape.size() != rank))
    fail(ImportErrorKind::BadFile, "strides, dilations, pads, output_padding or output_shape do "
                                   "not match the input's spatial rank");
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t full =
        strides[i] * (spatial[i] - 1) + outputPadding[i] + (kernel[i] - 1) * dilation[i] + 1;
    if (!outputShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      // ONNX's rule: the padding that gives the requested size, its smaller half first for
      // SAME_UPPER and its larger half first otherwise.
      out[i] = outputShape.empty() ? spatial[i] * strides[i] : outputShape[i];
      // A larger output than the convolution covers gets zeros at the end, as output_padding
      // does, which must stay below the stride.
      int64_t total = std::max<int64_t>(full - out[i], 0);
      outputPadding[i] += std::max<int64_t>(out[i] - full, 0);
      pads[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + rank] = total - pads[i];
    } else {
      if (autoPad == "VALID")
        pads[i] = pads[i + rank] = 0;
      out[i] = full - pads[i] - pads[i + rank];
    }
    if (strides[i] < 1 || dilation[i] < 1 || pads[i] < 0 || pads[i + rank] < 0 ||
        outputPadding[i] >= strides[i])
      n.unsupported("negative pads, or output_padding not below the stride");
  }
  if (rank == 3) {
    n.setOutput(0, convTranspose3d(n, x, w, groups, strides, dilation, pads, outputPadding, out));
    return;
  }
  bool oneD = rank == 1;
  Pair strides2 = {oneD ? 1 : strides[0], strides.back()};
  Pair dilation2 = {oneD ? 1 : dilation[0], dilation.back()};
  Quad padding = {oneD ? 0 : pads[0], oneD ? 0 : pads[2], oneD ? pads[0] : pads[1],
                  oneD ? pads[1] : pads[3]};
  std::vector<int64_t> resultShape = {x.dim(0), oneD ? 1 : out[0], out.back(),
                                      filterShape[1] * groups};
  Tensor filter =
      transpose(lift(w), {2, 3, 1, 0}); // [C_in, C_out, KH, KW] -> [KH, KW, C_out, C_in]
  Tensor y = conv2dBackwardInput(foldingTranspose(lift(x), kToNhwc), filter, resultShape, strides2,
                                 padding, dilation2, groups);
  if (std::optional<Tensor> bias = n.optionalInput(2))
    y = add(y, *bias);
  n.setOutput(0, lower(y, oneD));
}

void pool(NodeImporter &n, bool isMax) {
  Tensor x = n.input(0);
  std::vector<int64_t> spatial = spatialDims(n, x);
  size_t rank = spatial.size();
  std::vector<int64_t> kernel = n.attrInts("kernel_shape", {});
  Axes axes = axesOf(n, spatial, kernel, n.attrInt("ceil_mode", 0) != 0);
  if (llvm::any_of(axes.dilation, [](int64_t d) { return d != 1; }))
    n.unsupported("dilations other than 1 on a pool");
  std::vector<int64_t> toChannelsLast = rank == 3 ? kToNdhwc : kToNhwc;
  Tensor last = foldingTranspose(rank == 3 ? x : lift(x), toChannelsLast);
  if (!isMax && n.attrInt("count_include_pad", 0)) {
    // Zeros that count: pad explicitly by the declared pads; only ceil_mode's extra end
    // padding stays uncounted, as in ONNX's reference.
    std::vector<int64_t> low(size_t(last.rank()), 0), high(size_t(last.rank()), 0);
    for (size_t i = 0; i < rank; ++i) {
      size_t dim = size_t(last.rank()) - 1 - rank + i; // the channels are last
      low[dim] = axes.low[i];
      high[dim] = axes.high[i] - axes.extra[i];
      axes.low[i] = 0;
      axes.high[i] = axes.extra[i];
    }
    last = pad(last, low, high);
  }
  Window win = planar(axes);
  auto pool2d = [&](Tensor nhwc) {
    return isMax ? maxPool2d(nhwc, win.kernel, win.strides, win.padding)
                 : avgPool2d(nhwc, win.kernel, win.strides, win.padding);
  };
  // MaxPool's Indices: where in the input each maximum came from (UnpoolOps.cpp).
  auto setIndices = [&](Tensor y) {
    if (n.wantsOutput(1))
      n.setOutput(1, maxPoolIndices(x, y, axes.kernel, axes.strides, axes.low, axes.high,
                                    n.attrInt("storage_order", 0) != 0));
  };
  if (rank < 3) {
    Tensor y = lower(pool2d(last), rank == 1);
    n.setOutput(0, y);
    setIndices(y);
    return;
  }
  // Over H and W, then along the depth: the largest tap, or the taps' sum over how many of
  // them lie in the input (a window's count is its depth count times its planar one, which
  // avgPool2d divided by).
  int64_t depth = last.dim(1);
  std::vector<Tensor> taps = depthTaps(n, unfoldDepth(pool2d(foldDepth(last)), x.dim(0)), axes,
                                       isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  Tensor y = taps[0];
  for (size_t k = 1; k < taps.size(); ++k)
    y = isMax ? maximum(y, taps[k]) : add(y, taps[k]);
  if (!isMax) {
    std::vector<double> inverseCounts;
    for (int64_t o = 0; o < y.dim(1); ++o) {
      int64_t first = o * axes.strides[0] - axes.low[0], count = 0;
      for (int64_t k = 0; k < axes.kernel[0]; ++k)
        count += first + k >= 0 && first + k < depth;
      inverseCounts.push_back(1.0 / double(std::max<int64_t>(count, 1)));
    }
    Tensor scale = constant(n.g, inverseCounts, {y.dim(1)}, y.dtype());
    y = mul(y, broadcastInDim(scale, y.shape(), {1}));
  }
  y = foldingTranspose(y, kToNcdhw);
  n.setOutput(0, y);
  if (isMax)
    setIndices(y);
}
void maxPool(NodeImporter &n) {
  if (!n.narrowType(0))
    return pool(n, true);
  // 8- and 16-bit integers (a UINT8 image) pool exactly as f32: Smelt's pools take floats.
  n.substituteInput(0, convert(n.input(0), DType::f32));
  pool(n, true);
  n.clearSubstitutes();
  n.setOutput(0, convert(n.output(0), DType::i32));
}
void averagePool(NodeImporter &n) { pool(n, false); }

void globalPool(NodeImporter &n, bool isMax) {
  Tensor x = n.input(0);
  std::vector<int64_t> axes(size_t(std::max<int64_t>(x.rank() - 2, 0)));
  std::iota(axes.begin(), axes.end(), 2);
  n.setOutput(0, isMax ? reduceMax(x, axes, KeepDims::yes) : mean(x, axes, KeepDims::yes));
}
void globalMaxPool(NodeImporter &n) { globalPool(n, true); }
void globalAveragePool(NodeImporter &n) { globalPool(n, false); }

} // namespace

void addWindowOps(ConverterTable &t) {
  t["Conv"] = conv;
  t["ConvTranspose"] = convTranspose;
  t["MaxPool"] = maxPool;
  t["AveragePool"] = averagePool;
  t["GlobalMaxPool"] = globalMaxPool;
  t["GlobalAveragePool"] = globalAveragePool;
}

} // namespace smelt::onnx
