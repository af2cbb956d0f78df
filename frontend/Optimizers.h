// Optimizers as graph code: SGD, momentum, Adam and AdamW update parameters from gradients
// inside the compiled training step, with their state (moments, step count) as tensors, the
// learning rate as an input fed each step, and clipping by the global gradient norm.
#pragma once

#include "frontend/Ops.h"
#include "frontend/Schedules.h"

#include <functional>

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
  /// How the Trainer varies the rate over steps (fed as the step's "learning_rate" input).
  LearningRateSchedule schedule;
  /// > 0: every gradient is scaled by clip / max(norm, clip), the norm taken over all of them
  /// together (tf.clip_by_global_norm, optax.clip_by_global_norm), before the update.
  double clipGlobalNorm = 0;
  /// AdamW: whether the parameter named `name` of shape `shape` decays. Unset: parameters of
  /// rank 2 or more (dense and conv kernels, embeddings) do, rank-1 ones (biases, layer norm
  /// gains and biases) do not, as GPT-2 and nanoGPT train; decaying a norm's gain towards 0
  /// fights the normalization, and a bias has no scale for decay to regularize.
  std::function<bool(const std::string &name, const std::vector<int64_t> &shape)> decays;
  /// Prefixes the names of the optimizer's state inputs ("<scope>/adam/step"): two optimizers
  /// in one graph (parameter groups, ParameterGroups.h) each need a scope of their own.
  std::string scope;
};

/// The optimizer's state inputs and the updated parameters and state.
struct OptimizerUpdate {
  std::vector<Tensor> stateInputs; // graph inputs
  /// What each state input is filled with before the first step (all 0 for these optimizers).
  std::vector<double> initialValues;
  std::vector<Tensor> newParams;   // in `params` order
  std::vector<Tensor> newState;    // in `stateInputs` order

  /// Adds `other`'s state inputs, initial values and new state after this one's.
  void appendState(const OptimizerUpdate &other);
};

/// Adds the optimizer's state as inputs of `g` (named "<optimizer>/<slot>/<parameter>", plus
/// "adam/step", in the parameters' dtype, for Adam's bias correction; each behind
/// "<config.scope>/" when it has one) and builds one update
/// step of `params` from `grads` (clipped first when config.clipGlobalNorm > 0), with the rank-0
/// `learningRate` input as lr (config.learningRate as a constant when not given):
///   SGD       p -= lr g
///   Momentum  v = mu v - lr g;  p += v
///   Adam      m += (1-b1)(g - m);  v += (1-b2)(g^2 - v);  t += 1;
///             p -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + eps)   (Keras' form)
///   AdamW     Adam, then p -= lr wd p (decoupled weight decay) where config.decays says so
OptimizerUpdate applyOptimizer(Graph &g, const OptimizerConfig &config,
                               const std::vector<Tensor> &params,
                               const std::vector<Tensor> &grads,
                               std::optional<Tensor> learningRate = std::nullopt,
                               Loc loc = Loc::current());

/// An optimizer update (applyOptimizer, applyParameterGroups, ...) built from the gradients of
/// parameters the rule knows: what loss scaling and gradient accumulation wrap.
using UpdateRule = std::function<OptimizerUpdate(const std::vector<Tensor> &grads)>;

/// `update` applied only where the rank-0 i1 `apply` is true: its new parameters and state where
/// it is, `params` and its state inputs as they were where not (a skipped step).
OptimizerUpdate appliedIf(Tensor apply, const std::vector<Tensor> &params, OptimizerUpdate update,
                          Loc loc = Loc::current());

/// `update` plus an exponential moving average of the parameters it produces (Keras'
/// use_ema, optax.ema without debiasing): state inputs "ema/<parameter>" and "ema/updates"
/// (a count), each average set to the new parameters at the first update and to momentum * ema +
/// (1 - momentum) * new after it. Inside a gated rule (accumulation, loss scaling) the average
/// moves only with applied updates.
OptimizerUpdate withMovingAverage(Graph &g, double momentum, const std::vector<Tensor> &params,
                                  OptimizerUpdate update, Loc loc = Loc::current());

/// `grads` scaled by clip / max(global norm, clip): unchanged when their norm over all of
/// them is at most `clip`. The norm is computed in f32 (f64 for f64 gradients).
std::vector<Tensor> clipByGlobalNorm(const std::vector<Tensor> &grads, double clip,
                                     Loc loc = Loc::current());

/// The name a parameter was created with ("dense1/kernel"), or "" for a tensor that is not an
/// argument of its graph.
std::string parameterName(Tensor param);

/// "<prefix>/<parameter's name>" ("param" for a tensor that is not an argument): how optimizer
/// state, accumulators and averages name what they keep per parameter.
std::string stateName(const std::string &prefix, Tensor param);

/// Whether AdamW decays `param` under `config` (its `decays`, or the rank rule).
bool decaysWeight(const OptimizerConfig &config, Tensor param);

/// "sgd", "momentum", "adam", "adamw" -> the kind; nullopt for anything else.
std::optional<OptimizerKind> parseOptimizer(const std::string &name);

} // namespace smelt
