// Attention for transformers: scaled dot-product attention over any leading (batch, head)
// dimensions, and the multi-head self-attention layer built from it (Keras'
// MultiHeadAttention with query = key = value, as a decoder-only model uses it).
#pragma once

#include "frontend/Layers.h"

namespace smelt {

/// What an attention call does besides the product itself.
struct AttentionOptions {
  /// Position i attends to positions j <= i only (a decoder's mask): the scores of later
  /// positions are replaced by a large negative number before the softmax.
  bool causal = false;
  /// Dropout on the attention probabilities while training (a fresh mask per `step`).
  double dropout = 0;
  uint64_t seed = 0;
  bool training = false;
  std::optional<Tensor> step;
};

/// softmax(q k^T / sqrt(d)) v for q [..., T, d], k [..., S, d], v [..., S, e] with the same
/// leading dimensions: [..., T, e]. The softmax runs in f32 at least.
Tensor scaledDotProductAttention(Tensor q, Tensor k, Tensor v,
                                 const AttentionOptions &options = {}, Loc loc = Loc::current());

/// Multi-head self-attention on x [batch, T, width]: queries, keys and values are dense
/// projections ("<name>/query", "/key", "/value", each [width, width] with a bias) split into
/// `heads` heads of width / heads, attended per head, concatenated and projected by
/// "<name>/output". `width` must divide by `heads`.
Tensor multiHeadAttention(Tensor x, int64_t heads, const std::string &name,
                          const AttentionOptions &options = {}, Loc loc = Loc::current());

} // namespace smelt
