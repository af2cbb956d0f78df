// Training on Fashion-MNIST-shaped data: builds the training step (model, loss, gradients,
// optimizer) and the evaluation step with the builder, compiles them once, and runs epochs,
// evaluation and checkpoints. What `smelt train` and the training tests drive.
#pragma once

#include "codegen/Compile.h"
#include "frontend/LossScale.h"
#include "frontend/Optimizers.h"
#include "passes/Passes.h"
#include "runtime/CpuExecutor.h"
#include "runtime/Dataset.h"

#include "mlir/IR/MLIRContext.h"

#include <functional>
#include <map>
#include <memory>

namespace smelt::train {

struct TrainConfig {
  std::string model = "mlp"; // mlp: 784-512-256-10 with dropout; cnn: conv-pool-conv-pool-dense
  int64_t batch = 256;
  OptimizerConfig optimizer;  // Adam, learning rate 1e-3
  uint64_t seed = 0;          // parameters, shuffling and dropout all derive from it
  double dropout = 0.2;
  int64_t evalBatch = 1000;
  /// mixed_bf16 / mixed_f16 compute matmuls and what follows them in bf16/f16 with f32
  /// master weights (Graph::applyPrecision); mixed_f16 adds dynamic loss scaling.
  PrecisionPolicy precision = PrecisionPolicy::f32;
  LossScaleConfig lossScale;
  /// The compile pipeline's choices: devices, placement, fusion.
  PipelineOptions pipeline;
  /// Every compile's dump directory, trace and back-end hook (--dump-dir, --profile); its
  /// own pipeline is replaced by `pipeline`. With a trace, the executors record runs into it.
  codegen::CompileOptions compile;
};

struct Metrics {
  double loss = 0, accuracy = 0;
  int64_t examples = 0;
  /// Steps skipped for non-finite gradients (mixed_f16), and the loss scale after the last.
  int64_t skippedSteps = 0;
  double lossScale = 0;
};

/// The training step as a graph: @train_step (images, labels, step, params..., state...) ->
/// (params..., state..., loss, accuracy[, skipped]) and @train_step_init; `skipped` (1 when
/// the step was skipped) and the loss-scale state exist under mixed_f16. Throws BuildError.
std::unique_ptr<Graph> buildTrainStep(mlir::MLIRContext &context, const TrainConfig &config);

class Trainer {
public:
  /// Builds and compiles the init, training and evaluation functions; errors name the step.
  static rt::Expected<std::unique_ptr<Trainer>> create(const TrainConfig &config);

  /// One epoch over `data` in the order drawn from (seed, epoch), dropping a last partial
  /// batch. `progress(step, steps, runningMetrics)` is called after each step.
  rt::Expected<Metrics>
  trainEpoch(const rt::Dataset &data, int64_t epoch,
             const std::function<void(int64_t, int64_t, const Metrics &)> &progress = {});
  /// Loss and accuracy over all of `data` (no dropout).
  rt::Expected<Metrics> evaluate(const rt::Dataset &data);

  /// Parameters, optimizer state and progress as safetensors, written atomically.
  rt::Status save(const std::string &path, int64_t epochsDone) const;
  /// Restores a checkpoint written by save() for the same model; returns its epochs done.
  rt::Expected<int64_t> load(const std::string &path);

  const std::vector<rt::HostTensor> &parameters() const { return params_; }
  const std::vector<std::string> &parameterNames() const { return paramNames_; }
  int64_t globalStep() const { return step_; }
  const TrainConfig &config() const { return config_; }
  /// Steps (kernels and library calls) one training step runs.
  size_t stepCount() const { return trainStep_->executable().steps.size(); }
  /// Where the training step's ops run (smelt-place-devices' summary).
  const std::string &placement() const { return trainStep_->executable().placement; }

private:
  Trainer() = default;
  rt::Expected<rt::CpuExecutor *> evalExecutor(int64_t batch);

  TrainConfig config_;
  std::unique_ptr<mlir::MLIRContext> context_;
  std::unique_ptr<rt::CpuExecutor> trainStep_;
  std::map<int64_t, std::unique_ptr<rt::CpuExecutor>> evalSteps_;
  std::vector<rt::HostTensor> params_, state_;
  std::vector<std::string> paramNames_, stateNames_;
  int64_t step_ = 0;
  /// Index in state_ of the loss scale (mixed_f16), else -1.
  int64_t lossScaleSlot_ = -1;
};

} // namespace smelt::train
