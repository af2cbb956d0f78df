// Converters of ONNX's network ops outside convolution and pooling: MatMul (NumPy batch
// broadcasting, 1-D operands), Gemm, Softmax/LogSoftmax (both opset conventions), the
// inference forms of BatchNormalization, InstanceNormalization and LayerNormalization, LRN,
// MeanVarianceNormalization, and Dropout (the identity at inference).
#include "frontend/onnx/NodeImporter.h"

#include "frontend/Layers.h"

#include <algorithm>
#include <numeric>

namespace smelt::onnx {
namespace {

Tensor floatOperand(const NodeImporter &n, int i) {
  Tensor x = n.input(i);
  DType d = x.dtype();
  if (!isFloatType(d))
    fail(ImportErrorKind::UnsupportedDtype, "input " + std::to_string(i) + " is " +
                                                dtypeName(d) + "; Smelt's " + n.node.op_type() +
                                                " takes float tensors");
  return x;
}

std::vector<int64_t> leading(const std::vector<int64_t> &shape, size_t drop) {
  return {shape.begin(), shape.end() - int64_t(drop)};
}

void matMulOp(NodeImporter &n) {
  Tensor a = floatOperand(n, 0), b = floatOperand(n, 1);
  // NumPy: a 1-D lhs is a row, a 1-D rhs a column, and that dimension leaves the result.
  bool rowVector = a.rank() == 1, columnVector = b.rank() == 1;
  if (rowVector)
    a = reshape(a, {1, a.dim(0)});
  if (columnVector)
    b = reshape(b, {b.dim(0), 1});
  std::vector<int64_t> batchA = leading(a.shape(), 2), batchB = leading(b.shape(), 2);
  if (batchA != batchB) {
    // Broadcast the batch dimensions of both to their common shape.
    std::vector<int64_t> batch = batchA.size() >= batchB.size() ? batchA : batchB;
    std::vector<int64_t> other = batchA.size() >= batchB.size() ? batchB : batchA;
    other.insert(other.begin(), batch.size() - other.size(), 1);
    for (size_t i = 0; i < batch.size(); ++i)
      if (batch[i] == 1)
        batch[i] = other[i];
    auto withBatch = [&](Tensor x) {
      std::vector<int64_t> shape = batch;
      shape.push_back(x.dim(-2));
      shape.push_back(x.dim(-1));
      return broadcastTo(x, shape);
    };
    a = withBatch(a);
    b = withBatch(b);
  }
  Tensor y = matmul(a, b);
  std::vector<int64_t> shape = leading(y.shape(), 2);
  if (!rowVector)
    shape.push_back(y.dim(-2));
  if (!columnVector)
    shape.push_back(y.dim(-1));
  n.setOutput(0, rowVector || columnVector ? reshape(y, shape) : y);
}

void gemm(NodeImporter &n) {
  Tensor a = floatOperand(n, 0), b = floatOperand(n, 1);
  Tensor y = matmul(a, b, n.attrInt("transA", 0) != 0, n.attrInt("transB", 0) != 0);
  if (double alpha = n.attrFloat("alpha", 1.0); alpha != 1.0)
    y = mul(y, scalarLike(y, alpha));
  if (std::optional<Tensor> c = n.optionalInput(2)) {
    double beta = n.attrFloat("beta", 1.0);
    y = add(y, beta == 1.0 ? *c : mul(*c, scalarLike(*c, beta)));
  }
  n.setOutput(0, y);
}

void softmaxLike(NodeImporter &n, bool logarithm) {
  Tensor x = floatOperand(n, 0);
  auto apply = [&](Tensor t, int64_t axis) { return logarithm ? logSoftmax(t, axis) : softmax(t, axis); };
  if (n.opset >= 13) {
    n.setOutput(0, apply(x, normalizeAxis(n, n.attrInt("axis", -1), x.rank(), "axis")));
    return;
  }
  // Before opset 13 the input is read as 2-D: [dims before axis, dims from axis on].
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 1), x.rank(), "axis");
  std::vector<int64_t> s = x.shape();
  int64_t outer = std::accumulate(s.begin(), s.begin() + axis, int64_t(1), std::multiplies<>());
  int64_t inner = std::accumulate(s.begin() + axis, s.end(), int64_t(1), std::multiplies<>());
  n.setOutput(0, reshape(apply(reshape(x, {outer, inner}), 1), s));
}
void softmaxOp(NodeImporter &n) { softmaxLike(n, false); }
void logSoftmaxOp(NodeImporter &n) { softmaxLike(n, true); }

/// A per-channel vector [C] shaped to broadcast along axis 1 of a rank-`rank` tensor.
Tensor perChannel(Tensor v, int64_t rank) {
  std::vector<int64_t> shape(size_t(std::max<int64_t>(rank - 1, 1)), 1);
  shape[0] = v.numElements();
  return reshape(v, shape);
}

/// Inference normalizes with the given statistics; training mode (opset 14 on) with the
/// batch's (mean and population variance over every axis but the channels) and also returns
/// the running statistics, momentum * given + (1 - momentum) * batch.
void batchNormalization(NodeImporter &n) {
  bool training = n.attrInt("training_mode", 0) != 0;
  if (!training && n.wantsOutput(1))
    n.unsupported("the saved statistics of opsets before 14's training form");
  Tensor x = floatOperand(n, 0);
  int64_t channels = x.dim(1);
  Tensor scale = perChannel(n.input(1), x.rank()), bias = perChannel(n.input(2), x.rank());
  Tensor mu = perChannel(n.input(3), x.rank()), var = perChannel(n.input(4), x.rank());
  if (training) {
    std::vector<int64_t> axes = {0};
    for (int64_t d = 2; d < x.rank(); ++d)
      axes.push_back(d);
    Tensor batchMean = mean(x, axes), centered = sub(x, reshape(batchMean, mu.shape()));
    Tensor batchVar = mean(mul(centered, centered), axes);
    double momentum = n.attrFloat("momentum", 0.9);
    auto running = [&](int input, Tensor batch) {
      return add(mul(n.input(input), scalarLike(batch, momentum)),
                 mul(batch, scalarLike(batch, 1 - momentum)));
    };
    n.setOutput(1, reshape(running(3, batchMean), {channels}));
    n.setOutput(2, reshape(running(4, batchVar), {channels}));
    mu = reshape(batchMean, mu.shape());
    var = reshape(batchVar, var.shape());
  }
  Tensor factor = div(scale, sqrt(add(var, scalarLike(var, n.attrFloat("epsilon", 1e-5)))));
  n.setOutput(0, add(mul(sub(x, mu), factor), bias));
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
  Tensor x = floatOperand(n, 0);
  std::vector<int64_t> axes(size_t(x.rank() - 2));
  std::iota(axes.begin(), axes.end(), 2);
  Tensor y = standardize(x, axes, n.attrFloat("epsilon", 1e-5)).first;
  n.setOutput(0, add(mul(y, perChannel(n.input(1), x.rank())), perChannel(n.input(2), x.rank())));
}

void layerNormalization(NodeImporter &n) {
  Tensor x = floatOperand(n, 0);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", -1), x.rank(), "axis");
  std::vector<int64_t> axes(size_t(x.rank() - axis));
  std::iota(axes.begin(), axes.end(), axis);
  // stash_type 1 (the default): statistics in f32 even for f16/bf16 inputs.
  DType work = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor mu;
  auto [y, inv] = standardize(convert(x, work), axes, n.attrFloat("epsilon", 1e-5), &mu);
  y = mul(convert(y, x.dtype()), n.input(1));
  if (std::optional<Tensor> b = n.optionalInput(2))
    y = add(y, *b);
  n.setOutput(0, y);
  n.setOutput(1, mu);
  n.setOutput(2, inv);
}

/// Local response normalization across channels: x / (bias + alpha/size * sum x^2)^beta, the
/// sum over a window of `size` channels (zero padded), as a sum of shifted slices.
void lrn(NodeImporter &n) {
  Tensor x = floatOperand(n, 0);
  int64_t size = n.attrInt("size", 0), channels = x.dim(1);
  if (size < 1 || x.rank() < 3)
    fail(ImportErrorKind::BadFile, "LRN needs size >= 1 and an [N, C, ...] input");
  std::vector<int64_t> low(size_t(x.rank()), 0), high(size_t(x.rank()), 0);
  low[1] = (size - 1) / 2;
  high[1] = size - 1 - low[1];
  Tensor padded = pad(mul(x, x), low, high);
  Tensor sum;
  for (int64_t k = 0; k < size; ++k) {
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
  Tensor x = floatOperand(n, 0);
  std::vector<int64_t> axes;
  for (int64_t a : n.attrInts("axes", {0, 2, 3}))
    axes.push_back(normalizeAxis(n, a, x.rank(), "axis"));
  std::sort(axes.begin(), axes.end());
  Tensor mu = mean(x, axes, KeepDims::yes);
  Tensor variance = sub(mean(mul(x, x), axes, KeepDims::yes), mul(mu, mu));
  n.setOutput(0, div(sub(x, mu), add(sqrt(variance), scalarLike(x, 1e-9))));
}

void dropout(NodeImporter &n) {
  if (n.opset >= 12 && n.hasInput(2) &&
      n.constantInput(2, "training_mode").values.at(0) != 0)
    n.unsupported("training_mode=true (random masks; Smelt imports inference)");
  Tensor x = n.input(0);
  n.setOutput(0, x);
  if (n.wantsOutput(1))
    n.setOutput(1, constant(n.g, 1.0, x.shape(), DType::i1));
}

} // namespace

void addNeuralOps(ConverterTable &t) {
  t["MatMul"] = matMulOp;
  t["Gemm"] = gemm;
  t["Softmax"] = softmaxOp;
  t["LogSoftmax"] = logSoftmaxOp;
  t["BatchNormalization"] = batchNormalization;
  t["InstanceNormalization"] = instanceNormalization;
  t["LayerNormalization"] = layerNormalization;
  t["Dropout"] = dropout;
  t["LRN"] = lrn;
  t["MeanVarianceNormalization"] = meanVarianceNormalization;
  addWindowOps(t);
  addEinsumOp(t);
}

} // namespace smelt::onnx
