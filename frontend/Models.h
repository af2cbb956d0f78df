// Ready-made models the demo, the tools and the tests share.
#pragma once

#include "frontend/Layers.h"

namespace smelt {

/// The seed MLP classifier: dense+ReLU layers of `layers[1..n-2]` units on a [batch,
/// layers[0]] input, then a linear layer of layers.back() logits. With `dropout` > 0 and
/// `training`, dropout follows each hidden layer, its mask drawn anew for each `step`.
Tensor mlpClassifier(Graph &g, Tensor x, const std::vector<int64_t> &layers,
                     double dropoutRate = 0, bool training = false, uint64_t dropoutSeed = 0,
                     std::optional<Tensor> step = std::nullopt, Loc loc = Loc::current());

} // namespace smelt
