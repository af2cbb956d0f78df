// The models `smelt train` offers, as ModelSpecs any user could have written: the
// Fashion-MNIST MLP and CNN classifiers, the character-level GPT and the character LSTM.
#pragma once

#include "frontend/Gpt.h"
#include "runtime/Status.h"
#include "train/Model.h"

namespace smelt::train {

/// "mlp" (784-512-256-10, dropout after each hidden layer), "cnn" (conv-pool-conv-pool,
/// dropout, dense) or "resnet" (resnetClassifier's default: 3 stages of 2 basic blocks, 16, 32
/// and 64 filters, batch norm) on [784] f32 images with i32 labels, reporting accuracy; an
/// error naming the choices for another name. Dropout masks derive from the run's seed.
rt::Expected<ModelSpec> builtinModel(const std::string &name, double dropout);

/// The GPT of `config` as a next-token model: examples and labels are [context] i32 tokens
/// (data::nextTokenWindows), the loss the mean cross-entropy over every position, the metric
/// its token accuracy.
ModelSpec gptModel(const GptConfig &config);

/// The character LSTM: token embeddings, one unrolled LSTM layer (frontend/Recurrent.h) and a
/// projection to the vocabulary at every step.
struct LstmConfig {
  int64_t vocab = 0;    // token ids are in [0, vocab)
  int64_t context = 32; // tokens per sequence: the steps unrolled
  int64_t width = 64;   // embedding width
  int64_t hidden = 128; // LSTM units
  DType dtype = DType::f32;
};

/// The LSTM of `config` as a next-token model, as gptModel: [context] i32 tokens in and out,
/// the mean cross-entropy over every position, its token accuracy.
ModelSpec lstmModel(const LstmConfig &config);

} // namespace smelt::train
