// Keras-like layers and numerically stable composites, built from the ops in Ops.h. Layers
// create their parameters in the tensor's graph ("<name>/kernel", "<name>/bias").
#pragma once

#include "frontend/Ops.h"

namespace smelt {

/// GeluTanh is GELU's tanh approximation (GPT-2, jax.nn.gelu(approximate=True)); Gelu the exact
/// x * Phi(x) through erf.
enum class Activation { None, Relu, Tanh, Logistic, Softmax, Gelu, GeluTanh };
/// "same" pads so the output is ceil(input / stride) (TensorFlow's rule), "valid" does not pad.
enum class Padding { Same, Valid };

/// A window's padding as a layer takes it: Padding::Same / Padding::Valid, the strings "same"
/// / "valid" (Keras' spelling; another string is a BuildError at the layer's call), or an
/// explicit {top, bottom, left, right}.
struct PaddingSpec {
  PaddingSpec(Padding p) : mode(p) {}
  PaddingSpec(const char *name) : name(name ? name : "") {}
  PaddingSpec(const std::string &name) : name(name) {}
  PaddingSpec(Quad explicitPadding) : explicitPadding(explicitPadding) {}
  PaddingSpec(int64_t top, int64_t bottom, int64_t left, int64_t right)
      : explicitPadding(Quad{top, bottom, left, right}) {}

  std::optional<Padding> mode;
  std::string name;
  std::optional<Quad> explicitPadding;
};

Tensor activate(Tensor x, Activation activation, Loc loc = Loc::current());

/// y = activation(x W + b) on x's last axis (Keras' Dense): x is [..., features] of rank 2 or
/// more, y [..., units]; W "<name>/kernel" [features, units] (Glorot uniform by default), b
/// "<name>/bias" [units] zeros.
Tensor dense(Tensor x, int64_t units, const std::string &name,
             Activation activation = Activation::None,
             Initializer kernelInit = Initializer::glorotUniform(), Loc loc = Loc::current());
/// NHWC convolution with an HWIO kernel "<name>/kernel" [kh, kw, C, filters] (He normal by
/// default) and a bias "<name>/bias" [filters] (zeros).
Tensor conv2dLayer(Tensor x, int64_t filters, Pair kernel, const std::string &name,
                   Pair strides = {1, 1}, PaddingSpec padding = Padding::Same,
                   Activation activation = Activation::None,
                   Initializer kernelInit = Initializer::heNormal(), Loc loc = Loc::current());
Tensor maxPool(Tensor x, Pair window, Pair strides, PaddingSpec padding = Padding::Valid,
               Loc loc = Loc::current());
Tensor avgPool(Tensor x, Pair window, Pair strides, PaddingSpec padding = Padding::Valid,
               Loc loc = Loc::current());
/// Training: zeroes each element with probability `rate` (keeps it where a counter-based
/// uniform draw from `seed`, and from `step` when given, so each training step draws a new
/// mask, is >= rate) and scales the rest by 1/(1-rate). Inference: x itself.
Tensor dropout(Tensor x, double rate, uint64_t seed, bool training,
               std::optional<Tensor> step = std::nullopt, Loc loc = Loc::current());
/// [batch, ...] -> [batch, product of the rest].
Tensor flatten(Tensor x, Loc loc = Loc::current());
/// Token ids [B...] (i32 or i64) -> their rows [B..., width] of the parameter
/// "<name>/embeddings" [vocab, width] of `dtype` (Keras' Embedding and its default
/// initializer, uniform in [-0.05, 0.05)). An id outside [0, vocab) reads the nearest row
/// (gather clamps).
Tensor embedding(Tensor ids, int64_t vocab, int64_t width, const std::string &name,
                 Initializer init = Initializer::uniform(-0.05, 0.05), DType dtype = DType::f32,
                 Loc loc = Loc::current());

// The same layers in Keras-functional spelling, graph first: `dense(g, x, 10, "logits")`.
// `x` must belong to `g`.
Tensor dense(Graph &g, Tensor x, int64_t units, const std::string &name,
             Activation activation = Activation::None,
             Initializer kernelInit = Initializer::glorotUniform(), Loc loc = Loc::current());
Tensor conv2d(Graph &g, Tensor x, int64_t filters, Pair kernel, const std::string &name,
              Pair strides = {1, 1}, PaddingSpec padding = Padding::Same,
              Activation activation = Activation::None,
              Initializer kernelInit = Initializer::heNormal(), Loc loc = Loc::current());
Tensor maxPool(Graph &g, Tensor x, Pair window, Pair strides,
               PaddingSpec padding = Padding::Valid, Loc loc = Loc::current());
Tensor avgPool(Graph &g, Tensor x, Pair window, Pair strides,
               PaddingSpec padding = Padding::Valid, Loc loc = Loc::current());
Tensor dropout(Graph &g, Tensor x, double rate, uint64_t seed, bool training,
               std::optional<Tensor> step = std::nullopt, Loc loc = Loc::current());
Tensor flatten(Graph &g, Tensor x, Loc loc = Loc::current());
Tensor embedding(Graph &g, Tensor ids, int64_t vocab, int64_t width, const std::string &name,
                 Initializer init = Initializer::uniform(-0.05, 0.05), DType dtype = DType::f32,
                 Loc loc = Loc::current());

/// GELU: x * Phi(x) = x/2 (1 + erf(x / sqrt 2)); with `approximate`, the tanh form
/// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(Tensor x, bool approximate = false, Loc loc = Loc::current());
/// Layer normalization over the last axis without parameters of its own:
/// (x - mean) / sqrt(variance + epsilon) * gain + bias, gain and bias [features].
Tensor layerNorm(Tensor x, Tensor gain, Tensor bias, double epsilon = 1e-5,
                 Loc loc = Loc::current());
/// The layer: gain "<name>/gain" (ones) and bias "<name>/bias" (zeros), [features] each.
Tensor layerNorm(Tensor x, const std::string &name, double epsilon = 1e-5,
                 Loc loc = Loc::current());
/// The sinusoidal position encoding of "Attention Is All You Need", a [length, width] constant
/// computed in the graph from iota: even columns sin(p / 10000^(i/width)), odd columns cos.
Tensor positionalEncoding(Graph &g, int64_t length, int64_t width, DType dtype = DType::f32,
                          Loc loc = Loc::current());
/// exp(x - max) / sum(exp(x - max)) along `axis`.
Tensor softmax(Tensor x, int64_t axis = -1, Loc loc = Loc::current());
/// x - max - log(sum(exp(x - max))) along `axis`.
Tensor logSoftmax(Tensor x, int64_t axis = -1, Loc loc = Loc::current());
/// [..., C] of `dtype`: 1 where the last index equals the label in `labels` [...] (i32/i64),
/// else 0; a label outside [0, classes) gives a row of zeros (as jax.nn.one_hot, tf.one_hot).
Tensor oneHot(Tensor labels, int64_t classes, DType dtype = DType::f32,
              Loc loc = Loc::current());
/// Mean over every leading position of -log softmax(logits)[label]: logits [..., C], labels
/// [...] i32 or i64. A label outside [0, C) makes its term, and so the loss, NaN (TensorFlow
/// on a GPU does the same; on its CPU it raises): a bad label never trains silently.
Tensor sparseSoftmaxCrossEntropy(Tensor logits, Tensor labels, Loc loc = Loc::current());
/// Fraction of positions whose argmax over the last axis equals the label, as an f32 scalar.
Tensor accuracy(Tensor logits, Tensor labels, Loc loc = Loc::current());
/// Fraction of positions whose label is among the `k` largest logits (fewer than k logits are
/// strictly greater than the label's; ties count as a hit, as tf.math.in_top_k), as an f32
/// scalar. A label outside [0, C) is a miss.
Tensor topKAccuracy(Tensor logits, Tensor labels, int64_t k, Loc loc = Loc::current());

/// The (top, bottom, left, right) padding of a window for `padding` ("same": TensorFlow's,
/// the extra row or column going to the bottom or right).
Quad windowPadding(Padding padding, const std::vector<int64_t> &inputShape, Pair window,
                   Pair strides, Pair dilation = {1, 1});
/// The same for any PaddingSpec; an unknown name is a BuildError at `loc`.
Quad windowPadding(const PaddingSpec &padding, const std::vector<int64_t> &inputShape,
                   Pair window, Pair strides, Pair dilation = {1, 1}, Loc loc = Loc::current());

} // namespace smelt
