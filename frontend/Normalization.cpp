// batchNormalization: statistics, the moving-average update and the
// normalization as ops.
#include "frontend/Normalization.h"

#include <numeric>

namespace smelt {

Tensor batchNormalization(Tensor x, bool training, const std::string &name,
                          const BatchNormOptions &options, Loc loc) {
  Graph &g = x.graph();
  if (x.rank() < 2)
    g.fail(loc, "batch normalization '" + name + "' needs [batch, ..., channels], got " +
                    shapeString(x.shape()));
  if (!rt::isFloat(x.dtype()))
    g.fail(loc,
           "batch normalization '" + name + "' needs a float input, got " + dtypeName(x.dtype()));
  if (!(options.momentum >= 0 && options.momentum <= 1) || !(options.epsilon > 0))
    g.fail(loc, "batch normalization '" + name +
                    "': momentum must be in [0, 1] and epsilon > 0"
                    ", got " +
                    std::to_string(options.momentum) + " and " + std::to_string(options.epsilon));
  return g.atomically([&] {
    int64_t channels = x.dim(-1);
    DType dtype = x.dtype();
    // Created in both modes, in the same order, so the training and evaluation
    // steps take the same arguments.
    std::optional<Tensor> gamma, beta;
    if (options.scale)
      gamma = g.parameter(name + "/gamma", {channels}, Initializer::constant(1), dtype, loc);
    if (options.center)
      beta = g.parameter(name + "/beta", {channels}, Initializer::zeros(), dtype, loc);
    Tensor movingMean =
        g.variable(name + "/moving_mean", {channels}, Initializer::zeros(), dtype, loc);
    Tensor movingVariance =
        g.variable(name + "/moving_variance", {channels}, Initializer::constant(1), dtype, loc);
    Tensor mu = movingMean, var = movingVariance;
    if (training) {
      std::vector<int64_t> axes(size_t(x.rank() - 1));
      std::iota(axes.begin(), axes.end(), 0);
      // Two passes (the mean, then the mean square about it): no cancellation
      // when the mean is large against the spread, as after a ReLU.
      mu = mean(x, axes, loc);
      Tensor centered = sub(x, mu, loc);
      var = mean(mul(centered, centered, loc), axes, loc);
      g.assign(movingMean, movingAverage(movingMean, mu, options.momentum, loc), loc);
      g.assign(movingVariance, movingAverage(movingVariance, var, options.momentum, loc), loc);
    }
    // gamma / sqrt(var + epsilon) per channel first: one multiply per element
    // after it.
    Tensor factor = rsqrt(add(var, scalarLike(var, options.epsilon, loc), loc), loc);
    if (gamma)
      factor = mul(factor, *gamma, loc);
    Tensor y = mul(sub(x, mu, loc), factor, loc);
    return beta ? add(y, *beta, loc) : y;
  });
}

} // namespace smelt
