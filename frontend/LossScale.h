// Dynamic loss scaling for f16 training, as graph code (Keras' LossScaleOptimizer): the loss
// is multiplied by a scale before differentiation so small f16 gradients do not flush to
// zero; gradients are unscaled in f32 before the optimizer; a step whose gradients are not
// finite is skipped (parameters and optimizer state unchanged) and halves the scale; after
// `growthInterval` finite steps in a row the scale doubles. The scale may fall below 1.
#pragma once

#include "frontend/Optimizers.h"

namespace smelt {

struct LossScaleConfig {
  double initialScale = 32768; // 2^15
  int64_t growthInterval = 2000;
};

/// The state inputs are "loss_scale/scale" and "loss_scale/good_steps" (f32 scalars), then the
/// optimizer's; the scale starts at LossScaleConfig::initialScale (a state filled with zeros
/// would start the scale at 0 and every gradient at 0), the rest at 0.
struct ScaledUpdate : OptimizerUpdate {
  /// 1 when this step was skipped for non-finite gradients, else 0 (f32 scalar).
  Tensor skipped;
};

/// Differentiates `loss` scaled, unscales the gradients of `params` and applies `optimizer`
/// when they are all finite (with `learningRate` as applyOptimizer takes it). With several data-parallel `replicas` the scaled gradients are
/// averaged over them first (DataParallel.h), so an overflow on any replica skips the step
/// on all of them and their parameters and scales stay identical.
ScaledUpdate applyOptimizerWithLossScaling(Graph &g, const OptimizerConfig &optimizer,
                                           const LossScaleConfig &scaling, Tensor loss,
                                           const std::vector<Tensor> &params,
                                           int64_t replicas = 1,
                                           std::optional<Tensor> learningRate = std::nullopt,
                                           Loc loc = Loc::current());

/// The same around any optimizer update: `rule` gets the unscaled gradients of `params`.
ScaledUpdate applyLossScaling(Graph &g, const LossScaleConfig &scaling, Tensor loss,
                              const std::vector<Tensor> &params, int64_t replicas,
                              const UpdateRule &rule, Loc loc = Loc::current());

} // namespace smelt
