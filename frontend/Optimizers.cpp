// The optimizer update rules, written with smelt ops.
#include "frontend/Optimizers.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

namespace smelt {

std::string parameterName(Tensor param) {
  auto argument = mlir::dyn_cast<mlir::BlockArgument>(param.value());
  if (!argument)
    return "";
  auto name = param.graph().function().getArgAttrOfType<mlir::StringAttr>(
      argument.getArgNumber(), "smelt.name");
  return name ? name.str() : "";
}

std::string stateName(const std::string &prefix, Tensor param) {
  std::string name = parameterName(param);
  return prefix + "/" + (name.empty() ? "param" : name);
}

bool decaysWeight(const OptimizerConfig &config, Tensor param) {
  if (config.decays)
    return config.decays(parameterName(param), param.shape());
  return param.rank() >= 2;
}

namespace {
/// `name` behind "<scope>/" when the optimizer has a scope.
std::string scoped(const OptimizerConfig &config, const std::string &name) {
  return config.scope.empty() ? name : config.scope + "/" + name;
}

std::string slotName(const OptimizerConfig &config, const char *optimizer, const char *slot,
                     Tensor param) {
  return scoped(config, stateName(std::string(optimizer) + "/" + slot, param));
}
} // namespace

std::vector<Tensor> clipByGlobalNorm(const std::vector<Tensor> &grads, double clip, Loc loc) {
  if (grads.empty())
    return grads;
  // Squares summed in f32 at least: bf16/f16 gradients would overflow or lose the sum.
  DType sumType = grads[0].dtype() == DType::f64 ? DType::f64 : DType::f32;
  std::optional<Tensor> squares;
  for (const Tensor &grad : grads) {
    Tensor wide = convert(grad, sumType, loc);
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < wide.rank(); ++d)
      axes.push_back(d);
    Tensor sum = reduceSum(mul(wide, wide, loc), axes, loc);
    squares = squares ? add(*squares, sum, loc) : sum;
  }
  Tensor norm = sqrt(*squares, loc);
  Tensor limit = scalarLike(norm, clip, loc);
  Tensor scale = div(limit, maximum(norm, limit, loc), loc);
  std::vector<Tensor> clipped;
  for (const Tensor &grad : grads)
    clipped.push_back(mul(grad, convert(scale, grad.dtype(), loc), loc));
  return clipped;
}

void OptimizerUpdate::appendState(const OptimizerUpdate &other) {
  stateInputs.insert(stateInputs.end(), other.stateInputs.begin(), other.stateInputs.end());
  initialValues.insert(initialValues.end(), other.initialValues.begin(),
                       other.initialValues.end());
  newState.insert(newState.end(), other.newState.begin(), other.newState.end());
}

OptimizerUpdate appliedIf(Tensor apply, const std::vector<Tensor> &params, OptimizerUpdate update,
                          Loc loc) {
  auto keep = [&](Tensor updated, Tensor old) {
    return select(broadcastTo(apply, old.shape(), loc), updated, old, loc);
  };
  for (size_t i = 0; i < params.size(); ++i)
    update.newParams[i] = keep(update.newParams[i], params[i]);
  for (size_t i = 0; i < update.stateInputs.size(); ++i)
    update.newState[i] = keep(update.newState[i], update.stateInputs[i]);
  return update;
}

OptimizerUpdate withMovingAverage(Graph &g, double momentum, const std::vector<Tensor> &params,
                                  OptimizerUpdate update, Loc loc) {
  if (!(momentum > 0 && momentum < 1))
    g.fail(loc, "the moving average of the weights needs a momentum in (0, 1), got " +
                    std::to_string(momentum));
  Tensor updates = g.input("ema/updates", {}, DType::f32, loc);
  Tensor first = compare(updates, scalarLike(updates, 0.0, loc), CompareDirection::eq, loc);
  update.stateInputs.push_back(updates);
  update.initialValues.push_back(0.0);
  update.newState.push_back(add(updates, scalarLike(updates, 1.0, loc), loc));
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor average = g.input(stateName("ema", params[i]), params[i].shape(), params[i].dtype(),
                             loc);
    Tensor next = update.newParams[i];
    Tensor moved = movingAverage(average, next, momentum, loc);
    update.stateInputs.push_back(average);
    update.initialValues.push_back(0.0);
    update.newState.push_back(select(broadcastTo(first, next.shape(), loc), next, moved, loc));
  }
  return update;
}

std::optional<OptimizerKind> parseOptimizer(const std::string &name) {
  if (name == "sgd")
    return OptimizerKind::SGD;
  if (name == "momentum")
    return OptimizerKind::Momentum;
  if (name == "adam")
    return OptimizerKind::Adam;
  if (name == "adamw")
    return OptimizerKind::AdamW;
  return std::nullopt;
}

OptimizerUpdate applyOptimizer(Graph &g, const OptimizerConfig &config,
                               const std::vector<Tensor> &params,
                               const std::vector<Tensor> &inputGrads,
                               std::optional<Tensor> learningRate, Loc loc) {
  if (params.size() != inputGrads.size())
    g.fail(loc, "optimizer: " + std::to_string(params.size()) + " parameters but " +
                    std::to_string(inputGrads.size()) + " gradients");
  if (learningRate && learningRate->rank() != 0)
    g.fail(loc, "optimizer: the learning rate must be a rank-0 tensor, not " +
                    shapeString(learningRate->shape()));
  if (config.clipGlobalNorm < 0 || !std::isfinite(config.clipGlobalNorm))
    g.fail(loc, "optimizer: clipGlobalNorm must be a finite number >= 0 (0: no clipping)");
  std::vector<Tensor> grads = config.clipGlobalNorm > 0
                                  ? clipByGlobalNorm(inputGrads, config.clipGlobalNorm, loc)
                                  : inputGrads;
  OptimizerUpdate update;
  auto lr = [&](Tensor like) {
    return learningRate ? convert(*learningRate, like.dtype(), loc)
                        : scalarLike(like, config.learningRate, loc);
  };
  switch (config.kind) {
  case OptimizerKind::SGD:
    for (size_t i = 0; i < params.size(); ++i)
      update.newParams.push_back(sub(params[i], mul(lr(params[i]), grads[i], loc), loc));
    break;
  case OptimizerKind::Momentum:
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor v = g.input(slotName(config, "momentum", "velocity", params[i]),
                         params[i].shape(), params[i].dtype(), loc);
      Tensor mu = scalarLike(v, config.momentum, loc);
      Tensor newV = sub(mul(mu, v, loc), mul(lr(v), grads[i], loc), loc);
      update.stateInputs.push_back(v);
      update.newState.push_back(newV);
      update.newParams.push_back(add(params[i], newV, loc));
    }
    break;
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW: {
    // The step count lives in the parameters' dtype so the bias correction is as precise as
    // the parameters (f32 master weights in training, f64 in gradient tests).
    Tensor step = g.input(scoped(config, "adam/step"), {},
                          params.empty() ? DType::f32 : params[0].dtype(), loc);
    Tensor t = add(step, scalarLike(step, 1.0, loc), loc);
    Tensor b1 = scalarLike(step, config.beta1, loc), b2 = scalarLike(step, config.beta2, loc);
    Tensor one = scalarLike(step, 1.0, loc);
    Tensor alpha = mul(lr(step),
                       div(sqrt(sub(one, pow(b2, t, loc), loc), loc),
                           sub(one, pow(b1, t, loc), loc), loc),
                       loc);
    update.stateInputs.push_back(step);
    update.newState.push_back(t);
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i], gr = grads[i];
      Tensor m = g.input(slotName(config, "adam", "m", p), p.shape(), p.dtype(), loc);
      Tensor v = g.input(slotName(config, "adam", "v", p), p.shape(), p.dtype(), loc);
      Tensor newM = add(m, mul(sub(gr, m, loc), scalarLike(m, 1 - config.beta1, loc), loc), loc);
      Tensor newV = add(v, mul(sub(mul(gr, gr, loc), v, loc),
                               scalarLike(v, 1 - config.beta2, loc), loc),
                        loc);
      Tensor stepSize = div(mul(convert(alpha, p.dtype(), loc), newM, loc),
                            add(sqrt(newV, loc), scalarLike(v, config.epsilon, loc), loc), loc);
      Tensor newP = sub(p, stepSize, loc);
      if (config.kind == OptimizerKind::AdamW && decaysWeight(config, p))
        newP = sub(newP, mul(mul(lr(p), scalarLike(p, config.weightDecay, loc), loc), p, loc),
                   loc);
      update.stateInputs.insert(update.stateInputs.end(), {m, v});
      update.newState.insert(update.newState.end(), {newM, newV});
      update.newParams.push_back(newP);
    }
    break;
  }
  }
  update.initialValues.assign(update.stateInputs.size(), 0.0);
  return update;
}

} // namespace smelt
