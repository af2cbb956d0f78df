// Optimizers as graph code: SGD, momentum, Adam and AdamW update parameters from gradients
// inside the compiled training step, with their state (moments, step count) as tensors.
#pragma once

#include "frontend/Ops.h"

namespace smelt {

enum class OptimizerKind { SGD, Momentum, Adam, AdamW };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Adam;
  double learningRate = 1e-3;
  double momentum = 0.9;        // Momentum
  double beta1 = 0.9;           // Adam, AdamW
  double beta2 = 0.999;         // Adam, AdamW
  double epsilon = 1e-7;        // Keras' default
  double weightDecay = 0.004;   // AdamW, decoupled (Keras' default)
};

/// The optimizer's state inputs and the updated parameters and state.
struct OptimizerUpdate {
  std::vector<Tensor> stateInputs; // graph inputs, each starting at zero
  std::vector<Tensor> newParams;   // in `params` order
  std::vector<Tensor> newState;    // in `stateInputs` order
};

/// Adds the optimizer's state as inputs of `g` (named "<optimizer>/<slot>/<parameter>", plus
/// "adam/step", in the parameters' dtype, for Adam's bias correction) and builds one update
/// step of `params` from `grads`:
///   SGD       p -= lr g
///   Momentum  v = mu v - lr g;  p += v
///   Adam      m += (1-b1)(g - m);  v += (1-b2)(g^2 - v);  t += 1;
///             p -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + eps)   (Keras' form)
///   AdamW     Adam, then p -= lr wd p (decoupled weight decay)
OptimizerUpdate applyOptimizer(Graph &g, const OptimizerConfig &config,
                               const std::vector<Tensor> &params,
                               const std::vector<Tensor> &grads, Loc loc = Loc::current());

/// "sgd", "momentum", "adam", "adamw" -> the kind; nullopt for anything else.
std::optional<OptimizerKind> parseOptimizer(const std::string &name);

} // namespace smelt
