// The ready-made models.
#include "frontend/Models.h"

#include "frontend/Normalization.h"

namespace smelt {

Tensor mlpClassifier(Graph &g, Tensor x, const std::vector<int64_t> &layers, double dropoutRate,
                     bool training, uint64_t dropoutSeed, std::optional<Tensor> step, Loc loc) {
  if (layers.size() < 2 || x.rank() != 2 || x.dim(1) != layers[0])
    g.fail(loc, "mlpClassifier needs layer sizes {input, ..., classes} matching a [batch, " +
                    std::to_string(layers.empty() ? 0 : layers[0]) + "] input");
  return g.atomically([&] {
    Tensor h = x;
    for (size_t i = 1; i + 1 < layers.size(); ++i) {
      h = dense(h, layers[i], "dense" + std::to_string(i), Activation::Relu,
                Initializer::glorotUniform(), loc);
      h = dropout(h, dropoutRate, dropoutSeed + i, training, step, loc);
    }
    return dense(h, layers.back(), "logits", Activation::None, Initializer::glorotUniform(),
                 loc);
  });
}

/// bn(conv(x)) without a convolution bias: a k x k kernel "<name>/kernel", "same" padding.
static Tensor convBn(Tensor x, int64_t filters, int64_t kernel, int64_t stride,
                     const std::string &name, bool training, Loc loc) {
  Graph &g = x.graph();
  Tensor w = g.parameter(name + "/kernel", {kernel, kernel, x.dim(3), filters},
                         Initializer::heNormal(), x.dtype(), loc);
  Quad pads = windowPadding(Padding::Same, x.shape(), {kernel, kernel}, {stride, stride},
                            {1, 1}, loc);
  Tensor y = conv2d(x, w, {stride, stride}, pads, {1, 1}, 1, loc);
  // Keras' ResNets: momentum 0.99 learns the averages over ~100 steps; 0.9 (PyTorch's) follows
  // them faster, which short runs need.
  return batchNormalization(y, training, name + "/bn", {/*momentum=*/0.9, /*epsilon=*/1e-5},
                            loc);
}

Tensor resnetClassifier(Tensor images, const ResnetConfig &config, bool training, Loc loc) {
  Graph &g = images.graph();
  if (images.rank() != 4 || config.stages < 1 || config.blocks < 1 || config.width < 1 ||
      config.classes < 1)
    g.fail(loc, "resnetClassifier needs NHWC images and stages, blocks, width and classes >= "
                "1, got images " + shapeString(images.shape()));
  return g.atomically([&] {
    Tensor x = relu(convBn(images, config.width, 3, 1, "stem", training, loc), loc);
    for (int64_t s = 0; s < config.stages; ++s) {
      int64_t filters = config.width << s;
      for (int64_t b = 0; b < config.blocks; ++b) {
        std::string name = "stage" + std::to_string(s) + "/block" + std::to_string(b);
        int64_t stride = s > 0 && b == 0 ? 2 : 1;
        Tensor h = relu(convBn(x, filters, 3, stride, name + "/conv1", training, loc), loc);
        h = convBn(h, filters, 3, 1, name + "/conv2", training, loc);
        Tensor shortcut = x.dim(3) == filters && stride == 1
                              ? x
                              : convBn(x, filters, 1, stride, name + "/shortcut", training, loc);
        x = relu(add(h, shortcut, loc), loc);
      }
    }
    Tensor pooled = mean(x, {1, 2}, loc);
    return dense(pooled, config.classes, "logits", Activation::None,
                 Initializer::glorotUniform(), loc);
  });
}

} // namespace smelt
