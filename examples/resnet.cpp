// A ResNet with batch normalization on Fashion-MNIST through fit()
// (docs/training.md): the moving averages are variables the training step
// updates and evaluation normalizes with, and the checkpoint holds them.
// Trained on 6000 images for 3 epochs, validated on 1000 others.
//   smelt-resnet [seed]   (default 1)
#include "data/Mnist.h"
#include "frontend/Models.h"
#include "train/Fit.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

using namespace smelt;

int main(int argc, char **argv) {
  train::ModelSpec model("fashion-resnet", /*example=*/{{784}, DType::f32},
                         /*label=*/{{}, DType::i32}, [](Graph &, const train::ModelInputs &in) {
                           Tensor x = reshape(in.examples, {in.examples.dim(0), 28, 28, 1});
                           ResnetConfig resnet; // 3 stages of 2 blocks, 16/32/64 filters
                           Tensor logits = resnetClassifier(x, resnet, in.training);
                           return train::classification(logits, in.labels);
                         });
  train::TrainConfig config;
  config.model = model;
  config.batch = 64;
  config.seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  auto trainer = train::Trainer::create(config);
  if (!trainer) {
    std::fprintf(stderr, "error: %s\n", trainer.message().c_str());
    return 1;
  }
  std::printf("%zu parameter tensors, %zu variables (%s, ...)\n",
              (*trainer)->parameterNames().size(), (*trainer)->variableNames().size(),
              (*trainer)->variableNames().front().c_str());

  auto images = data::loadMnist(data::fashionMnistDir(), "train");
  if (!images) {
    std::fprintf(stderr, "error: %s\n", images.message().c_str());
    return 1;
  }
  data::Dataset all(std::move(images->images), std::move(images->labels));
  data::Dataset trainSet = *all.slice(0, 6000), heldOut = *all.slice(6000, 7000);
  train::FitOptions options;
  options.epochs = 3;
  options.validation = &heldOut; // evaluated with the moving averages
  options.out = &std::cout;
  auto history = train::fit(**trainer, trainSet, options);
  if (!history) {
    std::fprintf(stderr, "error: %s\n", history.message().c_str());
    return 1;
  }
  std::printf("validation accuracy: %.4f\n", history->epochs.back().value("val_accuracy"));
  return 0;
}
