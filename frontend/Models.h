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

/// A ResNet v1 of basic blocks in the CIFAR form (He et al. 2016, section 4.2).
struct ResnetConfig {
  int64_t stages = 3; // each halves the image and doubles the filters, after the first
  int64_t blocks = 2; // basic blocks per stage
  int64_t width = 16; // the stem's and the first stage's filters
  int64_t classes = 10;
};

/// The logits [batch, classes] of the ResNet of `config` on NHWC `images`: a 3x3 stem, then
/// per stage `blocks` blocks relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)), where the
/// shortcut is x or, when the block halves the image, a strided 1x1 convolution with batch
/// norm; global average pooling and a dense layer. Convolutions have no bias (the batch norm
/// after each has its offset), kernels He normal; batch norm as frontend/Normalization.h in
/// `training` mode or not. Parameters "stem/...", "stage<s>/block<b>/conv<1|2>/...",
/// ".../shortcut/...", "logits/...".
Tensor resnetClassifier(Tensor images, const ResnetConfig &config, bool training,
                        Loc loc = Loc::current());

} // namespace smelt
