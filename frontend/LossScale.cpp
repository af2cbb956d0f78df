// Dynamic loss scaling as graph code (LossScale.h).
#include "frontend/LossScale.h"

#include "frontend/DataParallel.h"

namespace smelt {

ScaledUpdate applyOptimizerWithLossScaling(Graph &g, const OptimizerConfig &optimizer,
                                           const LossScaleConfig &scaling, Tensor loss,
                                           const std::vector<Tensor> &params,
                                           int64_t replicas,
                                           std::optional<Tensor> learningRate, Loc loc) {
  return applyLossScaling(
      g, scaling, loss, params, replicas,
      [&](const std::vector<Tensor> &grads) {
        return applyOptimizer(g, optimizer, params, grads, learningRate, loc);
      },
      loc);
}

ScaledUpdate applyLossScaling(Graph &g, const LossScaleConfig &scaling, Tensor loss,
                              const std::vector<Tensor> &params, int64_t replicas,
                              const UpdateRule &rule, Loc loc) {
  if (scaling.initialScale <= 0 || scaling.growthInterval < 1)
    g.fail(loc, "loss scaling needs a positive initial scale and growth interval");
  ScaledUpdate out;
  Tensor scale = g.input("loss_scale/scale", {}, loss.dtype(), loc);
  Tensor goodSteps = g.input("loss_scale/good_steps", {}, loss.dtype(), loc);
  std::vector<Tensor> grads =
      crossReplicaMean(g.gradients(mul(loss, scale, loc), params, loc), replicas, loc);

  // Every gradient finite: x * 0 is 0 for finite x and NaN for inf and NaN, so the sum of
  // all of them is 0 exactly when no element overflowed.
  Tensor probe = scalarLike(loss, 0.0, loc);
  for (Tensor &grad : grads) {
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < grad.rank(); ++d)
      axes.push_back(d);
    Tensor zeros = reduceSum(mul(grad, scalarLike(grad, 0.0, loc), loc), axes, loc);
    probe = add(probe, convert(zeros, loss.dtype(), loc), loc);
    grad = div(grad, convert(scale, grad.dtype(), loc), loc);
  }
  Tensor finite = compare(probe, scalarLike(probe, 0.0, loc), CompareDirection::eq, loc);

  OptimizerUpdate update = appliedIf(finite, params, rule(grads), loc);
  Tensor good = add(goodSteps, scalarLike(goodSteps, 1.0, loc), loc);
  Tensor grow = compare(good, scalarLike(good, double(scaling.growthInterval), loc),
                        CompareDirection::ge, loc);
  Tensor scaleIfFinite = select(grow, mul(scale, scalarLike(scale, 2.0, loc), loc), scale, loc);
  Tensor goodIfFinite = select(grow, scalarLike(good, 0.0, loc), good, loc);
  Tensor zero = scalarLike(scale, 0.0, loc);

  out.stateInputs = {scale, goodSteps};
  out.initialValues = {scaling.initialScale, 0.0};
  out.newState = {select(finite, scaleIfFinite, mul(scale, scalarLike(scale, 0.5, loc), loc), loc),
                  select(finite, goodIfFinite, zero, loc)};
  out.newParams = update.newParams;
  out.appendState(update);
  out.skipped = select(finite, zero, scalarLike(scale, 1.0, loc), loc);
  return out;
}

} // namespace smelt
