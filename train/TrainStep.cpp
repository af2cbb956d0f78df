// The training and evaluation steps as graphs around a ModelSpec (declared in Trainer.h): the
// model function called on the batch's inputs and checked, then gradients, the precision
// policy, loss scaling, replicas' averages, gradient accumulation, parameter groups and the
// weights' moving average composed into one update.
#include "train/Trainer.h"

#include "frontend/DataParallel.h"
#include "frontend/GradientAccumulation.h"
#include "frontend/Layers.h"
#include "train/BuiltinModels.h"

namespace smelt::train {

std::string stepArgumentName(Graph &g, unsigned i) {
  auto name = g.function().getArgAttrOfType<mlir::StringAttr>(i, "smelt.name");
  return name ? name.str() : "arg" + std::to_string(i);
}

namespace {

/// The model of `config`, a built-in resolved by name; BuildError when there is none.
ModelSpec resolvedModel(const TrainConfig &config) {
  if (config.model.build)
    return config.model;
  rt::Expected<ModelSpec> builtin = builtinModel(config.model.name, config.dropout);
  if (!builtin)
    throw BuildError(builtin.message());
  return std::move(*builtin);
}

/// [batch, ...spec.shape]
std::vector<int64_t> batched(int64_t batch, const TensorSpec &spec) {
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
  return shape;
}

/// The model's outputs for a batch of `batch` examples as inputs of `g` (examples, labels,
/// then `step` when training); checks that the model kept to its contract.
ModelOutputs buildModel(Graph &g, const ModelSpec &model, const TrainConfig &config, int64_t batch,
                        bool training, std::function<Tensor()> makeStep = {}) {
  ModelInputs in;
  in.examples = g.input("examples", batched(batch, model.example), model.example.dtype);
  in.labels = g.input("labels", batched(batch, model.label), model.label.dtype);
  in.training = training;
  in.seed = config.seed;
  if (makeStep)
    in.step = makeStep();
  // The model's function adds parameters and variables; the batch, step and rate are the
  // Trainer's inputs, which it feeds. An input the model made itself would be fed nothing.
  unsigned ownArguments = g.function().getNumArguments();
  ModelOutputs out = model.build(g, in);
  for (unsigned i = ownArguments; i < g.function().getNumArguments(); ++i)
    if (!g.function().getArgAttr(i, "smelt.param") && !g.function().getArgAttr(i, "smelt.variable"))
      throw BuildError("model '" + model.name + "': its function made the graph input '" +
                       stepArgumentName(g, i) +
                       "', which the Trainer cannot feed; the batch comes in ModelInputs, "
                       "weights are Graph::parameter, and state that the model updates itself "
                       "(moving averages, counters) is Graph::variable with Graph::assign");
  auto checkScalar = [&](Tensor t, const std::string &what) {
    if (!t || t.rank() != 0)
      throw BuildError("model '" + model.name + "': its " + what +
                       (t ? " is " + shapeString(t.shape()) : std::string(" is missing")) +
                       ", it must be a rank-0 tensor (the batch's mean)");
  };
  checkScalar(out.loss, "loss");
  for (const Metric &m : out.metrics)
    checkScalar(m.value, "metric '" + m.name + "'");
  return out;
}

/// The loss and metrics as f32 scalars (their tensors may be bf16 or f64).
std::vector<Tensor> reported(const ModelOutputs &out) {
  std::vector<Tensor> values = {convert(out.loss, DType::f32)};
  for (const Metric &m : out.metrics)
    values.push_back(convert(m.value, DType::f32));
  return values;
}

} // namespace

std::unique_ptr<Graph> buildTrainStep(mlir::MLIRContext &context, const TrainConfig &config,
                                      int64_t batch) {
  ModelSpec model = resolvedModel(config);
  auto graph = std::make_unique<Graph>(context, "train_step", config.seed);
  Graph &g = *graph;
  // One replica's share of the global batch; gradients and metrics are averaged over all.
  int64_t replicas = config.replicas;
  if (batch == 0)
    batch = config.batch / config.replicas;
  Tensor step;
  // The default optimizer's rate, then each parameter group's.
  std::vector<Tensor> learningRates;
  ModelOutputs out = buildModel(g, model, config, batch, /*training=*/true, [&] {
    step = g.input("step", {}, DType::i64);
    learningRates.push_back(g.input("learning_rate", {}, DType::f32));
    for (const ParameterGroup &group : config.parameterGroups)
      learningRates.push_back(g.input("learning_rate/" + group.name, {}, DType::f32));
    return replicaStreamOffset(step, replicas);
  });
  g.applyPrecision(config.precision);
  std::vector<Tensor> params = g.parameterTensors();
  if (params.empty())
    throw BuildError("model '" + model.name + "' has no parameters to train");
  std::vector<Tensor> metrics = crossReplicaMean(reported(out), replicas);
  // Each replica updates the variables from its own share of the batch; their mean keeps every
  // replica's the same (what TensorFlow's ON_READ, MEAN-aggregated variables read).
  std::vector<Tensor> variables = g.variableTensors(), newVariables;
  for (const Tensor &v : variables) {
    Tensor next = g.assignedValue(v);
    newVariables.push_back(rt::isFloat(v.dtype()) && next.value() != v.value()
                               ? crossReplicaMean({next}, replicas)[0]
                               : next);
  }
  // The update, from the inside out: each group's optimizer on its parameters, on the mean of
  // `accumulateSteps` steps' gradients, under loss scaling with mixed_f16.
  UpdateRule grouped = [&](const std::vector<Tensor> &grads) {
    OptimizerUpdate update = applyParameterGroups(g, config.optimizer, config.parameterGroups,
                                                  params, grads, learningRates);
    return config.emaMomentum > 0 ? withMovingAverage(g, config.emaMomentum, params, update)
                                  : update;
  };
  UpdateRule accumulated = [&](const std::vector<Tensor> &grads) {
    return accumulateGradients(g, config.accumulateSteps, step, params, grads, grouped);
  };
  OptimizerUpdate update;
  std::optional<Tensor> skipped;
  if (config.precision == PrecisionPolicy::mixed_f16) {
    ScaledUpdate scaled =
        applyLossScaling(g, config.lossScale, out.loss, params, replicas, accumulated);
    skipped = scaled.skipped;
    update = std::move(scaled);
  } else {
    update = accumulated(crossReplicaMean(g.gradients(out.loss, params), replicas));
  }
  // Where each state input starts, on the argument, for the Trainer to fill it.
  for (size_t i = 0; i < update.stateInputs.size(); ++i)
    g.function().setArgAttr(
        mlir::cast<mlir::BlockArgument>(update.stateInputs[i].value()).getArgNumber(),
        kInitialValueAttr, g.builder().getF64FloatAttr(update.initialValues[i]));
  // The Trainer donates the parameters, variables and optimizer state to each step and takes
  // their new values back (JAX's donate_argnums): smelt-donate-in-place may write each new
  // value into its input's buffer.
  for (const std::vector<Tensor> *donated : {&params, &variables, &update.stateInputs})
    for (const Tensor &t : *donated)
      if (auto argument = mlir::dyn_cast<mlir::BlockArgument>(t.value()))
        g.function().setArgAttr(argument.getArgNumber(), "smelt.donated",
                                g.builder().getUnitAttr());
  // Every result named: the parameters, variables and optimizer state as their inputs are,
  // then the loss and the metrics (which the Trainer reads its metric names from).
  std::vector<Tensor> outputs = update.newParams;
  std::vector<std::string> names;
  for (const Tensor &p : params)
    names.push_back(parameterName(p));
  outputs.insert(outputs.end(), newVariables.begin(), newVariables.end());
  for (const Tensor &v : variables)
    names.push_back(parameterName(v));
  outputs.insert(outputs.end(), update.newState.begin(), update.newState.end());
  for (const Tensor &s : update.stateInputs)
    names.push_back(parameterName(s));
  outputs.insert(outputs.end(), metrics.begin(), metrics.end());
  names.push_back("loss");
  for (const Metric &m : out.metrics)
    names.push_back(m.name);
  if (skipped) {
    outputs.push_back(*skipped);
    names.push_back("skipped");
  }
  g.setOutputs(outputs, names);
  g.buildInitializer();
  return graph;
}

std::unique_ptr<Graph> buildEvalStep(mlir::MLIRContext &context, const TrainConfig &config,
                                     int64_t batch) {
  ModelSpec model = resolvedModel(config);
  auto graph = std::make_unique<Graph>(context, "eval_step", config.seed);
  ModelOutputs out = buildModel(*graph, model, config, batch, /*training=*/false);
  graph->applyPrecision(config.precision);
  graph->setOutputs(reported(out));
  return graph;
}

} // namespace smelt::train
