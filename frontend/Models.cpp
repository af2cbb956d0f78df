// The ready-made models.
#include "frontend/Models.h"

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

} // namespace smelt
