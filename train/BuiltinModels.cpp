// The built-in classifiers as model functions, and the classification outputs they share with
// users' models.
#include "train/BuiltinModels.h"

#include "frontend/Layers.h"
#include "frontend/Models.h"
#include "frontend/Recurrent.h"

namespace smelt::train {

ModelOutputs classification(Tensor logits, Tensor labels, const std::vector<int64_t> &topK) {
  ModelOutputs out;
  out.loss = sparseSoftmaxCrossEntropy(logits, labels);
  out.metrics.push_back({"accuracy", accuracy(logits, labels)});
  for (int64_t k : topK)
    out.metrics.push_back({"top" + std::to_string(k) + "_accuracy",
                           topKAccuracy(logits, labels, k)});
  return out;
}

rt::Expected<ModelSpec> builtinModel(const std::string &name, double dropoutRate) {
  TensorSpec image{{784}, DType::f32}, label{{}, DType::i32};
  if (name == "mlp")
    return ModelSpec(name, image, label, [dropoutRate](Graph &g, const ModelInputs &in) {
      Tensor logits = mlpClassifier(g, in.examples, {784, 512, 256, 10}, dropoutRate,
                                    in.training, in.seed + 101, in.step);
      return classification(logits, in.labels);
    });
  if (name == "cnn")
    return ModelSpec(name, image, label, [dropoutRate](Graph &, const ModelInputs &in) {
      Tensor x = reshape(in.examples, {in.examples.dim(0), 28, 28, 1});
      x = conv2dLayer(x, 32, {3, 3}, "conv1", {1, 1}, Padding::Same, Activation::Relu);
      x = maxPool(x, {2, 2}, {2, 2});
      x = conv2dLayer(x, 64, {3, 3}, "conv2", {1, 1}, Padding::Same, Activation::Relu);
      x = maxPool(x, {2, 2}, {2, 2});
      x = dropout(flatten(x), dropoutRate, in.seed + 101, in.training, in.step);
      return classification(dense(x, 10, "logits"), in.labels);
    });
  if (name == "resnet")
    return ModelSpec(name, image, label, [](Graph &, const ModelInputs &in) {
      Tensor x = reshape(in.examples, {in.examples.dim(0), 28, 28, 1});
      return classification(resnetClassifier(x, ResnetConfig{}, in.training), in.labels);
    });
  return rt::Status::error("unknown model '" + name +
                           "': the built-in models are mlp, cnn and resnet (gpt and lstm take "
                           "--text); a ModelSpec with a build function trains any other");
}

ModelSpec gptModel(const GptConfig &config) {
  TensorSpec tokens{{config.context}, DType::i32};
  return ModelSpec("gpt", tokens, tokens, [config](Graph &, const ModelInputs &in) {
    Tensor logits = gptLogits(in.examples, config, in.training, in.seed, in.step);
    return classification(logits, in.labels);
  });
}

ModelSpec lstmModel(const LstmConfig &config) {
  TensorSpec tokens{{config.context}, DType::i32};
  return ModelSpec("lstm", tokens, tokens, [config](Graph &, const ModelInputs &in) {
    Tensor x = embedding(in.examples, config.vocab, config.width, "token_embedding",
                         Initializer::uniform(-0.05, 0.05), config.dtype);
    Tensor logits = dense(lstm(x, config.hidden, "lstm"), config.vocab, "logits");
    return classification(logits, in.labels);
  });
}

} // namespace smelt::train
