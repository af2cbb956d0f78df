// Keras-like layers and numerically stable composites, built from the ops in Ops.h. Layers
// create their parameters in the tensor's graph ("<name>/kernel", "<name>/bias").
#pragma once

#include "frontend/Ops.h"

namespace smelt {

enum class Activation { None, Relu, Tanh, Logistic, Softmax };
/// "same" pads so the output is ceil(input / stride) (TensorFlow's rule), "valid" does not pad.
enum class Padding { Same, Valid };

Tensor activate(Tensor x, Activation activation, Loc loc = Loc::current());

/// y = activation(x W + b); x is [batch, features], W [features, units] (Glorot uniform by
/// default), b [units] zeros.
Tensor dense(Tensor x, int64_t units, const std::string &name,
             Activation activation = Activation::None,
             Initializer kernelInit = Initializer::glorotUniform(), Loc loc = Loc::current());
/// NHWC convolution with an HWIO kernel (He normal by default) and a bias.
Tensor conv2dLayer(Tensor x, int64_t filters, Pair kernel, const std::string &name,
                   Pair strides = {1, 1}, Padding padding = Padding::Same,
                   Activation activation = Activation::None,
                   Initializer kernelInit = Initializer::heNormal(), Loc loc = Loc::current());
Tensor maxPool(Tensor x, Pair window, Pair strides, Padding padding = Padding::Valid,
               Loc loc = Loc::current());
Tensor avgPool(Tensor x, Pair window, Pair strides, Padding padding = Padding::Valid,
               Loc loc = Loc::current());
/// Training: zeroes each element with probability `rate` (counter-based draws from `seed`,
/// and from `step` when given, so each training step draws a new mask) and scales the rest by
/// 1/(1-rate). Inference: x itself.
Tensor dropout(Tensor x, double rate, uint64_t seed, bool training,
               std::optional<Tensor> step = std::nullopt, Loc loc = Loc::current());
/// [batch, ...] -> [batch, product of the rest].
Tensor flatten(Tensor x, Loc loc = Loc::current());

/// exp(x - max) / sum(exp(x - max)) along `axis`.
Tensor softmax(Tensor x, int64_t axis = -1, Loc loc = Loc::current());
/// x - max - log(sum(exp(x - max))) along `axis`.
Tensor logSoftmax(Tensor x, int64_t axis = -1, Loc loc = Loc::current());
/// Mean over the batch of -log softmax(logits)[label]; logits [N, C], labels [N] i32 or i64.
Tensor sparseSoftmaxCrossEntropy(Tensor logits, Tensor labels, Loc loc = Loc::current());
/// Fraction of rows whose argmax equals the label, as an f32 scalar.
Tensor accuracy(Tensor logits, Tensor labels, Loc loc = Loc::current());

/// The (top, bottom, left, right) padding of a window for `padding` ("same": TensorFlow's).
Quad windowPadding(Padding padding, const std::vector<int64_t> &inputShape, Pair window,
                   Pair strides, Pair dilation = {1, 1});

} // namespace smelt
