// Writing and training your own model (docs/training.md): a small CNN of its own on
// Fashion-MNIST, given to the Trainer as a ModelSpec and trained with fit(): AdamW with a
// warm-up + cosine schedule and gradient clipping, top-3 accuracy, validation and early
// stopping.
#include "data/Mnist.h"
#include "frontend/Layers.h"
#include "train/Fit.h"

#include <cstdio>
#include <iostream>

using namespace smelt;

int main() {
  // The model: a builder function from a batch to its loss and metrics.
  train::ModelSpec model(
      "small-cnn", /*example=*/{{784}, DType::f32}, /*label=*/{{}, DType::i32},
      [](Graph &, const train::ModelInputs &in) {
        Tensor x = reshape(in.examples, {in.examples.dim(0), 28, 28, 1});
        x = conv2dLayer(x, 16, {5, 5}, "conv", {2, 2}, "same", Activation::Relu);
        x = avgPool(x, {2, 2}, {2, 2});
        x = dropout(flatten(x), 0.1, in.seed, in.training, in.step);
        x = dense(x, 64, "hidden", Activation::Gelu);
        return train::classification(dense(x, 10, "logits"), in.labels, /*topK=*/{3});
      });

  train::TrainConfig config;
  config.model = model;
  config.batch = 128;
  config.optimizer.kind = OptimizerKind::AdamW;
  config.optimizer.learningRate = 3e-3;
  config.optimizer.schedule = *LearningRateSchedule::parse("cosine:20:200");
  config.optimizer.clipGlobalNorm = 1.0;
  auto trainer = train::Trainer::create(config);
  if (!trainer) {
    std::fprintf(stderr, "error: %s\n", trainer.message().c_str());
    return 1;
  }

  // 6000 training images and 1000 held out, to keep the example quick.
  auto images = data::loadMnist(data::fashionMnistDir(), "train");
  if (!images) {
    std::fprintf(stderr, "error: %s\n", images.message().c_str());
    return 1;
  }
  data::Dataset all(std::move(images->images), std::move(images->labels));
  data::Dataset trainSet = *all.slice(0, 6000), heldOut = *all.slice(6000, 7000);

  train::EarlyStopping early("val_loss", /*patience=*/1);
  train::FitOptions options;
  options.epochs = 4;
  options.validation = &heldOut;
  options.callbacks = {&early};
  options.out = &std::cout;
  auto history = train::fit(**trainer, trainSet, options);
  if (!history) {
    std::fprintf(stderr, "error: %s\n", history.message().c_str());
    return 1;
  }
  const train::EpochLogs &last = history->epochs.back();
  std::printf("validation accuracy: %.4f, top-3: %.4f\n", last.value("val_accuracy"),
              last.value("val_top3_accuracy"));
  return 0;
}
