// Batch normalization as Keras' BatchNormalization layer: batch statistics
// while training, moving averages (Graph::variable, updated with Graph::assign)
// when evaluating.
#pragma once

#include "frontend/Layers.h"

namespace smelt {

/// Keras' defaults.
struct BatchNormOptions {
  /// moving = moving * momentum + batch statistic * (1 - momentum).
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true; // a learned offset "<name>/beta" (zeros)
  bool scale = true;  // a learned gain "<name>/gamma" (ones)
};

/// Keras' BatchNormalization(axis=-1) on x [batch, ..., channels] (NHWC images,
/// or rank 2): gamma (x - mean) / sqrt(variance + epsilon) + beta per channel.
/// While `training`, mean and variance are the batch's (over every axis but the
/// channels; the variance is the population one, as Keras and the ONNX op use
/// for normalizing and for the moving average) and the variables
/// "<name>/moving_mean" (zeros) and "<name>/moving_variance" (ones) are
/// assigned their next values; otherwise those are the statistics. The gradient
/// flows through the batch statistics, as in every framework. Parameters and
/// variables are x's float type.
Tensor batchNormalization(Tensor x, bool training, const std::string &name,
                          const BatchNormOptions &options = {}, Loc loc = Loc::current());

} // namespace smelt
