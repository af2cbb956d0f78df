// The models `smelt train` offers, as ModelSpecs any user could have written: the
// Fashion-MNIST MLP and CNN classifiers, and the character-level GPT.
#pragma once

#include "frontend/Gpt.h"
#include "runtime/Status.h"
#include "train/Model.h"

namespace smelt::train {

/// "mlp" (784-512-256-10, dropout after each hidden layer) or "cnn" (conv-pool-conv-pool,
/// dropout, dense) on [784] f32 images with i32 labels, reporting accuracy; an error naming
/// the choices for another name. Dropout masks derive from the run's seed.
rt::Expected<ModelSpec> builtinModel(const std::string &name, double dropout);

/// The GPT of `config` as a next-token model: examples and labels are [context] i32 tokens
/// (data::nextTokenWindows), the loss the mean cross-entropy over every position, the metric
/// its token accuracy.
ModelSpec gptModel(const GptConfig &config);

} // namespace smelt::train
