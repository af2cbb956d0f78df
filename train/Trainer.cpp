// The trainer: graph construction for the two models, compilation, the epoch loop, evaluation
// and checkpoints.
#include "train/Trainer.h"

#include "codegen/Compile.h"
#include "frontend/Layers.h"
#include "frontend/Models.h"
#include "runtime/Safetensors.h"

#include "mlir/IR/Diagnostics.h"

#include <fmt/format.h>

namespace smelt::train {

namespace {

/// Logits of the configured model for [batch, 784] images.
Tensor buildModel(Graph &g, const TrainConfig &config, Tensor images, bool training,
                  std::optional<Tensor> step) {
  if (config.model == "cnn") {
    Tensor x = reshape(images, {images.dim(0), 28, 28, 1});
    x = conv2dLayer(x, 32, {3, 3}, "conv1", {1, 1}, Padding::Same, Activation::Relu);
    x = maxPool(x, {2, 2}, {2, 2});
    x = conv2dLayer(x, 64, {3, 3}, "conv2", {1, 1}, Padding::Same, Activation::Relu);
    x = maxPool(x, {2, 2}, {2, 2});
    x = dropout(flatten(x), config.dropout, config.seed + 101, training, step);
    return dense(x, 10, "logits");
  }
  return mlpClassifier(g, images, {784, 512, 256, 10}, config.dropout, training,
                       config.seed + 101, step);
}

/// Compiles `function` of `graph`, turning diagnostics into the Status message.
rt::Expected<std::unique_ptr<rt::CpuExecutor>> compileFunction(Graph &graph,
                                                               const std::string &function,
                                                               const TrainConfig &config) {
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&graph.context(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  codegen::CompileOptions options = config.compile;
  options.pipeline = config.pipeline;
  mlir::FailureOr<rt::Executable> exe = codegen::compile(graph.module(), function, options);
  if (failed(exe))
    return rt::Status::error("compiling @" + function + ": " + diagnostics);
  rt::Expected<rt::CpuExecutor> cpu = rt::CpuExecutor::create(*exe, options.trace);
  if (!cpu)
    return cpu.status();
  return std::make_unique<rt::CpuExecutor>(std::move(*cpu));
}

std::string argName(Graph &g, unsigned i) {
  auto name = g.function().getArgAttrOfType<mlir::StringAttr>(i, "smelt.name");
  return name ? name.str() : "arg" + std::to_string(i);
}

rt::HostTensor scalarI64(int64_t v) {
  rt::HostTensor t = rt::HostTensor::zeros({rt::DType::i64, {}});
  *t.data<int64_t>() = v;
  return t;
}

} // namespace

std::unique_ptr<Graph> buildTrainStep(mlir::MLIRContext &context, const TrainConfig &config) {
  auto graph = std::make_unique<Graph>(context, "train_step", config.seed);
  Graph &g = *graph;
  Tensor images = g.input("images", {config.batch, 784});
  Tensor labels = g.input("labels", {config.batch}, DType::i32);
  Tensor step = g.input("step", {}, DType::i64);
  Tensor logits = buildModel(g, config, images, /*training=*/true, step);
  Tensor loss = sparseSoftmaxCrossEntropy(logits, labels);
  Tensor acc = accuracy(logits, labels);
  g.applyPrecision(config.precision);
  std::vector<Tensor> params = g.parameterTensors();
  std::vector<Tensor> outputs;
  if (config.precision == PrecisionPolicy::mixed_f16) {
    ScaledUpdate update =
        applyOptimizerWithLossScaling(g, config.optimizer, config.lossScale, loss, params);
    outputs = update.newParams;
    outputs.insert(outputs.end(), update.newState.begin(), update.newState.end());
    outputs.insert(outputs.end(), {loss, acc, update.skipped});
  } else {
    std::vector<Tensor> grads = g.gradients(loss, params);
    OptimizerUpdate update = applyOptimizer(g, config.optimizer, params, grads);
    outputs = update.newParams;
    outputs.insert(outputs.end(), update.newState.begin(), update.newState.end());
    outputs.insert(outputs.end(), {loss, acc});
  }
  g.setOutputs(outputs);
  g.buildInitializer();
  return graph;
}

rt::Expected<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig &config) {
  if (config.model != "mlp" && config.model != "cnn")
    return rt::Status::error("unknown model '" + config.model + "' (mlp or cnn)");
  if (config.batch < 1 || config.evalBatch < 1)
    return rt::Status::error("batch sizes must be positive");
  std::unique_ptr<Trainer> trainer(new Trainer());
  trainer->config_ = config;
  trainer->context_ = std::make_unique<mlir::MLIRContext>();
  try {
    // The training step: (images, labels, step, params..., state...) ->
    // (params..., state..., loss, accuracy).
    std::unique_ptr<Graph> graph = buildTrainStep(*trainer->context_, config);
    Graph &g = *graph;
    unsigned firstParam = 3, firstState = firstParam + unsigned(g.parameters().size());
    for (unsigned i = firstParam; i < g.function().getNumArguments(); ++i)
      (i < firstState ? trainer->paramNames_ : trainer->stateNames_).push_back(argName(g, i));
    // Optimizer state starts at zero, the loss scale at its initial value.
    for (unsigned i = firstState; i < g.function().getNumArguments(); ++i) {
      auto type = mlir::cast<mlir::RankedTensorType>(g.function().getArgument(i).getType());
      trainer->state_.push_back(
          rt::HostTensor::zeros({rt::DType::f32, std::vector<int64_t>(type.getShape())}));
      if (argName(g, i) == "loss_scale/scale") {
        *trainer->state_.back().data<float>() = float(config.lossScale.initialScale);
        trainer->lossScaleSlot_ = int64_t(trainer->state_.size()) - 1;
      }
    }
    auto init = compileFunction(g, "train_step_init", config);
    if (!init)
      return init.status();
    if (rt::Status s = (*init)->run(std::vector<rt::HostTensor>{}, trainer->params_); !s.ok())
      return s;
    auto train = compileFunction(g, "train_step", config);
    if (!train)
      return train.status();
    trainer->trainStep_ = std::move(*train);
  } catch (const BuildError &e) {
    return rt::Status::error(std::string("building the training step: ") + e.what());
  }
  return trainer;
}

rt::Expected<rt::CpuExecutor *> Trainer::evalExecutor(int64_t batch) {
  auto it = evalSteps_.find(batch);
  if (it != evalSteps_.end())
    return it->second.get();
  try {
    Graph g(*context_, "eval_step", config_.seed);
    Tensor images = g.input("images", {batch, 784});
    Tensor labels = g.input("labels", {batch}, DType::i32);
    Tensor logits = buildModel(g, config_, images, /*training=*/false, std::nullopt);
    Tensor loss = sparseSoftmaxCrossEntropy(logits, labels);
    Tensor acc = accuracy(logits, labels);
    g.applyPrecision(config_.precision);
    g.setOutputs({loss, acc});
    auto exe = compileFunction(g, "eval_step", config_);
    if (!exe)
      return exe.status();
    return (evalSteps_[batch] = std::move(*exe)).get();
  } catch (const BuildError &e) {
    return rt::Status::error(std::string("building the evaluation step: ") + e.what());
  }
}

rt::Expected<Metrics>
Trainer::trainEpoch(const rt::Dataset &data, int64_t epoch,
                    const std::function<void(int64_t, int64_t, const Metrics &)> &progress) {
  rt::BatchStream stream(data, data.epochOrder(config_.seed, epoch, /*shuffle=*/true),
                         config_.batch, /*dropRemainder=*/true);
  Metrics running;
  size_t paramCount = params_.size(), stateCount = state_.size();
  std::vector<rt::HostTensor> outputs;
  for (int64_t i = 0; std::optional<rt::Batch> batch = stream.next(); ++i) {
    rt::HostTensor step = scalarI64(step_);
    std::vector<const rt::HostTensor *> args = {&batch->examples, &batch->labels, &step};
    for (const rt::HostTensor &p : params_)
      args.push_back(&p);
    for (const rt::HostTensor &s : state_)
      args.push_back(&s);
    if (rt::Status s = trainStep_->run(args, outputs); !s.ok())
      return s;
    // The step's outputs replace the parameters and state; the old buffers are freed here.
    for (size_t k = 0; k < paramCount; ++k)
      params_[k] = std::move(outputs[k]);
    for (size_t k = 0; k < stateCount; ++k)
      state_[k] = std::move(outputs[paramCount + k]);
    double loss = outputs[paramCount + stateCount].at(0);
    double acc = outputs[paramCount + stateCount + 1].at(0);
    if (lossScaleSlot_ >= 0) {
      running.skippedSteps += outputs[paramCount + stateCount + 2].at(0) != 0;
      running.lossScale = state_[lossScaleSlot_].at(0);
    }
    int64_t n = batch->labels.type().shape[0];
    running.loss = (running.loss * running.examples + loss * n) / (running.examples + n);
    running.accuracy = (running.accuracy * running.examples + acc * n) / (running.examples + n);
    running.examples += n;
    ++step_;
    if (progress)
      progress(i + 1, stream.batchCount(), running);
  }
  return running;
}

rt::Expected<Metrics> Trainer::evaluate(const rt::Dataset &data) {
  Metrics total;
  std::vector<int64_t> order = data.epochOrder(config_.seed, 0, /*shuffle=*/false);
  int64_t batches = data.batchCount(config_.evalBatch, /*dropRemainder=*/false);
  for (int64_t i = 0; i < batches; ++i) {
    rt::Batch batch = data.batch(order, config_.evalBatch, i);
    int64_t n = batch.labels.type().shape[0];
    rt::Expected<rt::CpuExecutor *> exe = evalExecutor(n);
    if (!exe)
      return exe.status();
    std::vector<const rt::HostTensor *> args = {&batch.examples, &batch.labels};
    for (const rt::HostTensor &p : params_)
      args.push_back(&p);
    std::vector<rt::HostTensor> out;
    if (rt::Status s = (*exe)->run(args, out); !s.ok())
      return s;
    total.loss += out[0].at(0) * n;
    total.accuracy += out[1].at(0) * n;
    total.examples += n;
  }
  total.loss /= double(total.examples);
  total.accuracy /= double(total.examples);
  return total;
}

rt::Status Trainer::save(const std::string &path, int64_t epochsDone) const {
  rt::Checkpoint checkpoint;
  for (size_t i = 0; i < params_.size(); ++i)
    checkpoint.tensors.push_back({paramNames_[i], params_[i]});
  for (size_t i = 0; i < state_.size(); ++i)
    checkpoint.tensors.push_back({stateNames_[i], state_[i]});
  checkpoint.metadata = {{"format", "smelt-checkpoint-1"},
                         {"model", config_.model},
                         {"precision", precisionPolicyName(config_.precision).str()},
                         {"epochs_done", std::to_string(epochsDone)},
                         {"global_step", std::to_string(step_)},
                         {"seed", std::to_string(config_.seed)},
                         {"batch", std::to_string(config_.batch)}};
  return rt::writeSafetensors(path, checkpoint);
}

rt::Expected<int64_t> Trainer::load(const std::string &path) {
  rt::Expected<rt::Checkpoint> checkpoint = rt::readSafetensors(path);
  if (!checkpoint)
    return checkpoint.status();
  auto meta = [&](const char *key) {
    auto it = checkpoint->metadata.find(key);
    return it == checkpoint->metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != "smelt-checkpoint-1" || meta("model") != config_.model)
    return rt::Status::error(fmt::format("{}: not a checkpoint of this model (format '{}', "
                                         "model '{}', expected smelt-checkpoint-1 of '{}')",
                                         path, meta("format"), meta("model"), config_.model));
  std::map<std::string, rt::HostTensor *> byName;
  for (rt::NamedTensor &t : checkpoint->tensors)
    byName[t.name] = &t.tensor;
  auto restore = [&](const std::vector<std::string> &names,
                     std::vector<rt::HostTensor> &into) -> rt::Status {
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = byName.find(names[i]);
      if (it == byName.end())
        return rt::Status::error(fmt::format("{}: tensor '{}' is missing", path, names[i]));
      if (it->second->type() != into[i].type())
        return rt::Status::error(fmt::format("{}: tensor '{}' is {}, the model needs {}", path,
                                             names[i], it->second->type().str(),
                                             into[i].type().str()));
      into[i] = std::move(*it->second);
    }
    return rt::Status();
  };
  if (rt::Status s = restore(paramNames_, params_); !s.ok())
    return s;
  if (rt::Status s = restore(stateNames_, state_); !s.ok())
    return s;
  step_ = std::stoll(meta("global_step").empty() ? "0" : meta("global_step"));
  return std::stoll(meta("epochs_done").empty() ? "0" : meta("epochs_done"));
}

} // namespace smelt::train
