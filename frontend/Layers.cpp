// Layers and composites as compositions of smelt ops; fusion (later) makes them fast.
#include "frontend/Layers.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <numeric>

namespace smelt {

namespace {
/// `x` with dimension `axis` reduced and then broadcast back, for "x - max(x)" patterns.
Tensor keepDims(Tensor reduced, Tensor like, int64_t axis, Loc loc) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < like.rank(); ++d)
    if (d != axis)
      dims.push_back(d);
  return broadcastInDim(reduced, like.shape(), dims, loc);
}

int64_t positiveAxis(Tensor x, int64_t axis, Loc loc) {
  if (axis < -x.rank() || axis >= x.rank())
    x.graph().fail(loc, "axis " + std::to_string(axis) + " is out of range for rank " +
                            std::to_string(x.rank()));
  return axis < 0 ? axis + x.rank() : axis;
}
} // namespace

Tensor activate(Tensor x, Activation activation, Loc loc) {
  switch (activation) {
  case Activation::None:
    return x;
  case Activation::Relu:
    return relu(x, loc);
  case Activation::Tanh:
    return tanh(x, loc);
  case Activation::Logistic:
    return logistic(x, loc);
  case Activation::Softmax:
    return softmax(x, -1, loc);
  case Activation::Gelu:
    return gelu(x, false, loc);
  case Activation::GeluTanh:
    return gelu(x, true, loc);
  }
  return x;
}

Tensor dense(Tensor x, int64_t units, const std::string &name, Activation activation,
             Initializer kernelInit, Loc loc) {
  Graph &g = x.graph();
  if (x.rank() < 2)
    g.fail(loc, "dense layer '" + name + "' needs an input of rank 2 or more ([..., features]), "
                "got rank " + std::to_string(x.rank()));
  if (units <= 0)
    g.fail(loc, "dense layer '" + name + "' needs units >= 1, got " + std::to_string(units));
  return g.atomically([&] {
    int64_t features = x.dim(x.rank() - 1);
    Tensor w = g.parameter(name + "/kernel", {features, units}, kernelInit, x.dtype(), loc);
    Tensor b = g.parameter(name + "/bias", {units}, Initializer::zeros(), x.dtype(), loc);
    // As Keras: on the last axis. Leading axes fold into the rows of one matmul and unfold
    // after, so [B, T, D] costs one GEMM.
    std::vector<int64_t> outShape = x.shape();
    outShape.back() = units;
    Tensor rows = x.rank() == 2 ? x : reshape(x, {-1, features}, loc);
    Tensor y = add(matmul(rows, w, false, false, loc), b, loc);
    return activate(x.rank() == 2 ? y : reshape(y, outShape, loc), activation, loc);
  });
}

Quad windowPadding(Padding padding, const std::vector<int64_t> &inputShape, Pair window,
                   Pair strides, Pair dilation) {
  if (padding == Padding::Valid || inputShape.size() != 4)
    return {0, 0, 0, 0};
  Quad out{};
  for (int i = 0; i < 2; ++i) {
    int64_t in = inputShape[1 + i], extent = dilation[i] * (window[i] - 1) + 1;
    int64_t size = (in + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>((size - 1) * strides[i] + extent - in, 0);
    out[2 * i] = total / 2;
    out[2 * i + 1] = total - total / 2;
  }
  return out;
}

Quad windowPadding(const PaddingSpec &padding, const std::vector<int64_t> &inputShape,
                   Pair window, Pair strides, Pair dilation, Loc loc) {
  if (padding.explicitPadding)
    return *padding.explicitPadding;
  if (padding.mode)
    return windowPadding(*padding.mode, inputShape, window, strides, dilation);
  std::string name = padding.name;
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  if (name != "same" && name != "valid")
    throwBuildError(loc, "padding \"" + padding.name +
                             "\" is neither \"same\" nor \"valid\" (or give {top, bottom, "
                             "left, right})");
  return windowPadding(name == "same" ? Padding::Same : Padding::Valid, inputShape, window,
                       strides, dilation);
}

Tensor conv2dLayer(Tensor x, int64_t filters, Pair kernel, const std::string &name,
                   Pair strides, PaddingSpec padding, Activation activation,
                   Initializer kernelInit, Loc loc) {
  Graph &g = x.graph();
  if (x.rank() != 4)
    g.fail(loc, "conv2d layer '" + name + "' needs an NHWC input, got shape " +
                    shapeString(x.shape()));
  if (filters <= 0 || kernel[0] <= 0 || kernel[1] <= 0)
    g.fail(loc, "conv2d layer '" + name + "' needs filters >= 1 and a kernel of at least 1x1");
  Quad pads = windowPadding(padding, x.shape(), kernel, strides, {1, 1}, loc);
  // The convolution can still fail (a kernel larger than the padded input, a zero stride)
  // after the parameters exist: all or nothing.
  return g.atomically([&] {
    Tensor w = g.parameter(name + "/kernel", {kernel[0], kernel[1], x.dim(3), filters},
                           kernelInit, x.dtype(), loc);
    Tensor b = g.parameter(name + "/bias", {filters}, Initializer::zeros(), x.dtype(), loc);
    Tensor y = conv2d(x, w, strides, pads, {1, 1}, 1, loc);
    return activate(add(y, b, loc), activation, loc);
  });
}

Tensor maxPool(Tensor x, Pair window, Pair strides, PaddingSpec padding, Loc loc) {
  Quad pads = windowPadding(padding, x.shape(), window, strides, {1, 1}, loc);
  return maxPool2d(x, window, strides, pads, loc);
}

Tensor avgPool(Tensor x, Pair window, Pair strides, PaddingSpec padding, Loc loc) {
  Quad pads = windowPadding(padding, x.shape(), window, strides, {1, 1}, loc);
  return avgPool2d(x, window, strides, pads, loc);
}

Tensor dropout(Tensor x, double rate, uint64_t seed, bool training, std::optional<Tensor> step,
               Loc loc) {
  if (rate < 0 || rate >= 1)
    x.graph().fail(loc, "dropout rate " + std::to_string(rate) + " must be in [0, 1)");
  if (!training || rate == 0)
    return x;
  return x.graph().atomically([&] {
    Tensor u = rngUniform(x.graph(), x.shape(), seed, 0.0, 1.0, x.dtype(), step, loc);
    Tensor keep = compare(u, scalarLike(u, rate, loc), CompareDirection::ge, loc);
    Tensor scaled = mul(x, scalarLike(x, 1.0 / (1.0 - rate), loc), loc);
    return select(keep, scaled, scalarLike(x, 0.0, loc), loc);
  });
}

Tensor flatten(Tensor x, Loc loc) {
  if (x.rank() < 1)
    x.graph().fail(loc, "flatten needs a batch dimension");
  return reshape(x, {x.dim(0), -1}, loc);
}

Tensor embedding(Tensor ids, int64_t vocab, int64_t width, const std::string &name,
                 Initializer init, DType dtype, Loc loc) {
  Graph &g = ids.graph();
  if (ids.dtype() != DType::i32 && ids.dtype() != DType::i64)
    g.fail(loc, "embedding layer '" + name + "' needs i32 or i64 ids, got " +
                    dtypeName(ids.dtype()));
  if (vocab <= 0 || width <= 0)
    g.fail(loc, "embedding layer '" + name + "' needs vocab >= 1 and width >= 1, got vocab " +
                    std::to_string(vocab) + " and width " + std::to_string(width));
  return g.atomically([&] {
    Tensor table = g.parameter(name + "/embeddings", {vocab, width}, init, dtype, loc);
    return gather(table, ids, loc);
  });
}

//===----------------------------------------------------------------------===//
// Graph-first spellings
//===----------------------------------------------------------------------===//

/// The graph-first overloads take `g` for readability only; a tensor of another graph would
/// put the layer's parameters in the wrong function.
static Tensor inGraph(Graph &g, Tensor x, Loc loc) {
  if (&x.graph() != &g)
    g.fail(loc, "the input tensor belongs to graph @" + x.graph().name() + ", not @" + g.name());
  return x;
}

Tensor dense(Graph &g, Tensor x, int64_t units, const std::string &name, Activation activation,
             Initializer kernelInit, Loc loc) {
  return dense(inGraph(g, x, loc), units, name, activation, kernelInit, loc);
}

Tensor conv2d(Graph &g, Tensor x, int64_t filters, Pair kernel, const std::string &name,
              Pair strides, PaddingSpec padding, Activation activation, Initializer kernelInit,
              Loc loc) {
  return conv2dLayer(inGraph(g, x, loc), filters, kernel, name, strides, std::move(padding),
                     activation, kernelInit, loc);
}

Tensor maxPool(Graph &g, Tensor x, Pair window, Pair strides, PaddingSpec padding, Loc loc) {
  return maxPool(inGraph(g, x, loc), window, strides, std::move(padding), loc);
}

Tensor avgPool(Graph &g, Tensor x, Pair window, Pair strides, PaddingSpec padding, Loc loc) {
  return avgPool(inGraph(g, x, loc), window, strides, std::move(padding), loc);
}

Tensor dropout(Graph &g, Tensor x, double rate, uint64_t seed, bool training,
               std::optional<Tensor> step, Loc loc) {
  return dropout(inGraph(g, x, loc), rate, seed, training, step, loc);
}

Tensor embedding(Graph &g, Tensor ids, int64_t vocab, int64_t width, const std::string &name,
                 Initializer init, DType dtype, Loc loc) {
  return embedding(inGraph(g, ids, loc), vocab, width, name, init, dtype, loc);
}

Tensor flatten(Graph &g, Tensor x, Loc loc) { return flatten(inGraph(g, x, loc), loc); }

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

Tensor softmax(Tensor x, int64_t axis, Loc loc) {
  axis = positiveAxis(x, axis, loc);
  return x.graph().atomically([&] {
    Tensor shifted = sub(x, keepDims(reduceMax(x, {axis}, loc), x, axis, loc), loc);
    Tensor e = exp(shifted, loc);
    return div(e, keepDims(reduceSum(e, {axis}, loc), x, axis, loc), loc);
  });
}

Tensor logSoftmax(Tensor x, int64_t axis, Loc loc) {
  axis = positiveAxis(x, axis, loc);
  return x.graph().atomically([&] {
    Tensor shifted = sub(x, keepDims(reduceMax(x, {axis}, loc), x, axis, loc), loc);
    Tensor logSum = log(reduceSum(exp(shifted, loc), {axis}, loc), loc);
    return sub(shifted, keepDims(logSum, x, axis, loc), loc);
  });
}

Tensor gelu(Tensor x, bool approximate, Loc loc) {
  return x.graph().atomically([&] {
    Tensor inner = approximate
                       ? tanh(mul(add(x, mul(pow(x, 3.0, loc), scalarLike(x, 0.044715, loc), loc),
                                      loc),
                                  scalarLike(x, std::sqrt(2 / M_PI), loc), loc),
                              loc)
                       : erf(mul(x, scalarLike(x, M_SQRT1_2, loc), loc), loc);
    Tensor half = mul(x, scalarLike(x, 0.5, loc), loc);
    return mul(half, add(inner, scalarLike(x, 1.0, loc), loc), loc);
  });
}

Tensor layerNorm(Tensor x, Tensor gain, Tensor bias, double epsilon, Loc loc) {
  Graph &g = x.graph();
  if (x.rank() < 1 || gain.shape() != std::vector<int64_t>{x.dim(-1)} ||
      bias.shape() != gain.shape())
    g.fail(loc, "layerNorm: gain and bias must be [features] for x " + shapeString(x.shape()) +
                    ": got " + shapeString(gain.shape()) + " and " + shapeString(bias.shape()));
  return g.atomically([&] {
    Tensor centered = sub(x, mean(x, {-1}, KeepDims::yes, loc), loc);
    Tensor var = mean(mul(centered, centered, loc), {-1}, KeepDims::yes, loc);
    Tensor scale = rsqrt(add(var, scalarLike(var, epsilon, loc), loc), loc);
    Tensor normalized = mul(centered, scale, loc);
    return add(mul(normalized, gain, loc), bias, loc);
  });
}

Tensor layerNorm(Tensor x, const std::string &name, double epsilon, Loc loc) {
  Graph &g = x.graph();
  if (x.rank() < 1)
    g.fail(loc, "layer norm '" + name + "' needs an input of rank 1 or more");
  return g.atomically([&] {
    int64_t features = x.dim(-1);
    Tensor gain =
        g.parameter(name + "/gain", {features}, Initializer::constant(1.0), x.dtype(), loc);
    Tensor bias = g.parameter(name + "/bias", {features}, Initializer::zeros(), x.dtype(), loc);
    return layerNorm(x, gain, bias, epsilon, loc);
  });
}

Tensor positionalEncoding(Graph &g, int64_t length, int64_t width, DType dtype, Loc loc) {
  if (length < 1 || width < 2 || width % 2)
    g.fail(loc, "positionalEncoding: length >= 1 and an even width >= 2, got " +
                    std::to_string(length) + " x " + std::to_string(width));
  return g.atomically([&] {
    // Angles in f32 at least: bf16 cannot hold a position times a frequency.
    DType compute = dtype == DType::f64 ? DType::f64 : DType::f32;
    Tensor position = iota(g, {length, width}, 0, compute, loc);
    Tensor column = iota(g, {length, width}, 1, DType::i64, loc);
    // Column i uses the frequency of its pair, 10000^(-(i - i % 2) / width), and is odd where
    // it is not its pair's first column.
    Tensor two = scalarLike(column, 2, loc);
    Tensor pairStart = mul(div(column, two, loc), two, loc);
    Tensor odd = compare(column, pairStart, CompareDirection::ne, loc);
    Tensor exponent = convert(pairStart, compute, loc);
    Tensor frequency =
        exp(mul(exponent, scalarLike(exponent, -std::log(10000.0) / double(width), loc), loc),
            loc);
    Tensor angle = mul(position, frequency, loc);
    Tensor encoding = select(odd, cos(angle, loc), sin(angle, loc), loc);
    return compute == dtype ? encoding : convert(encoding, dtype, loc);
  });
}

/// Fails unless `labels` are i32 or i64 class indices; `what` prefixes the message.
static void checkClassIndices(Tensor labels, const std::string &what, Loc loc) {
  if (labels.dtype() != DType::i32 && labels.dtype() != DType::i64)
    labels.graph().fail(loc, what + "labels must be i32 or i64 class indices, got " +
                                 dtypeName(labels.dtype()));
}

/// Checks that `logits` is [..., C] and `labels` [...] (the same leading shape) integer class
/// indices.
static void checkLabels(Tensor logits, Tensor labels, Loc loc) {
  Graph &g = logits.graph();
  std::vector<int64_t> leading = logits.shape();
  if (!leading.empty())
    leading.pop_back();
  if (logits.rank() < 1 || labels.shape() != leading)
    g.fail(loc, "logits must be [..., C] and labels the same [...] without C: got logits " +
                    shapeString(logits.shape()) + " and labels " + shapeString(labels.shape()));
  checkClassIndices(labels, "", loc);
}

Tensor oneHot(Tensor labels, int64_t classes, DType dtype, Loc loc) {
  Graph &g = labels.graph();
  checkClassIndices(labels, "oneHot: ", loc);
  if (classes < 1)
    g.fail(loc, "oneHot: classes must be >= 1, got " + std::to_string(classes));
  std::vector<int64_t> shape = labels.shape(), dims(size_t(labels.rank()));
  std::iota(dims.begin(), dims.end(), 0);
  shape.push_back(classes);
  Tensor index = iota(g, shape, labels.rank(), labels.dtype(), loc);
  Tensor hit = compare(index, broadcastInDim(labels, shape, dims, loc), CompareDirection::eq, loc);
  return convert(hit, dtype, loc);
}

/// Mean over every leading position of what `perExample` gives for it.
static Tensor meanOverLeading(Tensor perExample, Loc loc) {
  std::vector<int64_t> all(size_t(perExample.rank()));
  std::iota(all.begin(), all.end(), 0);
  return mean(perExample, all, loc);
}

Tensor sparseSoftmaxCrossEntropy(Tensor logits, Tensor labels, Loc loc) {
  checkLabels(logits, labels, loc);
  return logits.graph().atomically([&] {
    int64_t classAxis = logits.rank() - 1, classes = logits.dim(classAxis);
    Tensor mask = oneHot(labels, classes, logits.dtype(), loc);
    Tensor logProbs = logSoftmax(logits, -1, loc);
    Tensor picked = reduceSum(mul(logProbs, mask, loc), {classAxis}, loc);
    // A label outside [0, C) picks no class: its loss is NaN (as TensorFlow's on a GPU), so
    // the mean is NaN and a bad label cannot train silently as a loss of 0.
    Tensor inRange = compare(reduceSum(mask, {classAxis}, loc), scalarLike(picked, 0.5, loc),
                             CompareDirection::gt, loc);
    Tensor loss = select(inRange, neg(picked, loc),
                         scalarLike(picked, std::numeric_limits<double>::quiet_NaN(), loc), loc);
    return meanOverLeading(loss, loc);
  });
}

Tensor accuracy(Tensor logits, Tensor labels, Loc loc) {
  checkLabels(logits, labels, loc);
  return logits.graph().atomically([&] {
    Tensor predicted = convert(argmax(logits, -1, loc), labels.dtype(), loc);
    Tensor hit =
        convert(compare(predicted, labels, CompareDirection::eq, loc), DType::f32, loc);
    return meanOverLeading(hit, loc);
  });
}

Tensor topKAccuracy(Tensor logits, Tensor labels, int64_t k, Loc loc) {
  checkLabels(logits, labels, loc);
  if (k < 1)
    logits.graph().fail(loc, "topKAccuracy: k must be >= 1, got " + std::to_string(k));
  return logits.graph().atomically([&] {
    int64_t classAxis = logits.rank() - 1, classes = logits.dim(classAxis);
    Tensor mask = oneHot(labels, classes, logits.dtype(), loc);
    Tensor labelLogit = reduceSum(mul(logits, mask, loc), {classAxis}, KeepDims::yes, loc);
    Tensor greater = convert(compare(logits, broadcastTo(labelLogit, logits.shape(), loc),
                                     CompareDirection::gt, loc),
                             DType::f32, loc);
    Tensor ahead = reduceSum(greater, {classAxis}, loc);
    Tensor found = reduceSum(mask, {classAxis}, loc);
    Tensor inRange = compare(found, scalarLike(found, 0.5, loc), CompareDirection::gt, loc);
    Tensor within = compare(ahead, scalarLike(ahead, double(k) - 0.5, loc),
                            CompareDirection::lt, loc);
    Tensor hit = select(inRange, convert(within, DType::f32, loc), scalarLike(ahead, 0.0, loc),
                        loc);
    return meanOverLeading(hit, loc);
  });
}

} // namespace smelt
