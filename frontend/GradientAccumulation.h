// Gradient accumulation as graph code (optax.MultiSteps, Keras'
// gradient_accumulation_steps): each step adds its gradients to accumulators,
// and every k-th step applies the optimizer to their mean, so k micro-batches
// of b examples update the parameters as one batch of k * b would, in the
// memory of b.
#pragma once

#include "frontend/Optimizers.h"

namespace smelt {

/// Adds `grads` (of `params`) to state inputs "accumulate/<parameter>" and, on
/// every step whose rank-0 i64 `step` counter has step % `steps` == `steps` -
/// 1, applies `rule` to the accumulated sums divided by `steps` and zeroes the
/// accumulators; on the other steps the parameters and `rule`'s state keep
/// their values. The state lists the accumulators first, then `rule`'s. `steps`
/// must be >= 1 (1: `rule` every step, nothing accumulated).
OptimizerUpdate accumulateGradients(Graph &g, int64_t steps, Tensor step,
                                    const std::vector<Tensor> &params,
                                    const std::vector<Tensor> &grads, const UpdateRule &rule,
                                    Loc loc = Loc::current());

} // namespace smelt
