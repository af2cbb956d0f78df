// A custom training loop (docs/training.md), for when fit() is not the loop you want: the
// training step built by hand with the builder (model, loss, gradients, an optimizer whose
// learning rate is an input), compiled once, and run batch by batch, feeding the rate from a
// schedule and the optimizer state from the step before.
#include "codegen/Compile.h"
#include "data/Dataset.h"
#include "data/Mnist.h"
#include "frontend/Models.h"
#include "frontend/Optimizers.h"
#include "runtime/CpuExecutor.h"

#include <cstdio>

using namespace smelt;

int main() {
  const int64_t batch = 128;
  mlir::MLIRContext context;
  Graph g(context, "step", /*seed=*/3);
  Tensor images = g.input("images", {batch, 784});
  Tensor labels = g.input("labels", {batch}, DType::i32);
  Tensor rate = g.input("learning_rate", {}, DType::f32);
  Tensor logits = mlpClassifier(g, images, {784, 128, 10});
  Tensor loss = sparseSoftmaxCrossEntropy(logits, labels);
  std::vector<Tensor> params = g.parameterTensors();
  OptimizerConfig adam; // Adam
  OptimizerUpdate update = applyOptimizer(g, adam, params, g.gradients(loss, params), rate);
  // step(images, labels, rate, params..., state...) -> (params..., state..., loss, accuracy)
  std::vector<Tensor> outputs = update.newParams;
  outputs.insert(outputs.end(), update.newState.begin(), update.newState.end());
  outputs.push_back(loss);
  outputs.push_back(accuracy(logits, labels));
  g.setOutputs(outputs);
  g.buildInitializer(); // @step_init: the parameters' initial values

  auto init = codegen::compile(g.module(), "step_init");
  auto step = codegen::compile(g.module(), "step");
  if (mlir::failed(init) || mlir::failed(step))
    return 1; // the diagnostics were printed
  auto initCpu = rt::CpuExecutor::create(*init);
  auto stepCpu = rt::CpuExecutor::create(*step);
  std::vector<rt::HostTensor> weights, state, out;
  if (!initCpu || !stepCpu || !initCpu->run(std::vector<rt::HostTensor>{}, weights).ok())
    return 1;
  // Each state input starts at its initial value (0 for Adam's moments and step count).
  for (size_t i = 0; i < update.stateInputs.size(); ++i) {
    rt::TensorType type{rt::DType::f32, update.stateInputs[i].shape()};
    state.push_back(rt::HostTensor::fromDoubles(
        type, std::vector<double>(size_t(type.numElements()), update.initialValues[i])));
  }

  auto split = data::loadMnist(data::fashionMnistDir(), "train");
  if (!split)
    return std::fprintf(stderr, "error: %s\n", split.message().c_str()), 1;
  data::Dataset train(std::move(split->images), std::move(split->labels));
  LearningRateSchedule schedule = *LearningRateSchedule::parse("exponential:100:0.5");
  double firstLoss = 0, lastLoss = 0;
  int64_t stepIndex = 0;
  data::BatchStream batches(train, train.epochOrder(/*seed=*/3, /*epoch=*/0, true), batch,
                            /*dropRemainder=*/true);
  while (auto b = batches.next()) {
    if (stepIndex == 200)
      break;
    rt::HostTensor lr = rt::HostTensor::fromDoubles({rt::DType::f32, {}},
                                                    {schedule.at(1e-3, stepIndex)});
    std::vector<const rt::HostTensor *> args = {&b->examples, &b->labels, &lr};
    for (const rt::HostTensor &t : weights)
      args.push_back(&t);
    for (const rt::HostTensor &t : state)
      args.push_back(&t);
    if (rt::Status s = stepCpu->run(args, out); !s.ok())
      return std::fprintf(stderr, "error: %s\n", s.message().c_str()), 1;
    for (size_t i = 0; i < weights.size(); ++i)
      std::swap(weights[i], out[i]);
    for (size_t i = 0; i < state.size(); ++i)
      std::swap(state[i], out[weights.size() + i]);
    double lossValue = out[weights.size() + state.size()].at(0);
    (stepIndex == 0 ? firstLoss : lastLoss) = lossValue;
    if (++stepIndex % 50 == 0)
      std::printf("step %lld: loss %.4f, batch accuracy %.4f, lr %.2e\n", (long long)stepIndex,
                  lossValue, out.back().at(0), schedule.at(1e-3, stepIndex - 1));
  }
  std::printf("custom loop: loss %.4f -> %.4f over %lld steps\n", firstLoss, lastLoss,
              (long long)stepIndex);
  return lastLoss < firstLoss ? 0 : 1;
}
