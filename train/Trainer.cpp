// The trainer: graph construction for the two models, compilation, the epoch loop, evaluation
// and checkpoints.
#include "train/Trainer.h"

#include "codegen/Compile.h"
#include "frontend/DataParallel.h"
#include "frontend/Layers.h"
#include "frontend/Models.h"
#include "runtime/Devices.h"
#include "train/Checkpoint.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <thread>

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

/// Compiles `function` of `graph`, through `cache` when there is one, turning diagnostics into
/// the Status message.
rt::Expected<rt::Executable> compileExecutable(Graph &graph, const std::string &function,
                                               const TrainConfig &config,
                                               codegen::JitCache *cache) {
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(&graph.context(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto failed = [&] { return rt::Status::error("compiling @" + function + ": " + diagnostics); };
  if (cache) {
    mlir::FailureOr<std::shared_ptr<const rt::Executable>> exe =
        cache->get(graph.module(), function);
    if (mlir::failed(exe))
      return failed();
    return rt::Executable(**exe);
  }
  codegen::CompileOptions options = config.compile;
  options.pipeline = config.pipeline;
  mlir::FailureOr<rt::Executable> exe = codegen::compile(graph.module(), function, options);
  if (mlir::failed(exe))
    return failed();
  return std::move(*exe);
}

/// The executor of `exe` for a replica reducing over `communicator` (null: alone).
rt::Expected<std::unique_ptr<rt::Executor>> makeExecutor(const rt::Executable &exe,
                                                         const TrainConfig &config,
                                                         rt::Communicator *communicator) {
  rt::ExecutorOptions options = config.executor;
  options.trace = config.compile.trace;
  options.communicator = communicator;
  return rt::Executor::create(exe, options);
}

rt::Expected<std::unique_ptr<rt::Executor>> compileFunction(Graph &graph,
                                                            const std::string &function,
                                                            const TrainConfig &config,
                                                            codegen::JitCache *cache) {
  rt::Expected<rt::Executable> exe = compileExecutable(graph, function, config, cache);
  if (!exe)
    return exe.status();
  return makeExecutor(*exe, config, nullptr);
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
  // One replica's share of the global batch; gradients and metrics are averaged over all.
  int64_t replicas = config.replicas, batch = config.batch / config.replicas;
  Tensor images = g.input("images", {batch, 784});
  Tensor labels = g.input("labels", {batch}, DType::i32);
  Tensor step = g.input("step", {}, DType::i64);
  Tensor logits =
      buildModel(g, config, images, /*training=*/true, replicaStreamOffset(step, replicas));
  Tensor loss = sparseSoftmaxCrossEntropy(logits, labels);
  Tensor acc = accuracy(logits, labels);
  g.applyPrecision(config.precision);
  std::vector<Tensor> params = g.parameterTensors();
  std::vector<Tensor> outputs;
  std::vector<Tensor> metrics = crossReplicaMean({loss, acc}, replicas);
  if (config.precision == PrecisionPolicy::mixed_f16) {
    ScaledUpdate update = applyOptimizerWithLossScaling(g, config.optimizer, config.lossScale,
                                                        loss, params, replicas);
    outputs = update.newParams;
    outputs.insert(outputs.end(), update.newState.begin(), update.newState.end());
    outputs.insert(outputs.end(), {metrics[0], metrics[1], update.skipped});
  } else {
    std::vector<Tensor> grads = crossReplicaMean(g.gradients(loss, params), replicas);
    OptimizerUpdate update = applyOptimizer(g, config.optimizer, params, grads);
    outputs = update.newParams;
    outputs.insert(outputs.end(), update.newState.begin(), update.newState.end());
    outputs.insert(outputs.end(), {metrics[0], metrics[1]});
  }
  g.setOutputs(outputs);
  g.buildInitializer();
  return graph;
}

std::unique_ptr<Graph> buildEvalStep(mlir::MLIRContext &context, const TrainConfig &config,
                                     int64_t batch) {
  auto graph = std::make_unique<Graph>(context, "eval_step", config.seed);
  Graph &g = *graph;
  Tensor images = g.input("images", {batch, 784});
  Tensor labels = g.input("labels", {batch}, DType::i32);
  Tensor logits = buildModel(g, config, images, /*training=*/false, std::nullopt);
  Tensor loss = sparseSoftmaxCrossEntropy(logits, labels);
  Tensor acc = accuracy(logits, labels);
  g.applyPrecision(config.precision);
  g.setOutputs({loss, acc});
  return graph;
}

rt::Expected<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig &config) {
  if (config.model != "mlp" && config.model != "cnn")
    return rt::Status::error("unknown model '" + config.model + "' (mlp or cnn)");
  if (config.batch < 1 || config.evalBatch < 1)
    return rt::Status::error("batch sizes must be positive");
  if (config.replicas < 1 || config.batch % config.replicas != 0)
    return rt::Status::error(fmt::format("the global batch {} does not split evenly over {} "
                                         "replicas",
                                         config.batch, config.replicas));
  if (config.communicator && config.communicator->size() != config.replicas)
    return rt::Status::error(fmt::format("{} has {} replicas, the configuration asks for {}",
                                         config.communicator->describe(),
                                         config.communicator->size(), config.replicas));
  std::unique_ptr<Trainer> trainer(new Trainer());
  trainer->config_ = config;
  trainer->context_ = std::make_unique<mlir::MLIRContext>();
  if (config.cache) {
    codegen::JitOptions options = *config.cache;
    options.compile = config.compile;
    options.compile.pipeline = config.pipeline;
    options.target = codegen::jitTarget(options.compile);
    trainer->cache_ = std::make_unique<codegen::JitCache>(std::move(options));
  }
  // This process's replicas: one of an MPI group, or all of them on threads.
  if (config.communicator) {
    Replica &r = trainer->replicas_.emplace_back();
    r.index = config.communicator->rank();
    r.communicator = config.communicator;
  } else {
    if (config.replicas > 1)
      trainer->group_ = std::make_unique<rt::LocalGroup>(int(config.replicas), config.collectives);
    for (int64_t i = 0; i < config.replicas; ++i) {
      Replica &r = trainer->replicas_.emplace_back();
      r.index = i;
      if (trainer->group_) {
        r.ownCommunicator = trainer->group_->communicator(int(i));
        r.communicator = r.ownCommunicator.get();
      }
    }
  }
  try {
    // The training step: (images, labels, step, params..., state...) ->
    // (params..., state..., loss, accuracy).
    std::unique_ptr<Graph> graph = buildTrainStep(*trainer->context_, config);
    Graph &g = *graph;
    unsigned firstParam = 3, firstState = firstParam + unsigned(g.parameters().size());
    for (unsigned i = firstParam; i < g.function().getNumArguments(); ++i)
      (i < firstState ? trainer->paramNames_ : trainer->stateNames_).push_back(argName(g, i));
    // Optimizer state starts at zero, the loss scale at its initial value.
    std::vector<rt::HostTensor> state;
    for (unsigned i = firstState; i < g.function().getNumArguments(); ++i) {
      auto type = mlir::cast<mlir::RankedTensorType>(g.function().getArgument(i).getType());
      state.push_back(
          rt::HostTensor::zeros({rt::DType::f32, std::vector<int64_t>(type.getShape())}));
      if (argName(g, i) == "loss_scale/scale") {
        *state.back().data<float>() = float(config.lossScale.initialScale);
        trainer->lossScaleSlot_ = int64_t(state.size()) - 1;
      }
    }
    // Every replica starts from the same parameters: the initializer is seeded.
    auto init = compileFunction(g, "train_step_init", config, trainer->cache_.get());
    if (!init)
      return init.status();
    std::vector<rt::HostTensor> params;
    if (rt::Status s = (*init)->run(std::vector<rt::HostTensor>{}, params); !s.ok())
      return s;
    rt::Expected<rt::Executable> step =
        compileExecutable(g, "train_step", config, trainer->cache_.get());
    if (!step)
      return step.status();
    if (rt::Status s = trainer->placeReplicas(*step); !s.ok())
      return s;
    for (Replica &r : trainer->replicas_) {
      // A step on the CPU has nothing on gpu:0 to move.
      auto executor =
          makeExecutor(rt::movedToDevice(*step, "gpu:0", r.device), config, r.communicator);
      if (!executor)
        return executor.status();
      r.trainStep = std::move(*executor);
      for (const rt::HostTensor &p : params)
        r.params.push_back(p);
      for (const rt::HostTensor &t : state)
        r.state.push_back(t);
    }
  } catch (const BuildError &e) {
    return rt::Status::error(std::string("building the training step: ") + e.what());
  }
  return trainer;
}

rt::Status Trainer::placeReplicas(const rt::Executable &step) {
  std::set<std::string> stepGpus;
  for (const rt::Step &s : step.steps)
    if (rt::gpuIndex(s.device) >= 0)
      stepGpus.insert(s.device);
  if (stepGpus.empty())
    return rt::Status();
  for (Replica &r : replicas_)
    r.device = "gpu:0";
  if (config_.replicas == 1)
    return rt::Status();
  if (stepGpus != std::set<std::string>{"gpu:0"})
    return rt::Status::error(fmt::format(
        "the training step runs on {}; replicas each take one GPU, so place it on gpu:0 alone",
        fmt::join(stepGpus, ", ")));
  if (!config_.communicator) {
    std::vector<std::string> gpus;
    for (llvm::StringRef device : llvm::split(config_.pipeline.devices, ','))
      if (rt::gpuIndex(device.str()) >= 0)
        gpus.push_back(device.str());
    if (gpus.size() < replicas_.size())
      return rt::Status::error(fmt::format(
          "{} replicas run one per GPU, and there {} {} ({}); --logical-gpus splits one GPU "
          "into several",
          replicas_.size(), gpus.size() == 1 ? "is" : "are", gpus.size(), fmt::join(gpus, ", ")));
    for (Replica &r : replicas_)
      r.device = gpus[size_t(r.index)];
  }
  if (!config_.gpuGroup) {
    gpuCollectives_ = "through host copies (no GPU collectives in this build)";
    return rt::Status();
  }
  rt::Expected<rt::DeviceGroup> group =
      config_.gpuGroup(replicaDevices(), config_.communicator, config_.collectives);
  if (!group)
    return group.status();
  gpuCollectives_ = group->summary;
  if (group->communicators.empty())
    return rt::Status();
  if (group->communicators.size() != replicas_.size())
    return rt::Status::error(fmt::format("the GPU group has {} communicators for {} replicas",
                                         group->communicators.size(), replicas_.size()));
  for (size_t i = 0; i < replicas_.size(); ++i) {
    replicas_[i].ownCommunicator = std::move(group->communicators[i]);
    replicas_[i].communicator = replicas_[i].ownCommunicator.get();
  }
  group_.reset(); // its communicators are gone
  return rt::Status();
}

std::vector<std::string> Trainer::replicaDevices() const {
  std::vector<std::string> devices;
  for (const Replica &r : replicas_)
    devices.push_back(r.device);
  return devices;
}

void Trainer::abortReplicas(const std::string &message) {
  if (group_) {
    group_->abort(message);
    return;
  }
  for (Replica &r : replicas_)
    if (r.ownCommunicator)
      r.ownCommunicator->abort(message);
}

rt::Expected<rt::Executor *> Trainer::evalExecutor(int64_t batch) {
  auto it = evalSteps_.find(batch);
  if (it != evalSteps_.end())
    return it->second.get();
  try {
    std::unique_ptr<Graph> g = buildEvalStep(*context_, config_, batch);
    auto exe = compileFunction(*g, "eval_step", config_, cache_.get());
    if (!exe)
      return exe.status();
    return (evalSteps_[batch] = std::move(*exe)).get();
  } catch (const BuildError &e) {
    return rt::Status::error(std::string("building the evaluation step: ") + e.what());
  }
}

rt::Status
Trainer::trainReplica(Replica &r, const data::Dataset &data, const std::vector<int64_t> &order,
                      int64_t steps, Metrics &running,
                      const std::function<void(int64_t, int64_t, const Metrics &)> &progress) {
  // The replica's shard: its slice of every global batch, in order.
  int64_t global = config_.batch, share = global / config_.replicas;
  std::vector<int64_t> shard;
  shard.reserve(size_t(steps * share));
  for (int64_t i = 0; i < steps; ++i) {
    auto first = order.begin() + i * global + r.index * share;
    shard.insert(shard.end(), first, first + share);
  }
  data::BatchStream stream(data, std::move(shard), share, /*dropRemainder=*/true);
  size_t paramCount = r.params.size(), stateCount = r.state.size();
  std::vector<rt::HostTensor> outputs;
  for (int64_t i = 0; std::optional<data::Batch> batch = stream.next(); ++i) {
    rt::HostTensor step = scalarI64(step_ + i);
    std::vector<const rt::HostTensor *> args = {&batch->examples, &batch->labels, &step};
    for (const rt::HostTensor &p : r.params)
      args.push_back(&p);
    for (const rt::HostTensor &s : r.state)
      args.push_back(&s);
    if (rt::Status s = r.trainStep->run(args, outputs); !s.ok())
      return rt::Status::error(rt::namingReplica(r.communicator, s.message()));
    // The step's outputs replace the parameters and state. Swapped, not moved: the old
    // tensors become the next step's output memory, so steady-state steps allocate and copy
    // none of them (the executor writes the new values straight in).
    for (size_t k = 0; k < paramCount; ++k)
      std::swap(r.params[k], outputs[k]);
    for (size_t k = 0; k < stateCount; ++k)
      std::swap(r.state[k], outputs[paramCount + k]);
    // Every replica computes the same metrics (averaged in the step); the first reports.
    if (&r != &replicas_[0])
      continue;
    double loss = outputs[paramCount + stateCount].at(0);
    double acc = outputs[paramCount + stateCount + 1].at(0);
    if (lossScaleSlot_ >= 0) {
      running.skippedSteps += outputs[paramCount + stateCount + 2].at(0) != 0;
      running.lossScale = r.state[lossScaleSlot_].at(0);
    }
    int64_t n = global;
    running.loss = (running.loss * running.examples + loss * n) / (running.examples + n);
    running.accuracy = (running.accuracy * running.examples + acc * n) / (running.examples + n);
    running.examples += n;
    if (progress)
      progress(i + 1, steps, running);
  }
  return rt::Status();
}

rt::Expected<Metrics>
Trainer::trainEpoch(const data::Dataset &data, int64_t epoch,
                    const std::function<void(int64_t, int64_t, const Metrics &)> &progress) {
  std::vector<int64_t> order = data.epochOrder(config_.seed, epoch, /*shuffle=*/true);
  int64_t steps = data.batchCount(config_.batch, /*dropRemainder=*/true);
  Metrics running;
  if (replicas_.size() == 1) {
    if (rt::Status s = trainReplica(replicas_[0], data, order, steps, running, progress);
        !s.ok())
      return s;
  } else {
    // One thread per replica; a replica that fails aborts the group so that the others'
    // collectives fail instead of waiting for it, and its error (the first) is reported.
    std::vector<rt::Status> results(replicas_.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < replicas_.size(); ++i)
      threads.emplace_back([&, i] {
        results[i] = trainReplica(replicas_[i], data, order, steps, running, progress);
        if (!results[i].ok())
          abortReplicas(results[i].message());
      });
    for (std::thread &t : threads)
      t.join();
    for (const rt::Status &s : results)
      if (!s.ok())
        return s;
  }
  step_ += steps;
  return running;
}

rt::Expected<Metrics> Trainer::evaluate(const data::Dataset &data) {
  // Under MPI each process takes every size()-th batch and the sums are all-reduced; in one
  // process the first replica's parameters (every replica's are the same) see all batches.
  int rank = 0, processes = 1;
  if (config_.communicator) {
    rank = config_.communicator->rank();
    processes = config_.communicator->size();
  }
  std::vector<int64_t> order = data.epochOrder(config_.seed, 0, /*shuffle=*/false);
  int64_t batches = data.batchCount(config_.evalBatch, /*dropRemainder=*/false);
  double sums[3] = {0, 0, 0}; // loss * n, accuracy * n, n
  for (int64_t i = rank; i < batches; i += processes) {
    data::Batch batch = data.batch(order, config_.evalBatch, i);
    int64_t n = batch.labels.type().shape[0];
    rt::Expected<rt::Executor *> exe = evalExecutor(n);
    if (!exe)
      return exe.status();
    std::vector<const rt::HostTensor *> args = {&batch.examples, &batch.labels};
    for (const rt::HostTensor &p : replicas_[0].params)
      args.push_back(&p);
    std::vector<rt::HostTensor> out;
    if (rt::Status s = (*exe)->run(args, out); !s.ok())
      return s;
    sums[0] += out[0].at(0) * double(n);
    sums[1] += out[1].at(0) * double(n);
    sums[2] += double(n);
  }
  if (config_.communicator)
    if (rt::Status s = config_.communicator->allReduce(sums, 3, rt::DType::f64,
                                                       rt::ReduceKind::sum, "evaluation sums");
        !s.ok())
      return s;
  Metrics total;
  total.examples = int64_t(sums[2]);
  total.loss = sums[0] / sums[2];
  total.accuracy = sums[1] / sums[2];
  return total;
}

rt::Status Trainer::save(const std::string &path, int64_t epochsDone) const {
  std::vector<data::NamedTensor> tensors;
  const Replica &r = replicas_[0];
  for (size_t i = 0; i < r.params.size(); ++i)
    tensors.push_back({paramNames_[i], r.params[i]});
  for (size_t i = 0; i < r.state.size(); ++i)
    tensors.push_back({stateNames_[i], r.state[i]});
  CheckpointInfo info{config_.model, precisionPolicyName(config_.precision).str(), epochsDone,
                      step_, config_.batch, config_.seed};
  return saveCheckpoint(path, std::move(tensors), info);
}

rt::Status Trainer::initParameters(const std::string &path) {
  rt::Expected<data::Checkpoint> file = data::readSafetensors(path);
  if (!file)
    return file.status();
  std::map<std::string, rt::HostTensor *> byName;
  for (data::NamedTensor &t : file->tensors)
    byName[t.name] = &t.tensor;
  Replica &first = replicas_[0];
  std::vector<rt::HostTensor> params = first.params;
  for (size_t i = 0; i < paramNames_.size(); ++i) {
    auto it = byName.find(paramNames_[i]);
    if (it == byName.end())
      return rt::Status::error(fmt::format("{}: parameter '{}' of model '{}' is missing", path,
                                           paramNames_[i], config_.model));
    if (it->second->type() != params[i].type())
      return rt::Status::error(fmt::format("{}: tensor '{}' is {}, the parameter is {}", path,
                                           paramNames_[i], it->second->type().str(),
                                           params[i].type().str()));
    params[i] = std::move(*it->second);
    byName.erase(it);
  }
  if (!byName.empty())
    return rt::Status::error(fmt::format("{}: tensor '{}' is not a parameter of model '{}' (its "
                                         "parameters: {})",
                                         path, byName.begin()->first, config_.model,
                                         fmt::join(paramNames_, ", ")));
  for (Replica &replica : replicas_)
    replica.params = params;
  return rt::Status();
}

rt::Expected<int64_t> Trainer::load(const std::string &path) {
  rt::Expected<LoadedCheckpoint> checkpoint = loadCheckpoint(path);
  if (!checkpoint)
    return checkpoint.status();
  if (checkpoint->info.model != config_.model)
    return rt::Status::error(fmt::format("{}: a checkpoint of model '{}', this run trains '{}'",
                                         path, checkpoint->info.model, config_.model));
  std::map<std::string, rt::HostTensor *> byName;
  for (data::NamedTensor &t : checkpoint->tensors)
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
  Replica &first = replicas_[0];
  if (rt::Status s = restore(paramNames_, first.params); !s.ok())
    return s;
  if (rt::Status s = restore(stateNames_, first.state); !s.ok())
    return s;
  for (size_t i = 1; i < replicas_.size(); ++i) {
    for (size_t k = 0; k < first.params.size(); ++k)
      replicas_[i].params[k] = first.params[k];
    for (size_t k = 0; k < first.state.size(); ++k)
      replicas_[i].state[k] = first.state[k];
  }
  step_ = checkpoint->info.globalStep;
  return checkpoint->info.epochsDone;
}

} // namespace smelt::train
