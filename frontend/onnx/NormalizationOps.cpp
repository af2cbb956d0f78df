// Converters of ONNX's normalizations: the inference and training forms of
// BatchNormalization, InstanceNormalization, LayerNormalization, GroupNormalization (opsets 18
// and 21), RMSNormalization (23), MeanVarianceNormalization and LRN. Statistics are computed in
// the stash type the op names (f32 for f16/bf16 inputs by default) and the result rounded back.
#include "frontend/onnx/NodeImporter.h"

#include "ir/SmeltDialect.h"

#include <algorithm>
#include <numeric>

namespace smelt::onnx {
namespace {

/// A per-channel vector [C] shaped to broadcast along axis 1 of a rank-`rank` tensor.
Tensor perChannel(Tensor v, int64_t rank) {
  std::vector<int64_t> shape(size_t(std::max<int64_t>(rank - 1, 1)), 1);
  shape[0] = v.numElements();
  return reshape(v, shape);
}

/// The type of a normalization's statistics: stash_type (an ONNX element type; 1, float, by
/// default). An f64 input keeps f64, more precise than the f32 ONNX asks for.
DType stashType(const NodeImporter &n, Tensor x) {
  int64_t code = n.attrInt("stash_type", 1);
  std::optional<DType> stash = smeltDType(int(code));
  if (!stash || !rt::isFloat(*stash))
    n.unsupported("stash_type " + std::to_string(code) + " (" + onnxTypeName(int(code)) +
                  "): the statistics need a float type Smelt has");
  return x.dtype() == DType::f64 ? DType::f64 : *stash;
}

/// The axes from `axis` to the last of a rank-`rank` tensor.
std::vector<int64_t> axesFrom(int64_t axis, int64_t rank) {
  std::vector<int64_t> axes(size_t(rank - axis));
  std::iota(axes.begin(), axes.end(), axis);
  return axes;
}

/// The axes LayerNormalization and RMSNormalization normalize over: from `axis` (-1) on.
std::vector<int64_t> normalizedAxes(const NodeImporter &n, Tensor x) {
  return axesFrom(normalizeAxis(n, n.attrInt("axis", -1), x.rank(), "axis"), x.rank());
}

/// The permutation from channels-last to channels-first: [0, rank - 1, 1, ..., rank - 2].
std::vector<int64_t> channelsFirst(int64_t rank) {
  std::vector<int64_t> permutation = {0, rank - 1};
  for (int64_t d = 1; d + 1 < rank; ++d)
    permutation.push_back(d);
  return permutation;
}

/// When `x` (NCHW) is the transpose of a channels-last tensor (a convolution's NHWC result):
/// that tensor. Normalizing it over its last axis, and transposing the result back with
/// foldingTranspose, lets the transposes around conv -> BatchNormalization -> Relu -> conv
/// cancel, in the forward pass and in the gradient, instead of the statistics and the
/// normalization reading a transposed copy of every activation.
std::optional<Tensor> channelsLastSource(Tensor x) {
  auto transpose = x.value().getDefiningOp<TransposeOp>();
  if (!transpose || x.rank() < 3 ||
      transpose.getPermutation() != llvm::ArrayRef<int64_t>(channelsFirst(x.rank())))
    return std::nullopt;
  return Tensor(&x.graph(), transpose.getX());
}

/// Inference normalizes with the given statistics; training mode (opset 14 on, or importInto's
/// training steps) with the batch's (mean and population variance over every axis but the
/// channels) and also returns the running statistics, momentum * given + (1 - momentum) *
/// batch. In importInto's training steps those become the next values of the statistics'
/// variables.
void batchNormalization(NodeImporter &n) {
  bool fileTraining = n.attrInt("training_mode", 0) != 0;
  if (!fileTraining && n.wantsOutput(1))
    n.unsupported("the saved statistics of opsets before 14's training form");
  Tensor input = floatInput(n, 0);
  std::optional<Tensor> channelsLast = channelsLastSource(input);
  // x with its channels on `channelAxis`; per-channel vectors shaped to broadcast there.
  Tensor x = channelsLast ? *channelsLast : input;
  int64_t channelAxis = channelsLast ? x.rank() - 1 : 1, channels = x.dim(channelAxis);
  auto along = [&](Tensor v) { return channelsLast ? v : perChannel(v, x.rank()); };
  Tensor scale = along(n.input(1)), bias = along(n.input(2));
  Tensor mu = along(n.input(3)), var = along(n.input(4));
  if (fileTraining || n.training()) {
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != channelAxis)
        axes.push_back(d);
    Tensor batchMean = mean(x, axes), centered = sub(x, reshape(batchMean, mu.shape()));
    Tensor batchVar = mean(mul(centered, centered), axes);
    double momentum = n.attrFloat("momentum", 0.9);
    Tensor runningMean = reshape(movingAverage(n.input(3), batchMean, momentum), {channels});
    Tensor runningVar = reshape(movingAverage(n.input(4), batchVar, momentum), {channels});
    if (n.wantsOutput(1))
      n.setOutput(1, runningMean);
    if (n.wantsOutput(2))
      n.setOutput(2, runningVar);
    if (n.training()) {
      if (!n.isVariable(3) || !n.isVariable(4))
        n.unsupported("training needs the running mean and variance to be initializers "
                      "(they become variables)");
      n.g.assign(n.input(3), runningMean);
      n.g.assign(n.input(4), runningVar);
    }
    mu = reshape(batchMean, mu.shape());
    var = reshape(batchVar, var.shape());
  }
  Tensor factor = div(scale, sqrt(add(var, scalarLike(var, n.attrFloat("epsilon", 1e-5)))));
  Tensor y = add(mul(sub(x, mu), factor), bias);
  n.setOutput(0, channelsLast ? foldingTranspose(y, channelsFirst(y.rank())) : y);
}

/// (x - mean) / sqrt(variance + epsilon) over `axes`, and 1 / sqrt(variance + epsilon).
std::pair<Tensor, Tensor> standardize(Tensor x, const std::vector<int64_t> &axes, double epsilon,
                                      Tensor *meanOut = nullptr) {
  Tensor mu = mean(x, axes, KeepDims::yes);
  Tensor centered = sub(x, mu);
  Tensor inv = rsqrt(add(mean(mul(centered, centered), axes, KeepDims::yes),
                         scalarLike(x, epsilon)));
  if (meanOut)
    *meanOut = mu;
  return {mul(centered, inv), inv};
}

void instanceNormalization(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  Tensor y = standardize(x, axesFrom(2, x.rank()), n.attrFloat("epsilon", 1e-5)).first;
  n.setOutput(0, add(mul(y, perChannel(n.input(1), x.rank())), perChannel(n.input(2), x.rank())));
}

void layerNormalization(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  std::vector<int64_t> axes = normalizedAxes(n, x);
  Tensor mu;
  auto [y, inv] = standardize(convert(x, stashType(n, x)), axes, n.attrFloat("epsilon", 1e-5), &mu);
  y = mul(convert(y, x.dtype()), n.input(1));
  if (std::optional<Tensor> b = n.optionalInput(2))
    y = add(y, *b);
  n.setOutput(0, y);
  n.setOutput(1, mu);
  n.setOutput(2, inv);
}

/// x / sqrt(mean(x^2) + epsilon) over the axes from `axis` on, in the stash type, times the
/// scale (opset 23: LLaMA's and T5's norm).
void rmsNormalization(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  std::vector<int64_t> axes = normalizedAxes(n, x);
  Tensor work = convert(x, stashType(n, x));
  Tensor inv = rsqrt(add(mean(mul(work, work), axes, KeepDims::yes),
                         scalarLike(work, n.attrFloat("epsilon", 1e-5))));
  n.setOutput(0, mul(convert(mul(work, inv), x.dtype()), n.input(1)));
}

/// x [N, C, ...] standardized over each of num_groups groups of C / num_groups channels (and
/// all the spatial positions), in the stash type (opset 21's stash_type; float before), then
/// scaled and shifted: per channel from opset 21, per group in opset 18's first version.
void groupNormalization(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  const ::onnx::AttributeProto *groupsAttribute = n.attribute("num_groups");
  if (!groupsAttribute)
    fail(ImportErrorKind::BadFile, "GroupNormalization has no 'num_groups' attribute");
  int64_t groups = groupsAttribute->i();
  if (x.rank() < 2 || groups < 1 || x.dim(1) % groups)
    fail(ImportErrorKind::BadFile, "num_groups=" + std::to_string(groups) +
                                       " does not divide the channels of an input of shape " +
                                       shapeString(x.shape()) + " ([N, C, ...])");
  int64_t channels = x.dim(1), perGroup = channels / groups;
  for (int64_t d = 2; d < x.rank(); ++d)
    perGroup *= x.dim(d);
  Tensor grouped = reshape(convert(x, stashType(n, x)), {x.dim(0), groups, perGroup});
  Tensor y = convert(reshape(standardize(grouped, {2}, n.attrFloat("epsilon", 1e-5)).first,
                             x.shape()),
                     x.dtype());
  bool perChannelAffine = n.opset >= 21;
  int64_t perScale = perChannelAffine ? channels : groups;
  auto affine = [&](int i) {
    Tensor v = n.input(i);
    if (v.numElements() != perScale)
      fail(ImportErrorKind::BadFile,
           std::string(i == 1 ? "scale" : "bias") + " has " + std::to_string(v.numElements()) +
               " elements; GroupNormalization-" +
               (perChannelAffine ? "21 takes one a channel (" : "18 takes one a group (") +
               std::to_string(perScale) + ")");
    if (perScale != channels) // one a group: each repeated for the group's channels
      v = reshape(broadcastTo(reshape(v, {groups, 1}), {groups, channels / groups}), {channels});
    return perChannel(v, x.rank());
  };
  n.setOutput(0, add(mul(y, affine(1)), affine(2)));
}

/// Local response normalization across channels: x / (bias + alpha/size * sum x^2)^beta, the
/// sum over a window of `size` channels (zero padded), as a sum of shifted slices. The window
/// reaches at most C - 1 channels to either side within the input, so the padding, and the
/// slices, stop there: a window wider than the channels (a `size` of 4 million, which the ONNX
/// fuzzer found building as many slices) is that many slices at most 2C - 1.
void lrn(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  int64_t size = n.attrInt("size", 0);
  if (size < 1 || x.rank() < 3)
    fail(ImportErrorKind::BadFile, "LRN needs size >= 1 and an [N, C, ...] input");
  int64_t channels = x.dim(1);
  std::vector<int64_t> low(size_t(x.rank()), 0), high(size_t(x.rank()), 0);
  low[1] = std::min((size - 1) / 2, std::max<int64_t>(channels - 1, 0));
  high[1] = std::min(size - 1 - (size - 1) / 2, std::max<int64_t>(channels - 1, 0));
  Tensor padded = pad(mul(x, x), low, high);
  Tensor sum;
  for (int64_t k = 0; k < low[1] + high[1] + 1; ++k) {
    std::vector<int64_t> start(size_t(x.rank()), 0), limit = padded.shape();
    start[1] = k;
    limit[1] = k + channels;
    Tensor part = slice(padded, start, limit);
    sum = k ? add(sum, part) : part;
  }
  double alpha = n.attrFloat("alpha", 1e-4), beta = n.attrFloat("beta", 0.75);
  Tensor base = add(mul(sum, scalarLike(x, alpha / double(size))),
                    scalarLike(x, n.attrFloat("bias", 1.0)));
  n.setOutput(0, div(x, pow(base, beta)));
}

/// (x - mean) / (sqrt(variance) + 1e-9) over `axes` (default N, H, W), as ONNX's function body.
void meanVarianceNormalization(NodeImporter &n) {
  Tensor x = floatInput(n, 0);
  std::vector<int64_t> axes;
  for (int64_t a : n.attrInts("axes", {0, 2, 3}))
    axes.push_back(normalizeAxis(n, a, x.rank(), "axis"));
  std::sort(axes.begin(), axes.end());
  Tensor mu = mean(x, axes, KeepDims::yes);
  Tensor variance = sub(mean(mul(x, x), axes, KeepDims::yes), mul(mu, mu));
  n.setOutput(0, div(sub(x, mu), add(sqrt(variance), scalarLike(x, 1e-9))));
}

} // namespace

void addNormalizationOps(ConverterTable &t) {
  t["BatchNormalization"] = batchNormalization;
  t["InstanceNormalization"] = instanceNormalization;
  t["LayerNormalization"] = layerNormalization;
  t["GroupNormalization"] = groupNormalization;
  t["RMSNormalization"] = rmsNormalization;
  t["LRN"] = lrn;
  t["MeanVarianceNormalization"] = meanVarianceNormalization;
}

} // namespace smelt::onnx
