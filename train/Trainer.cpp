// The trainer: compiling the steps (built in TrainStep.cpp), placing the replicas, the epoch
// loop, evaluation, parameters and checkpoints.
#include "train/Trainer.h"

#include "codegen/Compile.h"
#include "codegen/ValueLimit.h"
#include "runtime/Devices.h"
#include "train/BuiltinModels.h"
#include "train/Checkpoint.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <thread>

namespace smelt::train {

namespace {

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
  rt::Expected<rt::Executable> exe = [&]() -> rt::Expected<rt::Executable> {
    if (cache) {
      mlir::FailureOr<std::shared_ptr<const rt::Executable>> cached =
          cache->get(graph.module(), function);
      if (mlir::failed(cached))
        return failed();
      return rt::Executable(**cached);
    }
    codegen::CompileOptions options = config.compile;
    options.pipeline = config.pipeline;
    mlir::FailureOr<rt::Executable> compiled = codegen::compile(graph.module(), function, options);
    if (mlir::failed(compiled))
      return failed();
    return std::move(*compiled);
  }();
  // A value larger than any device's memory is refused, fused or not, as `smelt run` does.
  // The machine's devices are looked up once per process, not for each step compiled.
  static const std::vector<rt::DeviceInfo> machine = rt::discoverDevices(false).devices;
  auto func = graph.module().lookupSymbol<mlir::func::FuncOp>(function);
  if (exe && func &&
      mlir::failed(codegen::checkValuesFit(
          func, *exe,
          codegen::largestDeviceLimit(rt::logicalDevices(machine), config.pipeline.devices))))
    return failed();
  return exe;
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

rt::HostTensor scalarI64(int64_t v) {
  rt::HostTensor t = rt::HostTensor::zeros({rt::DType::i64, {}});
  *t.data<int64_t>() = v;
  return t;
}

rt::HostTensor scalarF32(double v) {
  rt::HostTensor t = rt::HostTensor::zeros({rt::DType::f32, {}});
  *t.data<float>() = float(v);
  return t;
}

/// Copies of `tensors` as host values, for a replica's state.
std::vector<rt::Value> hostValues(const std::vector<rt::HostTensor> &tensors) {
  return {tensors.begin(), tensors.end()};
}

/// The values of one of several replicas from `tensors`: copies, but the last replica takes the
/// tensors themselves, so a model's state is not held once more than there are replicas.
std::vector<rt::Value> replicaValues(std::vector<rt::HostTensor> &tensors, bool last) {
  if (!last)
    return hostValues(tensors);
  return {std::make_move_iterator(tensors.begin()), std::make_move_iterator(tensors.end())};
}

/// Host copies of `values`, wherever they are.
rt::Expected<std::vector<rt::HostTensor>> hostCopies(const std::vector<rt::Value> &values) {
  std::vector<rt::HostTensor> host;
  for (const rt::Value &v : values) {
    rt::Expected<rt::HostTensor> copy = v.toHost();
    if (!copy)
      return copy.status();
    host.push_back(std::move(*copy));
  }
  return host;
}

/// hostCopies() for the accessors that return tensors: a device that fails throws.
std::vector<rt::HostTensor> hostCopiesOrThrow(const std::vector<rt::Value> &values) {
  rt::Expected<std::vector<rt::HostTensor>> host = hostCopies(values);
  if (!host)
    throw std::runtime_error(host.message());
  return std::move(*host);
}

/// A loss or metric: outputs the step does not keep on its device come back as host tensors.
double hostScalar(const rt::Value &v) { return v.host()->at(0); }

/// What a failed step's message adds when it took state donated to it that it could not give
/// back: the trainer cannot go on from those values.
std::string lostState(const std::vector<rt::Value> &params, const std::vector<rt::Value> &variables,
                      const std::vector<rt::Value> &state) {
  for (const std::vector<rt::Value> *values : {&params, &variables, &state})
    for (const rt::Value &v : *values)
      if (const rt::DeviceArray *array = v.array(); array && !*array)
        return " (the step had taken over the parameters and optimizer state on its device, "
               "which are lost: restore the last checkpoint)";
  return "";
}

} // namespace

double Metrics::value(const std::string &name) const {
  for (const auto &[key, v] : values)
    if (key == name)
      return v;
  return std::numeric_limits<double>::quiet_NaN();
}

double Trainer::rateAt(const OptimizerConfig &optimizer, int64_t step) const {
  // With accumulation the schedule counts optimizer updates, not micro-steps.
  return optimizer.schedule.at(optimizer.learningRate, step / config_.accumulateSteps);
}

double Trainer::learningRate() const { return rateAt(config_.optimizer, step_); }

std::vector<const OptimizerConfig *> Trainer::optimizers() const {
  std::vector<const OptimizerConfig *> all = {&config_.optimizer};
  for (const ParameterGroup &group : config_.parameterGroups)
    all.push_back(&group.optimizer);
  return all;
}

rt::Expected<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig &requested) {
  // A built-in model is resolved here, once: every step built later (the short last batch's,
  // each evaluation batch size's) uses the ModelSpec itself.
  TrainConfig config = requested;
  if (!config.model.build) {
    rt::Expected<ModelSpec> builtin = builtinModel(config.model.name, config.dropout);
    if (!builtin)
      return builtin.status();
    config.model = std::move(*builtin);
  }
  if (std::string why = config.optimizer.schedule.check(); !why.empty())
    return rt::Status::error("the learning-rate schedule needs " + why);
  if (std::string why = checkParameterGroups(config.parameterGroups); !why.empty())
    return rt::Status::error(why);
  for (const ParameterGroup &group : config.parameterGroups)
    if (std::string why = group.optimizer.schedule.check(); !why.empty())
      return rt::Status::error("parameter group '" + group.name +
                               "': the learning-rate schedule needs " + why);
  if (config.emaMomentum < 0 || config.emaMomentum >= 1)
    return rt::Status::error(
        fmt::format("emaMomentum must be in [0, 1) (0: no moving average), got {}",
                    config.emaMomentum));
  if (config.accumulateSteps < 1)
    return rt::Status::error(fmt::format("accumulateSteps must be >= 1, got {}",
                                         config.accumulateSteps));
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
    // The training step: (examples, labels, step, learning_rate, the model's parameters and
    // variables in creation order..., optimizer state...) -> (params..., variables...,
    // state..., loss, metrics...).
    std::unique_ptr<Graph> graph = buildTrainStep(*trainer->context_, config);
    Graph &g = *graph;
    // After examples, labels, step and the learning rates.
    unsigned firstModelArg = unsigned(3 + trainer->optimizers().size());
    unsigned firstState = firstModelArg + unsigned(g.parameters().size());
    for (unsigned i = firstModelArg; i < firstState; ++i) {
      bool variable = bool(g.function().getArgAttr(i, "smelt.variable"));
      std::vector<std::string> &names = variable ? trainer->variableNames_ : trainer->paramNames_;
      trainer->modelArgs_.push_back({variable, names.size()});
      names.push_back(stepArgumentName(g, i));
    }
    for (unsigned i = firstState; i < g.function().getNumArguments(); ++i)
      trainer->stateNames_.push_back(stepArgumentName(g, i));
    auto slotOf = [&](const std::string &name) {
      return size_t(llvm::find(trainer->stateNames_, name) - trainer->stateNames_.begin());
    };
    if (config.emaMomentum > 0) {
      trainer->averageUpdatesSlot_ = slotOf("ema/updates");
      for (const std::string &param : trainer->paramNames_)
        trainer->averageSlots_.push_back(slotOf("ema/" + param));
    }

    // The metrics' names are those of the results after the loss.
    unsigned firstMetric = g.function().getNumArguments() - firstModelArg + 1;
    for (unsigned i = firstMetric; i < g.function().getNumResults(); ++i)
      if (auto name = g.function().getResultAttrOfType<mlir::StringAttr>(i, "smelt.name");
          name && name.getValue() != "skipped")
        trainer->metricNames_.push_back(name.str());
    // Optimizer state starts where buildTrainStep says (zero; the loss scale at its initial
    // value).
    std::vector<rt::HostTensor> state;
    for (unsigned i = firstState; i < g.function().getNumArguments(); ++i) {
      auto type = mlir::cast<mlir::RankedTensorType>(g.function().getArgument(i).getType());
      rt::HostTensor value =
          rt::HostTensor::zeros({rt::DType::f32, std::vector<int64_t>(type.getShape())});
      if (auto initial = g.function().getArgAttrOfType<mlir::FloatAttr>(i, kInitialValueAttr))
        std::fill_n(value.data<float>(), value.type().numElements(),
                    float(initial.getValueAsDouble()));
      state.push_back(std::move(value));
      if (stepArgumentName(g, i) == "loss_scale/scale")
        trainer->lossScaleSlot_ = int64_t(state.size()) - 1;
    }
    // Every replica starts from the same parameters and variables: the initializer is seeded.
    auto init = compileFunction(g, "train_step_init", config, trainer->cache_.get());
    if (!init)
      return init.status();
    std::vector<rt::HostTensor> initial, params, variables;
    if (rt::Status s = (*init)->run(std::vector<rt::HostTensor>{}, initial); !s.ok())
      return s;
    for (size_t i = 0; i < initial.size(); ++i)
      (g.parameters()[i].trainable ? params : variables).push_back(std::move(initial[i]));
    rt::Expected<rt::Executable> step =
        compileExecutable(g, "train_step", config, trainer->cache_.get());
    if (!step)
      return step.status();
    if (rt::Status s = trainer->placeReplicas(*step); !s.ok())
      return s;
    for (Replica &r : trainer->replicas_) {
      auto executor = trainer->replicaExecutor(*step, r);
      if (!executor)
        return executor.status();
      r.trainStep = std::move(*executor);
      r.params = hostValues(params);
      r.variables = hostValues(variables);
      r.state = hostValues(state);
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
    // It takes the training step's parameters and variables, in the same order.
    std::vector<std::string> expected, built;
    for (const ModelArg &arg : modelArgs_)
      expected.push_back(modelArgName(arg));
    for (unsigned i = 2; i < g->function().getNumArguments(); ++i)
      built.push_back(stepArgumentName(*g, i));
    if (built != expected) {
      size_t i = size_t(llvm::mismatch(expected, built).first - expected.begin());
      auto nameAt = [&](const std::vector<std::string> &names) {
        return i < names.size() ? "'" + names[i] + "'" : std::string("nothing");
      };
      return rt::Status::error(fmt::format(
          "model '{}' builds other parameters or variables for evaluation than for training "
          "(the training step's {} is {}, evaluation's {}): create the same ones, in the same "
          "order, whether training or not",
          config_.model.name, i, nameAt(expected), nameAt(built)));
    }
    auto exe = compileFunction(*g, "eval_step", config_, cache_.get());
    if (!exe)
      return exe.status();
    return (evalSteps_[batch] = std::move(*exe)).get();
  } catch (const BuildError &e) {
    return rt::Status::error(std::string("building the evaluation step: ") + e.what());
  }
}

rt::Expected<std::unique_ptr<rt::Executor>>
Trainer::replicaExecutor(const rt::Executable &step, const Replica &r) const {
  // A step on the CPU has nothing on gpu:0 to move.
  return makeExecutor(rt::movedToDevice(step, "gpu:0", r.device), config_, r.communicator);
}

rt::Expected<rt::Executor *> Trainer::trainExecutor(Replica &r, int64_t share) {
  if (share == config_.batch / config_.replicas)
    return r.trainStep.get();
  if (r.shortStep && r.shortBatch == share)
    return r.shortStep.get();
  return rt::Status::error(fmt::format("no training step compiled for a batch of {}", share));
}

rt::Status Trainer::compileShortSteps(int64_t share) {
  if (replicas_[0].shortStep && replicas_[0].shortBatch == share)
    return rt::Status();
  rt::Expected<rt::Executable> exe = rt::Status();
  try {
    // The same graph as the full step's, for `share` examples: the parameters, state and
    // their order are the same, so it continues from where the full steps left them.
    std::unique_ptr<Graph> g = buildTrainStep(*context_, config_, share);
    exe = compileExecutable(*g, "train_step", config_, cache_.get());
  } catch (const BuildError &e) {
    return rt::Status::error(std::string("building the short last step: ") + e.what());
  }
  if (!exe)
    return exe.status();
  for (Replica &r : replicas_) {
    auto executor = replicaExecutor(*exe, r);
    if (!executor)
      return executor.status();
    r.shortStep = std::move(*executor);
    r.shortBatch = share;
  }
  return rt::Status();
}

rt::Status
Trainer::trainReplica(Replica &r, const data::Dataset &data, const std::vector<int64_t> &order,
                      int64_t steps, int64_t lastBatch, Metrics &running,
                      const std::function<void(int64_t, int64_t, const Metrics &)> &progress) {
  // The replica's shard: its slice of every global batch, in order, and of the short last one.
  int64_t global = config_.batch, replicas = config_.replicas, share = global / replicas;
  int64_t lastShare = lastBatch / replicas;
  std::vector<int64_t> shard;
  shard.reserve(size_t(steps * share + lastShare));
  for (int64_t i = 0; i < steps; ++i) {
    auto first = order.begin() + i * global + r.index * share;
    shard.insert(shard.end(), first, first + share);
  }
  auto last = order.begin() + steps * global + r.index * lastShare;
  shard.insert(shard.end(), last, last + lastShare);
  int64_t total = steps + (lastShare > 0);
  data::BatchStream stream(data, std::move(shard), share, /*dropRemainder=*/false);
  size_t paramCount = r.params.size(), variableCount = r.variables.size(),
         stateCount = r.state.size();
  std::vector<rt::Value> outputs;
  // The step's state stays where the step left it: its outputs are kept on its device and
  // donated to the next step (on the CPU both are host tensors, and nothing changes).
  rt::RunValues residency;
  residency.keepOnDevice.assign(paramCount + variableCount + stateCount, 1);
  for (int64_t i = 0; std::optional<data::Batch> batch = stream.next(); ++i) {
    int64_t n = batch->examples.type().shape[0];
    rt::Expected<rt::Executor *> exe = trainExecutor(r, n);
    if (!exe)
      return exe.status();
    rt::Value examples(std::move(batch->examples)), labels(std::move(batch->labels));
    rt::Value step(scalarI64(step_ + i));
    std::vector<rt::Value> rates;
    for (const OptimizerConfig *optimizer : optimizers())
      rates.emplace_back(scalarF32(rateAt(*optimizer, step_ + i)));
    std::vector<rt::Value *> args = {&examples, &labels, &step};
    for (rt::Value &rate : rates)
      args.push_back(&rate);
    residency.donated.assign(args.size(), 0);
    addModelArguments(r, args);
    for (rt::Value &s : r.state)
      args.push_back(&s);
    residency.donated.resize(args.size(), 1);
    if (rt::Status s = (*exe)->run(args, outputs, residency); !s.ok())
      return rt::Status::error(rt::namingReplica(
          r.communicator, s.message() + lostState(r.params, r.variables, r.state)));
    r.trainStepRuns += *exe == r.trainStep.get();
    // The step's outputs replace the parameters and state. Swapped, not moved: the old
    // tensors become the next step's output memory, so steady-state steps allocate and copy
    // none of them (the executor writes the new values straight in).
    for (size_t k = 0; k < paramCount; ++k)
      std::swap(r.params[k], outputs[k]);
    for (size_t k = 0; k < variableCount; ++k)
      std::swap(r.variables[k], outputs[paramCount + k]);
    for (size_t k = 0; k < stateCount; ++k)
      std::swap(r.state[k], outputs[paramCount + variableCount + k]);
    // Every replica computes the same metrics (averaged in the step); the first reports.
    if (&r != &replicas_[0])
      continue;
    size_t first = paramCount + variableCount + stateCount;
    if (lossScaleSlot_ >= 0)
      running.skippedSteps += hostScalar(outputs[first + 1 + metricNames_.size()]) != 0;
    // Means over the examples so far, each batch weighted by its size.
    int64_t seen = n * replicas;
    auto average = [&](double &mean, double value) {
      mean = (mean * double(running.examples) + value * double(seen)) /
             double(running.examples + seen);
    };
    average(running.loss, hostScalar(outputs[first]));
    for (size_t m = 0; m < metricNames_.size(); ++m)
      average(running.values[m].second, hostScalar(outputs[first + 1 + m]));
    running.examples += seen;
    if (progress)
      progress(i + 1, total, running);
  }
  // The loss scale lives with the state on the step's device: read once, after the epoch's
  // last step, not every step.
  if (lossScaleSlot_ >= 0 && &r == &replicas_[0]) {
    rt::Expected<double> scale = r.state[lossScaleSlot_].at(0);
    if (!scale)
      return scale.status();
    running.lossScale = *scale;
  }
  return rt::Status();
}

rt::Expected<Metrics>
Trainer::trainEpoch(const data::Dataset &data, int64_t epoch,
                    const std::function<void(int64_t, int64_t, const Metrics &)> &progress) {
  std::vector<int64_t> order = data.epochOrder(config_.seed, epoch, /*shuffle=*/true);
  int64_t global = config_.batch, replicas = config_.replicas;
  int64_t steps = data.batchCount(global, /*dropRemainder=*/true);
  int64_t rest = data.size() - steps * global;
  // With replicas, the most of the rest that splits evenly over them.
  int64_t lastBatch = config_.dropRemainder ? 0 : rest - rest % replicas;
  Metrics running;
  running.droppedExamples = rest - lastBatch;
  for (const std::string &name : metricNames_)
    running.values.push_back({name, 0.0});
  // Compiled here, once for all replicas, not in their threads, which share one context.
  if (lastBatch > 0)
    if (rt::Status s = compileShortSteps(lastBatch / replicas); !s.ok())
      return s;
  if (replicas_.size() == 1) {
    if (rt::Status s =
            trainReplica(replicas_[0], data, order, steps, lastBatch, running, progress);
        !s.ok())
      return s;
  } else {
    // One thread per replica; a replica that fails aborts the group so that the others'
    // collectives fail instead of waiting for it, and its error (the first) is reported.
    std::vector<rt::Status> results(replicas_.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < replicas_.size(); ++i)
      threads.emplace_back([&, i] {
        results[i] =
            trainReplica(replicas_[i], data, order, steps, lastBatch, running, progress);
        if (!results[i].ok())
          abortReplicas(results[i].message());
      });
    for (std::thread &t : threads)
      t.join();
    for (const rt::Status &s : results)
      if (!s.ok())
        return s;
  }
  running.steps = steps + (lastBatch > 0);
  step_ += running.steps;
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
  // Sums of loss * n and each metric * n, then n.
  std::vector<double> sums(metricNames_.size() + 2, 0.0);
  rt::Expected<bool> averaged = averaging();
  if (!averaged)
    return averaged.status();
  for (int64_t i = rank; i < batches; i += processes) {
    data::Batch batch = data.batch(order, config_.evalBatch, i);
    int64_t n = batch.examples.type().shape[0];
    rt::Expected<rt::Executor *> exe = evalExecutor(n);
    if (!exe)
      return exe.status();
    rt::Value examples(std::move(batch.examples)), labels(std::move(batch.labels));
    std::vector<rt::Value *> args = {&examples, &labels};
    addModelArguments(replicas_[0], args, /*averaged=*/*averaged);
    std::vector<rt::Value> out;
    if (rt::Status s = (*exe)->run(args, out, rt::RunValues()); !s.ok())
      return s;
    for (size_t k = 0; k + 1 < sums.size(); ++k)
      sums[k] += hostScalar(out[k]) * double(n);
    sums.back() += double(n);
  }
  if (config_.communicator)
    if (rt::Status s = config_.communicator->allReduce(sums.data(), sums.size(), rt::DType::f64,
                                                       rt::ReduceKind::sum, "evaluation sums");
        !s.ok())
      return s;
  Metrics total;
  total.examples = int64_t(sums.back());
  total.loss = sums[0] / sums.back();
  for (size_t m = 0; m < metricNames_.size(); ++m)
    total.values.push_back({metricNames_[m], sums[1 + m] / sums.back()});
  return total;
}

rt::Status Trainer::save(const std::string &path, int64_t epochsDone) const {
  std::vector<data::NamedTensor> tensors;
  const Replica &r = replicas_[0];
  for (auto [values, names] : {std::pair{&r.params, &paramNames_},
                               {&r.variables, &variableNames_},
                               {&r.state, &stateNames_}}) {
    rt::Expected<std::vector<rt::HostTensor>> host = hostCopies(*values);
    if (!host)
      return host.status();
    for (size_t i = 0; i < host->size(); ++i)
      tensors.push_back({(*names)[i], std::move((*host)[i])});
  }
  CheckpointInfo info{config_.model.name, precisionPolicyName(config_.precision).str(), epochsDone,
                      step_, config_.batch, config_.seed};
  return saveCheckpoint(path, std::move(tensors), info);
}

rt::Status Trainer::replaceInReplicas(std::vector<rt::Value> Replica::*member,
                                      std::vector<rt::HostTensor> values,
                                      const std::vector<std::string> &names, const char *what) {
  const std::vector<rt::Value> &current = replicas_[0].*member;
  if (values.size() != current.size())
    return rt::Status::error(fmt::format("{} {}s given, model '{}' has {}", values.size(), what,
                                         config_.model.name, current.size()));
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].type() != current[i].type())
      return rt::Status::error(fmt::format("{} '{}' is {}, the value given is {}", what, names[i],
                                           current[i].type().str(), values[i].type().str()));
  for (size_t r = 0; r < replicas_.size(); ++r)
    replicas_[r].*member = replicaValues(values, r + 1 == replicas_.size());
  return rt::Status();
}

rt::Status Trainer::setParameters(const std::vector<rt::HostTensor> &params) {
  return replaceInReplicas(&Replica::params, params, paramNames_, "parameter");
}

rt::Status Trainer::setVariables(const std::vector<rt::HostTensor> &variables) {
  return replaceInReplicas(&Replica::variables, variables, variableNames_, "variable");
}

std::string Trainer::modelArgName(const ModelArg &arg) const {
  return arg.variable ? variableNames_[arg.index] : paramNames_[arg.index];
}

void Trainer::addModelArguments(Replica &r, std::vector<rt::Value *> &args, bool averaged) {
  for (const ModelArg &arg : modelArgs_)
    args.push_back(arg.variable ? &r.variables[arg.index]
                   : averaged   ? &r.state[averageSlots_[arg.index]]
                                : &r.params[arg.index]);
}

rt::Expected<bool> Trainer::averaging() const {
  // Before the first update the averages hold nothing yet.
  if (averageSlots_.empty())
    return false;
  rt::Expected<double> updates = replicas_[0].state[averageUpdatesSlot_].at(0);
  if (!updates)
    return updates.status();
  return *updates > 0;
}

std::vector<rt::HostTensor> Trainer::parameters() const {
  return hostCopiesOrThrow(replicas_[0].params);
}

std::vector<rt::HostTensor> Trainer::variables() const {
  return hostCopiesOrThrow(replicas_[0].variables);
}

std::vector<rt::HostTensor> Trainer::averagedParameters() const {
  if (averageSlots_.empty())
    return {};
  rt::Expected<bool> averaged = averaging();
  if (!averaged)
    throw std::runtime_error(averaged.message());
  if (!*averaged)
    return parameters();
  std::vector<rt::HostTensor> averages;
  for (size_t slot : averageSlots_) {
    rt::Expected<rt::HostTensor> average = replicas_[0].state[slot].toHost();
    if (!average)
      throw std::runtime_error(average.message());
    averages.push_back(std::move(*average));
  }
  return averages;
}

/// Moves each tensor names[i] of a file's `byName` into into[i], taking it out of `byName`; one
/// missing or of another type than into[i] is an error naming it as the model's `what`
/// ("parameter", "optimizer state").
static rt::Status takeByName(std::map<std::string, rt::HostTensor *> &byName,
                             const std::string &path, const std::string &model, const char *what,
                             const std::vector<std::string> &names,
                             const std::vector<rt::Value> &current,
                             std::vector<rt::HostTensor> &into) {
  into.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = byName.find(names[i]);
    if (it == byName.end())
      return rt::Status::error(
          fmt::format("{}: {} '{}' of model '{}' is missing", path, what, names[i], model));
    if (it->second->type() != current[i].type())
      return rt::Status::error(fmt::format("{}: tensor '{}' is {}, the {} is {}", path, names[i],
                                           it->second->type().str(), what,
                                           current[i].type().str()));
    into[i] = std::move(*it->second);
    byName.erase(it);
  }
  return rt::Status();
}

/// A file's tensors by name.
static std::map<std::string, rt::HostTensor *> byName(std::vector<data::NamedTensor> &tensors) {
  std::map<std::string, rt::HostTensor *> map;
  for (data::NamedTensor &t : tensors)
    map[t.name] = &t.tensor;
  return map;
}

rt::Status Trainer::initParameters(const std::string &path) {
  rt::Expected<data::Checkpoint> file = data::readSafetensors(path);
  if (!file)
    return file.status();
  std::map<std::string, rt::HostTensor *> tensors = byName(file->tensors);
  // Another run's checkpoint also holds that run's optimizer state: fine-tuning starts a fresh
  // optimizer, so the rest of a Smelt checkpoint (its metadata names the model) is left. In a
  // plain weights file an extra tensor is a mistake.
  return initFrom(tensors, path, /*extraAllowed=*/isCheckpoint(*file));
}

rt::Status Trainer::initParameters(std::map<std::string, rt::HostTensor> values,
                                   const std::string &source) {
  std::map<std::string, rt::HostTensor *> tensors;
  for (auto &[name, tensor] : values)
    tensors[name] = &tensor;
  return initFrom(tensors, source, /*extraAllowed=*/false);
}

rt::Status Trainer::initFrom(std::map<std::string, rt::HostTensor *> &tensors,
                             const std::string &source, bool extraAllowed) {
  // Every parameter comes from the source: the run's are read for their types only. Variables
  // the source lacks keep their values, so those start from copies.
  rt::Expected<std::vector<rt::HostTensor>> currentVariables = hostCopies(replicas_[0].variables);
  if (!currentVariables)
    return currentVariables.status();
  std::vector<rt::HostTensor> params, &variables = *currentVariables;
  if (rt::Status s = takeByName(tensors, source, config_.model.name, "parameter", paramNames_,
                                replicas_[0].params, params);
      !s.ok())
    return s;
  // Variables the source holds start from it (an imported model's moving averages); the
  // others keep their initial values.
  for (size_t i = 0; i < variableNames_.size(); ++i) {
    auto it = tensors.find(variableNames_[i]);
    if (it == tensors.end())
      continue;
    if (it->second->type() != variables[i].type())
      return rt::Status::error(fmt::format("{}: tensor '{}' is {}, the variable is {}", source,
                                           variableNames_[i], it->second->type().str(),
                                           variables[i].type().str()));
    variables[i] = std::move(*it->second);
    tensors.erase(it);
  }
  if (!tensors.empty() && !extraAllowed)
    return rt::Status::error(fmt::format("{}: tensor '{}' is not a parameter of model '{}' (its "
                                         "parameters: {})",
                                         source, tensors.begin()->first, config_.model.name,
                                         fmt::join(paramNames_, ", ")));
  // Moved in: the last replica takes the source's tensors.
  if (rt::Status s =
          replaceInReplicas(&Replica::params, std::move(params), paramNames_, "parameter");
      !s.ok())
    return s;
  return replaceInReplicas(&Replica::variables, std::move(variables), variableNames_, "variable");
}

rt::Expected<int64_t> Trainer::load(const std::string &path) {
  rt::Expected<LoadedCheckpoint> checkpoint = loadCheckpoint(path);
  if (!checkpoint)
    return checkpoint.status();
  if (checkpoint->info.model != config_.model.name)
    return rt::Status::error(fmt::format("{}: a checkpoint of model '{}', this run trains '{}'",
                                         path, checkpoint->info.model, config_.model.name));
  std::map<std::string, rt::HostTensor *> tensors = byName(checkpoint->tensors);
  // Every tensor is found and checked against the run's before any is restored, so a
  // checkpoint that fails half way leaves the run as it was. The checkpoint's tensors become the
  // last replica's values (the others get copies): a model's state is not held twice more.
  std::vector<rt::HostTensor> params, state, variables;
  const Replica &first = replicas_[0];
  const std::string &model = config_.model.name;
  if (rt::Status s =
          takeByName(tensors, path, model, "parameter", paramNames_, first.params, params);
      !s.ok())
    return s;
  if (rt::Status s =
          takeByName(tensors, path, model, "variable", variableNames_, first.variables, variables);
      !s.ok())
    return s;
  if (rt::Status s =
          takeByName(tensors, path, model, "optimizer state", stateNames_, first.state, state);
      !s.ok())
    return s;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    bool last = r + 1 == replicas_.size();
    replicas_[r].params = replicaValues(params, last);
    replicas_[r].variables = replicaValues(variables, last);
    replicas_[r].state = replicaValues(state, last);
  }
  step_ = checkpoint->info.globalStep;
  return checkpoint->info.epochsDone;
}

} // namespace smelt::train
