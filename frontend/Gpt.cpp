// The GPT model as a composition of layers.
#include "frontend/Gpt.h"

namespace smelt {

std::string GptConfig::check() const {
  if (vocab < 1)
    return "a vocabulary of at least 1 token, got " + std::to_string(vocab);
  if (context < 1 || layers < 1)
    return "a context and a layer count of at least 1, got " + std::to_string(context) +
           " and " + std::to_string(layers);
  if (width < 2 || width % 2)
    return "an even width >= 2 (the sinusoidal positions pair columns), got " +
           std::to_string(width);
  if (heads < 1 || width % heads)
    return std::to_string(heads) + " heads that divide the width " + std::to_string(width);
  if (!(dropout >= 0 && dropout < 1))
    return "a dropout rate in [0, 1), got " + std::to_string(dropout);
  return "";
}

Tensor gptLogits(Tensor tokens, const GptConfig &config, bool training, uint64_t seed,
                 std::optional<Tensor> step, Loc loc) {
  Graph &g = tokens.graph();
  if (std::string why = config.check(); !why.empty())
    g.fail(loc, "gpt: the configuration needs " + why);
  if (tokens.rank() != 2 || tokens.dim(1) != config.context)
    g.fail(loc, "gpt: tokens must be [batch, " + std::to_string(config.context) + "], got " +
                    shapeString(tokens.shape()));
  return g.atomically([&] {
    // Each dropout its own stream: seeds apart by more than any layer uses.
    uint64_t stream = seed * 7919 + 17;
    auto drop = [&](Tensor x) {
      return dropout(x, config.dropout, stream++, training, step, loc);
    };
    // The token rows are gathered (and their gradient scattered), not a one-hot product.
    Tensor x = embedding(tokens, config.vocab, config.width, "token_embedding",
                         Initializer::glorotUniform(), config.dtype, loc);
    x = drop(add(x, positionalEncoding(g, config.context, config.width, x.dtype(), loc), loc));
    for (int64_t l = 0; l < config.layers; ++l) {
      std::string block = "block" + std::to_string(l);
      AttentionOptions attention;
      attention.causal = true;
      attention.dropout = config.dropout;
      attention.seed = stream++;
      attention.training = training;
      attention.step = step;
      Tensor h = layerNorm(x, block + "/norm1", 1e-5, loc);
      x = add(x, drop(multiHeadAttention(h, config.heads, block + "/attention", attention, loc)),
              loc);
      h = layerNorm(x, block + "/norm2", 1e-5, loc);
      h = dense(h, 4 * config.width, block + "/mlp/expand", Activation::GeluTanh,
                Initializer::glorotUniform(), loc);
      h = dense(h, config.width, block + "/mlp/project", Activation::None,
                Initializer::glorotUniform(), loc);
      x = add(x, drop(h), loc);
    }
    x = layerNorm(x, "final_norm", 1e-5, loc);
    return dense(x, config.vocab, "logits", Activation::None, Initializer::glorotUniform(), loc);
  });
}

} // namespace smelt
