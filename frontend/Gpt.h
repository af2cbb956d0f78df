// A decoder-only transformer (GPT) for next-token prediction: token embeddings plus sinusoidal
// positions, pre-norm blocks of causal multi-head self-attention and a GELU MLP, a final
// layer norm and a projection to the vocabulary. `smelt train --model=gpt` trains it on
// characters of a text file; its parameters are named "token_embedding/embeddings",
// "block0/attention/query/kernel", ... "logits/kernel".
#pragma once

#include "frontend/Attention.h"

namespace smelt {

struct GptConfig {
  int64_t vocab = 0;   // token ids are in [0, vocab)
  int64_t context = 64; // tokens per sequence
  int64_t width = 128;
  int64_t layers = 4;
  int64_t heads = 4;   // must divide width
  double dropout = 0.1; // after attention and MLP, and on attention probabilities
  /// The parameters' type: f32 (mixed precision casts from these master weights), f64 for
  /// gradient checks.
  DType dtype = DType::f32;

  /// Why the configuration cannot build ("" when it can).
  std::string check() const;
};

/// Next-token logits [batch, context, vocab] for `tokens` [batch, context] (i32 or i64).
/// While `training`, dropout masks derive from `seed` and the step offset `step`.
Tensor gptLogits(Tensor tokens, const GptConfig &config, bool training, uint64_t seed = 0,
                 std::optional<Tensor> step = std::nullopt, Loc loc = Loc::current());

} // namespace smelt
