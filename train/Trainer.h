// Training any model given as a ModelSpec (train/Model.h): builds the training step (the
// model's loss, gradients, precision policy and loss scaling, optimizer) and the evaluation
// step with the builder, compiles them once per batch size, and runs epochs, evaluation and
// checkpoints. fit() (train/Fit.h) runs it Keras-style; `smelt train` and the tests drive it.
#pragma once

#include "codegen/Compile.h"
#include "codegen/JitCache.h"
#include "frontend/LossScale.h"
#include "frontend/Optimizers.h"
#include "frontend/ParameterGroups.h"
#include "passes/Passes.h"
#include "runtime/Collectives.h"
#include "data/Dataset.h"
#include "runtime/Executor.h"
#include "train/Model.h"

#include "mlir/IR/MLIRContext.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace smelt::train {

struct TrainConfig {
  /// The model: a user's ModelSpec, or a built-in by name ("mlp": 784-512-256-10 with
  /// dropout; "cnn": conv-pool-conv-pool-dense).
  ModelSpec model = "mlp";
  int64_t batch = 256;
  /// Adam, learning rate 1e-3; its schedule sets the rate fed to each step.
  OptimizerConfig optimizer;
  /// Parameters that train with another optimizer, rate, schedule or weight decay
  /// (frontend/ParameterGroups.h: optax's multi_transform, PyTorch's param groups); the first
  /// group that matches a parameter takes it, `optimizer` the rest. Each group's rate is the
  /// step's input "learning_rate/<group>", from its own schedule.
  std::vector<ParameterGroup> parameterGroups;
  /// > 1: the optimizer updates the parameters every `accumulateSteps` steps, with the mean of
  /// their gradients (frontend/GradientAccumulation.h), as one batch of accumulateSteps *
  /// `batch` examples would, in the memory of `batch`. Schedules count these updates. Each
  /// step's gradient weighs the same, a short last batch's too; accumulation runs on across
  /// epochs.
  int64_t accumulateSteps = 1;
  /// > 0: the step also keeps an exponential moving average of the parameters
  /// (withMovingAverage: Keras' use_ema with ema_momentum, optax.ema), in the optimizer state
  /// and checkpoints; evaluation runs on the averages, averagedParameters() gives them.
  double emaMomentum = 0;
  uint64_t seed = 0;          // parameters, shuffling and dropout all derive from it
  double dropout = 0.2;       // the built-in models' dropout rate
  /// The last batch of an epoch is usually short. By default it trains (through a step
  /// compiled for its size) as Keras does; with several replicas, all of it but the fewer
  /// than `replicas` examples that do not split evenly over them, which are counted in
  /// Metrics::droppedExamples and reported by fit().
  /// True drops it always (tf.data's drop_remainder).
  bool dropRemainder = false;
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
  /// When set, every function compiles through a JitCache made with these options (its
  /// compile options and target become the two fields above and the target they imply), so a
  /// second run with the same configuration loads the code from disk. Unset: compiled afresh.
  std::optional<codegen::JitOptions> cache;
  /// Data-parallel replicas (MirroredStrategy): `batch` is the global batch, split evenly, so
  /// each replica trains on batch / replicas examples of every global batch (disjoint shards
  /// of one shuffled order) and gradients are averaged over replicas before the optimizer.
  /// The learning rate is used as given.
  int64_t replicas = 1;
  /// Where the other replicas are: null runs all `replicas` in this process, one thread each
  /// (a LocalGroup made with `collectives`); otherwise this process runs one replica, the
  /// communicator's rank, of a group of communicator->size() == replicas (MPI). The
  /// communicator must outlive the Trainer.
  rt::Communicator *communicator = nullptr;
  rt::CollectiveOptions collectives;
  /// When the training step runs on a GPU and there are several replicas, each replica runs
  /// on its own GPU (MirroredStrategy): replica r on gpu:r of `pipeline.devices` in this
  /// process, or each MPI rank on its gpu:0 (CUDA_VISIBLE_DEVICES picks which). This makes
  /// their communicators (rt::cuda::ncclReplicaGroup: NCCL); null, or no communicators back,
  /// keeps the host ones above, through which the GPU executor reduces by host copies.
  rt::DeviceGroupFactory gpuGroup;
  /// How the executors run steps placed on a GPU (ExecutorOptions::gpuRunner, TF32); its trace
  /// and communicator are the Trainer's own (above).
  rt::ExecutorOptions executor;
};

struct Metrics {
  double loss = 0;
  /// The model's metrics (ModelOutputs::metrics), by name, in its order.
  std::vector<std::pair<std::string, double>> values;
  int64_t examples = 0;
  /// Training steps the epoch ran (the short last batch's included).
  int64_t steps = 0;
  /// Examples of the epoch's last partial batch that did not train (TrainConfig::dropRemainder).
  int64_t droppedExamples = 0;
  /// Steps skipped for non-finite gradients (mixed_f16), and the loss scale after the epoch's
  /// last step (0 in the metrics progress callbacks get during the epoch).
  int64_t skippedSteps = 0;
  double lossScale = 0;

  /// The metric called `name`, or NaN when the model has none.
  double value(const std::string &name) const;
  double accuracy() const { return value("accuracy"); }
};

/// The training step as a graph: @train_step (examples, labels, step, learning_rate,
/// learning_rate/<group>..., the model's params and variables in creation order..., state...) -> (params..., variables...,
/// state..., loss, metrics...[, skipped]) and @train_step_init; `skipped` (1 when the step was
/// skipped) and the loss-scale state exist under mixed_f16. A variable's result is its
/// assigned value (Graph::assign), averaged over replicas when it is a float. A graph input
/// the model function makes itself is a BuildError. `batch` is one replica's (config.batch / config.replicas when 0). Throws
/// BuildError, also for an unknown built-in model.
std::unique_ptr<Graph> buildTrainStep(mlir::MLIRContext &context, const TrainConfig &config,
                                      int64_t batch = 0);
/// The evaluation step: @eval_step (examples, labels, params and variables...) -> (loss,
/// metrics...).
std::unique_ptr<Graph> buildEvalStep(mlir::MLIRContext &context, const TrainConfig &config,
                                     int64_t batch);
/// The `smelt.name` of argument `i` of a step's function ("arg<i>" when it has none).
std::string stepArgumentName(Graph &g, unsigned i);
/// The argument attribute (f64) of a training step's state input that holds its starting
/// value: the Trainer's first state (zero unless it is given).
inline constexpr const char *kInitialValueAttr = "smelt.initial_value";

class Trainer {
public:
  /// Builds and compiles the init, training and evaluation functions; errors name the step.
  static rt::Expected<std::unique_ptr<Trainer>> create(const TrainConfig &requested);

  /// One epoch over `data` in the order drawn from (seed, epoch); the last partial global
  /// batch as TrainConfig::dropRemainder says. `progress(step, steps, runningMetrics)` is
  /// called after each step (by replica 0's thread). Loss and metrics are averaged over the
  /// epoch's examples (each global batch's averaged over replicas).
  rt::Expected<Metrics>
  trainEpoch(const data::Dataset &data, int64_t epoch,
             const std::function<void(int64_t, int64_t, const Metrics &)> &progress = {});
  /// Loss and metrics over all of `data` (no dropout), the last batch short. With an MPI
  /// communicator each process evaluates its share of the batches and the sums are
  /// all-reduced.
  rt::Expected<Metrics> evaluate(const data::Dataset &data);

  /// Parameters, variables, optimizer state and progress as safetensors, written atomically, with a
  /// checksum of the tensors (train/Checkpoint.h).
  rt::Status save(const std::string &path, int64_t epochsDone) const;
  /// Restores a checkpoint written by save() for the same model, after checking its metadata
  /// and checksum; returns its epochs done.
  rt::Expected<int64_t> load(const std::string &path);
  /// Starts from the parameters in the safetensors file at `path`, by name, for fine-tuning:
  /// the weights of an imported model (`smelt import` names them as the ONNX file does) or of
  /// another run; the optimizer's state and the step count stay fresh. Every parameter must be
  /// there with its type, and every tensor there must be a parameter or a variable: a typo or
  /// another model's file is an error naming the tensor, never a half-initialized model.
  /// Variables the file lacks (a model trained without them) keep their initial values.
  rt::Status initParameters(const std::string &path);
  /// The same from `values` by name (onnx::importInto's ImportOptions::parameterValues); errors
  /// name `source`.
  rt::Status initParameters(std::map<std::string, rt::HostTensor> values,
                            const std::string &source);
  /// Replaces every replica's parameters with `params` (in parameterNames() order, each of its
  /// parameter's type); an error naming the first that does not fit.
  rt::Status setParameters(const std::vector<rt::HostTensor> &params);
  /// The same for the variables (variableNames() order).
  rt::Status setVariables(const std::vector<rt::HostTensor> &variables);

  /// The parameters (of this process's first replica: every replica holds the same), copied
  /// to the host: between steps they live on the device the step runs on. Throws
  /// std::runtime_error when that device fails to give them.
  std::vector<rt::HostTensor> parameters() const;
  const std::vector<std::string> &parameterNames() const { return paramNames_; }
  /// The moving averages of the parameters (TrainConfig::emaMomentum; empty without), in
  /// parameterNames() order: what evaluation runs on (the parameters themselves before the
  /// first update).
  std::vector<rt::HostTensor> averagedParameters() const;
  /// The model's variables (Graph::variable: moving averages...), as the last step left them
  /// (host copies, as parameters()).
  std::vector<rt::HostTensor> variables() const;
  const std::vector<std::string> &variableNames() const { return variableNames_; }
  int64_t globalStep() const { return step_; }
  /// The learning rate the next training step gets (the schedule at globalStep()).
  double learningRate() const;
  /// The rate `optimizer` (TrainConfig's, or a group's) gives training step `step`.
  double rateAt(const OptimizerConfig &optimizer, int64_t step) const;
  /// TrainConfig::optimizer, then each parameter group's: the steps' learning-rate inputs.
  std::vector<const OptimizerConfig *> optimizers() const;
  /// The model's metric names, in the order Metrics::values has them.
  const std::vector<std::string> &metricNames() const { return metricNames_; }
  const TrainConfig &config() const { return config_; }
  /// What this process's first replica's last full-batch training step copied between host
  /// and device and how often it waited for a GPU (rt::Executor::lastRunTransfers); zero when
  /// the step runs on the CPU or has not run.
  rt::TransferStats lastStepTransfers() const { return replicas_[0].trainStep->lastRunTransfers(); }
  /// How many full-batch training steps the first replica ran: 1 means lastStepTransfers()
  /// counts a first step, with the state's upload and no CUDA graph yet.
  int64_t fullBatchSteps() const { return replicas_[0].trainStepRuns; }
  /// Steps (kernels, library calls, collectives) one training step runs.
  size_t stepCount() const { return replicas_[0].trainStep->executable().steps.size(); }
  /// The training step each replica runs.
  const rt::Executable &trainStepExecutable() const {
    return replicas_[0].trainStep->executable();
  }
  /// Where the training step's ops run (smelt-place-devices' summary).
  const std::string &placement() const { return trainStepExecutable().placement; }
  /// The devices of this process's replicas, in replica order ({"gpu:0", "gpu:1"}; "cpu:0"
  /// when the step runs on the CPU).
  std::vector<std::string> replicaDevices() const;
  /// How replicas on GPUs all-reduce ("NCCL 2.28.9 over gpu:0, gpu:1", or "through host copies
  /// (why)"); empty when the step is on the CPU or runs alone.
  const std::string &gpuCollectives() const { return gpuCollectives_; }
  /// Whether the replicas all-reduce GPU memory (an NCCL group) rather than through the host.
  bool reducesOnGpus() const {
    return replicas_[0].communicator && replicas_[0].communicator->cudaDevice() >= 0;
  }

private:
  /// One data-parallel replica this process runs: its step, communicator and variables.
  struct Replica {
    int64_t index = 0;
    /// Where its training step runs: the step's GPU, moved to the replica's own.
    std::string device = "cpu:0";
    std::unique_ptr<rt::Communicator> ownCommunicator; // of the LocalGroup or the GPU group
    rt::Communicator *communicator = nullptr;
    std::unique_ptr<rt::Executor> trainStep;
    /// How many times trainStep ran: its first run uploads the state and (on a GPU) launches
    /// its steps one by one, so it is no steady-state step.
    int64_t trainStepRuns = 0;
    /// The step compiled for a short last batch (its size), when an epoch needed one.
    std::unique_ptr<rt::Executor> shortStep;
    int64_t shortBatch = 0;
    /// Between steps, on the step's device: the step's outputs kept there (DeviceArray) and
    /// donated to the next step, so that a GPU step moves only its batch, rates, loss and
    /// metrics. Host tensors before the first step, after a restore, and on the CPU.
    std::vector<rt::Value> params, variables, state;
  };
  /// A model argument of the steps: which parameter or variable.
  struct ModelArg {
    bool variable;
    size_t index;
  };

  Trainer() = default;
  /// initParameters' body: takes the parameters and the variables `tensors` has out of it;
  /// what is left is an error unless `extraAllowed`.
  rt::Status initFrom(std::map<std::string, rt::HostTensor *> &tensors, const std::string &source,
                      bool extraAllowed);
  /// Gives each replica its device and, on GPUs, the communicators config_.gpuGroup makes.
  rt::Status placeReplicas(const rt::Executable &step);
  /// Ends every replica's collectives after one failed: the others fail instead of waiting.
  void abortReplicas(const std::string &message);
  rt::Expected<rt::Executor *> evalExecutor(int64_t batch);
  std::string modelArgName(const ModelArg &arg) const;
  /// Replaces every replica's parameters or variables (`member`) with `values` after checking
  /// their count and types (the last replica takes `values`, the others copies); `what`
  /// ("parameter", "variable") and `names` make the errors.
  rt::Status replaceInReplicas(std::vector<rt::Value> Replica::*member,
                               std::vector<rt::HostTensor> values,
                               const std::vector<std::string> &names, const char *what);
  /// Appends `r`'s parameters (their moving averages with `averaged`) and variables in the
  /// steps' argument order.
  void addModelArguments(Replica &r, std::vector<rt::Value *> &args, bool averaged = false);
  /// Replica `r`'s step for a batch of `share` examples: its usual one, or one compiled for
  /// the epoch's short last batch.
  rt::Expected<rt::Executor *> trainExecutor(Replica &r, int64_t share);
  /// An executor of a training step for replica `r`: moved to its GPU, reducing over its
  /// communicator.
  rt::Expected<std::unique_ptr<rt::Executor>> replicaExecutor(const rt::Executable &step,
                                                              const Replica &r) const;
  /// Compiles every replica's step for a short last batch of `share` examples each.
  rt::Status compileShortSteps(int64_t share);
  /// Runs replica `r`'s share of the epoch's global batches in `order`: `steps` full ones,
  /// then `lastBatch` examples (0: none) in one more.
  rt::Status trainReplica(Replica &r, const data::Dataset &data, const std::vector<int64_t> &order,
                          int64_t steps, int64_t lastBatch, Metrics &running,
                          const std::function<void(int64_t, int64_t, const Metrics &)> &progress);

  TrainConfig config_;
  /// Made from config_.cache; null without one.
  std::unique_ptr<codegen::JitCache> cache_;
  std::unique_ptr<mlir::MLIRContext> context_;
  std::unique_ptr<rt::LocalGroup> group_;
  std::vector<Replica> replicas_;
  std::map<int64_t, std::unique_ptr<rt::Executor>> evalSteps_;
  std::vector<std::string> paramNames_, variableNames_, stateNames_, metricNames_;
  /// The steps' parameter and variable arguments, in order (after the batch, step and rate).
  std::vector<ModelArg> modelArgs_;
  /// Whether evaluation runs on the moving averages: there are some, and an update made them.
  rt::Expected<bool> averaging() const;
  /// Index in the optimizer state of each parameter's moving average (emaMomentum > 0), and
  /// of their update count.
  std::vector<size_t> averageSlots_;
  size_t averageUpdatesSlot_ = 0;
  int64_t step_ = 0;
  std::string gpuCollectives_;
  /// Index in state_ of the loss scale (mixed_f16), else -1.
  int64_t lossScaleSlot_ = -1;
};

} // namespace smelt::train
