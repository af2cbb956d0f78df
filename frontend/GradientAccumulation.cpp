// accumulateGradients: accumulators as optimizer state, the update gated on the
// last micro-step.
#include "frontend/GradientAccumulation.h"

namespace smelt {

OptimizerUpdate accumulateGradients(Graph &g, int64_t steps, Tensor step,
                                    const std::vector<Tensor> &params,
                                    const std::vector<Tensor> &grads, const UpdateRule &rule,
                                    Loc loc) {
  if (steps < 1)
    g.fail(loc, "gradient accumulation needs steps >= 1, got " + std::to_string(steps));
  if (steps == 1)
    return rule(grads);
  if (step.rank() != 0 || step.dtype() != DType::i64)
    g.fail(loc, "gradient accumulation: the step counter must be a rank-0 i64, not " +
                    shapeString(step.shape()) + " " + dtypeName(step.dtype()));
  if (params.size() != grads.size())
    g.fail(loc, "gradient accumulation: " + std::to_string(params.size()) + " parameters but " +
                    std::to_string(grads.size()) + " gradients");
  Tensor k = scalarLike(step, double(steps), loc);
  Tensor position = sub(step, mul(div(step, k, loc), k, loc), loc); // step % k for step >= 0
  Tensor last =
      compare(position, scalarLike(step, double(steps - 1), loc), CompareDirection::eq, loc);
  OptimizerUpdate out;
  std::vector<Tensor> sums, means;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor sum = g.input(stateName("accumulate", params[i]), grads[i].shape(), grads[i].dtype(),
                         loc);
    out.stateInputs.push_back(sum);
    out.initialValues.push_back(0.0);
    sums.push_back(add(sum, grads[i], loc));
    means.push_back(mul(sums.back(), scalarLike(sums.back(), 1.0 / double(steps), loc), loc));
  }
  OptimizerUpdate update = appliedIf(last, params, rule(means), loc);
  for (Tensor sum : sums)
    out.newState.push_back(select(broadcastTo(last, sum.shape(), loc),
                                  broadcastTo(scalarLike(sum, 0.0, loc), sum.shape(), loc), sum,
                                  loc));
  out.newParams = update.newParams;
  out.appendState(update);
  return out;
}

} // namespace smelt
