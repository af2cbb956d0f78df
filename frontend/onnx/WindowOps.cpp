// Converters of ONNX's windowed ops: Conv, ConvTranspose, MaxPool, AveragePool (1-D and 2-D;
// 1-D as 2-D with a height of 1) and the global pools. ONNX is NCHW, Smelt's conv2d and pools NHWC: the input
// is transposed in and the result back out with foldingTranspose, so between two consecutive
// windowed ops the pair cancels and no transpose is left.
#include "frontend/onnx/NodeImporter.h"

#include <numeric>

namespace smelt::onnx {
namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};

/// A window in 2-D, as Smelt's ops take it.
struct Window {
  Pair kernel, strides, dilation;
  Quad padding; // top, bottom, left, right
};

/// The node's window over the spatial dims `input` (1 or 2 of them) for a kernel of `kernel`,
/// lifted to 2-D; `ceilMode` pads the end so the last partial window counts.
Window windowOf(const NodeImporter &n, const std::vector<int64_t> &input,
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
      pads[i + rank] += std::max<int64_t>(0, (out - 1) * strides[i] + extent -
                                                 (input[i] + pads[i] + pads[i + rank]));
    }
  }
  // 1-D: a height of 1 in front.
  auto at = [&](const std::vector<int64_t> &v, size_t i, int64_t lifted) {
    return rank == 1 ? (i == 0 ? lifted : v[0]) : v[i];
  };
  return {{at(kernel, 0, 1), at(kernel, 1, 1)},
          {at(strides, 0, 1), at(strides, 1, 1)},
          {at(dilation, 0, 1), at(dilation, 1, 1)},
          {rank == 1 ? 0 : pads[0], rank == 1 ? 0 : pads[2], rank == 1 ? pads[0] : pads[1],
           rank == 1 ? pads[1] : pads[3]}};
}

/// The spatial dims of NC... tensor `x`, which must have one or two.
std::vector<int64_t> spatialDims(const NodeImporter &n, Tensor x) {
  if (x.rank() != 3 && x.rank() != 4)
    n.unsupported("a " + std::to_string(x.rank() - 2) +
                  "-D window (Smelt's convolutions and pools are 1-D or 2-D)");
  std::vector<int64_t> s = x.shape();
  return {s.begin() + 2, s.end()};
}

/// x [N, C, W] as [N, C, 1, W]; x itself when 2-D.
Tensor lift(Tensor x) {
  return x.rank() == 3 ? reshape(x, {x.dim(0), x.dim(1), 1, x.dim(2)}) : x;
}
/// The NHWC result of a window op back to NCHW (or NCW for a 1-D input).
Tensor lower(Tensor y, bool oneD) {
  Tensor nchw = foldingTranspose(y, kToNchw);
  return oneD ? reshape(nchw, {nchw.dim(0), nchw.dim(1), nchw.dim(3)}) : nchw;
}

void conv(NodeImporter &n) {
  Tensor x = n.input(0), w = n.input(1);
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
  Window win = windowOf(n, spatial, kernel, false);
  Tensor filter = transpose(lift(w), {2, 3, 1, 0}); // [F, C, KH, KW] -> HWIO
  Tensor input = foldingTranspose(lift(x), kToNhwc);
  Tensor y = conv2d(input, filter, win.strides, win.padding, win.dilation, groups);
  if (std::optional<Tensor> bias = n.optionalInput(2))
    y = add(y, *bias); // [F] along NHWC's last dimension: conv2d's epilogue
  n.setOutput(0, lower(y, spatial.size() == 1));
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
                                       std::to_string(x.dim(1)) + " input channels, or the "
                                       "filter's first dimension " + std::to_string(w.dim(0)) +
                                       " is not their count");
  std::vector<int64_t> kernel(filterShape.begin() + 2, filterShape.end()), ones(rank, 1);
  std::vector<int64_t> strides = n.attrInts("strides", ones), dilation = n.attrInts("dilations", ones);
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
    int64_t full = strides[i] * (spatial[i] - 1) + outputPadding[i] + (kernel[i] - 1) * dilation[i] + 1;
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
  bool oneD = rank == 1;
  Pair strides2 = {oneD ? 1 : strides[0], strides.back()};
  Pair dilation2 = {oneD ? 1 : dilation[0], dilation.back()};
  Quad padding = {oneD ? 0 : pads[0], oneD ? 0 : pads[2], oneD ? pads[0] : pads[1],
                  oneD ? pads[1] : pads[3]};
  std::vector<int64_t> resultShape = {x.dim(0), oneD ? 1 : out[0], out.back(),
                                     filterShape[1] * groups};
  Tensor filter = transpose(lift(w), {2, 3, 1, 0}); // [C_in, C_out, KH, KW] -> [KH, KW, C_out, C_in]
  Tensor y = conv2dBackwardInput(foldingTranspose(lift(x), kToNhwc), filter, resultShape,
                                 strides2, padding, dilation2, groups);
  if (std::optional<Tensor> bias = n.optionalInput(2))
    y = add(y, *bias);
  n.setOutput(0, lower(y, oneD));
}

void pool(NodeImporter &n, bool isMax) {
  if (n.wantsOutput(1))
    n.unsupported("the Indices output");
  Tensor x = n.input(0);
  std::vector<int64_t> spatial = spatialDims(n, x);
  std::vector<int64_t> kernel = n.attrInts("kernel_shape", {});
  Window win = windowOf(n, spatial, kernel, n.attrInt("ceil_mode", 0) != 0);
  if (win.dilation != Pair{1, 1})
    n.unsupported("dilations other than 1 on a pool");
  Tensor nhwc = foldingTranspose(lift(x), kToNhwc);
  Tensor y;
  if (isMax) {
    y = maxPool2d(nhwc, win.kernel, win.strides, win.padding);
  } else {
    if (n.attrInt("count_include_pad", 0)) {
      // Zeros that count: pad explicitly by the declared pads; only ceil_mode's extra end
      // padding stays uncounted, as in ONNX's reference.
      std::vector<int64_t> pads = n.attrInts("pads", std::vector<int64_t>(2 * spatial.size(), 0));
      if (n.attrString("auto_pad", "NOTSET") != "NOTSET")
        pads = spatial.size() == 1
                   ? std::vector<int64_t>{win.padding[2], win.padding[3]}
                   : std::vector<int64_t>{win.padding[0], win.padding[2], win.padding[1],
                                          win.padding[3]};
      int64_t top = spatial.size() == 1 ? 0 : pads[0], left = pads[spatial.size() - 1];
      int64_t bottom = spatial.size() == 1 ? 0 : pads[2], right = pads.back();
      nhwc = pad(nhwc, {0, top, left, 0}, {0, bottom, right, 0});
      win.padding = {0, win.padding[1] - bottom, 0, win.padding[3] - right};
    }
    y = avgPool2d(nhwc, win.kernel, win.strides, win.padding);
  }
  n.setOutput(0, lower(y, spatial.size() == 1));
}
void maxPool(NodeImporter &n) { pool(n, true); }
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
