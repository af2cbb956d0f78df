// What a user gives the Trainer: a model as a function that builds, for one batch, its loss and
// metrics with the builder (inputs -> loss, metrics), and the shapes of one example and label.
// The Trainer builds the training step around it (gradients, precision policy, loss scaling,
// optimizer) and an evaluation step, as Keras' compile() does around a model's call().
#pragma once

#include "frontend/Graph.h"
#include "runtime/DType.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace smelt::train {

/// The batch as the model function sees it.
struct ModelInputs {
  Tensor examples; // [batch, ...ModelSpec::example.shape]
  Tensor labels;   // [batch, ...ModelSpec::label.shape]
  /// True in the training step (dropout on), false in the evaluation step.
  bool training = false;
  /// The global step as a rank-0 i64 while training (an offset for random draws, so dropout
  /// masks differ per step and per replica); nullopt in the evaluation step.
  std::optional<Tensor> step;
  /// The run's seed (TrainConfig::seed), for the model's own random streams.
  uint64_t seed = 0;
};

/// A scalar the steps report, averaged over the examples of an epoch or an evaluation.
struct Metric {
  std::string name; // "accuracy", "top5_accuracy", ...
  Tensor value;     // rank 0: this batch's mean
};

struct ModelOutputs {
  Tensor loss; // rank 0: the batch's mean loss, which the optimizer minimizes
  std::vector<Metric> metrics;
};

using ModelFunction = std::function<ModelOutputs(Graph &, const ModelInputs &)>;

/// One example's (or label's) shape, without the batch dimension, and element type.
struct TensorSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
};

struct ModelSpec {
  /// A user's model: `build` and the example and label specs. The name goes into checkpoints
  /// (a checkpoint of another model is refused) and messages.
  ModelSpec(std::string name, TensorSpec example, TensorSpec label, ModelFunction build)
      : name(std::move(name)), example(std::move(example)), label(std::move(label)),
        build(std::move(build)) {}
  /// A built-in Fashion-MNIST classifier by name, "mlp" or "cnn" (BuiltinModels.h), resolved
  /// when the Trainer is created, with TrainConfig::dropout.
  ModelSpec(const char *builtin) : name(builtin) {}
  ModelSpec(std::string builtin) : name(std::move(builtin)) {}

  std::string name;
  TensorSpec example{{784}, DType::f32};
  TensorSpec label{{}, DType::i32};
  ModelFunction build; // empty: the built-in called `name`
};

/// Cross-entropy loss and accuracy of `logits` [..., C] against class `labels` [...], plus
/// top-k accuracy for each k in `topK`: what a classifier's model function usually returns.
ModelOutputs classification(Tensor logits, Tensor labels, const std::vector<int64_t> &topK = {});

} // namespace smelt::train
