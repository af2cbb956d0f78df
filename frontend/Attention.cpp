// Scaled dot-product and multi-head attention as compositions of matmul, softmax and dropout.
#include "frontend/Attention.h"

#include <cmath>
#include <numeric>

namespace smelt {

Tensor scaledDotProductAttention(Tensor q, Tensor k, Tensor v, const AttentionOptions &options,
                                 Loc loc) {
  Graph &g = q.graph();
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    g.fail(loc, "attention: q, k and v must be [..., T, d], [..., S, d], [..., S, e] of one "
                "rank >= 2, got " +
                    shapeString(q.shape()) + ", " + shapeString(k.shape()) + ", " +
                    shapeString(v.shape()));
  if (k.dim(-1) != q.dim(-1) || v.dim(-2) != k.dim(-2))
    g.fail(loc, "attention: q " + shapeString(q.shape()) + " and k " + shapeString(k.shape()) +
                    " must share d, k and v " + shapeString(v.shape()) + " the length S");
  if (options.causal && q.dim(-2) != k.dim(-2))
    g.fail(loc, "attention: a causal mask needs as many queries as keys, got " +
                    std::to_string(q.dim(-2)) + " and " + std::to_string(k.dim(-2)));
  return g.atomically([&] {
    double scale = 1.0 / std::sqrt(double(q.dim(-1)));
    Tensor scores = matmul(q, k, /*transposeA=*/false, /*transposeB=*/true, loc);
    // The softmax in f32 at least: bf16/f16 scores lose the small differences it amplifies.
    DType compute = scores.dtype() == DType::f64 ? DType::f64 : DType::f32;
    scores = convert(scores, compute, loc);
    scores = mul(scores, scalarLike(scores, scale, loc), loc);
    if (options.causal) {
      std::vector<int64_t> square = {q.dim(-2), k.dim(-2)};
      Tensor row = iota(g, square, 0, DType::i32, loc);
      Tensor column = iota(g, square, 1, DType::i32, loc);
      Tensor later = compare(column, row, CompareDirection::gt, loc);
      // A finite number, not -inf: exp of it is 0 all the same, and no NaN can come from
      // -inf - -inf where a whole row were masked.
      scores = select(broadcastTo(later, scores.shape(), loc), scalarLike(scores, -1e9, loc),
                      scores, loc);
    }
    Tensor probs = softmax(scores, -1, loc);
    probs = dropout(probs, options.dropout, options.seed, options.training, options.step, loc);
    return matmul(convert(probs, v.dtype(), loc), v, false, false, loc);
  });
}

Tensor multiHeadAttention(Tensor x, int64_t heads, const std::string &name,
                          const AttentionOptions &options, Loc loc) {
  Graph &g = x.graph();
  if (x.rank() != 3)
    g.fail(loc, "multiHeadAttention '" + name + "' needs x [batch, T, width], got " +
                    shapeString(x.shape()));
  int64_t batch = x.dim(0), length = x.dim(1), width = x.dim(2);
  if (heads < 1 || width % heads)
    g.fail(loc, "multiHeadAttention '" + name + "': " + std::to_string(heads) +
                    " heads do not divide the width " + std::to_string(width));
  return g.atomically([&] {
    int64_t headWidth = width / heads;
    // [batch, T, width] -> [batch, heads, T, headWidth]
    auto splitHeads = [&](Tensor t) {
      return transpose(reshape(t, {batch, length, heads, headWidth}, loc), {0, 2, 1, 3}, loc);
    };
    Tensor q = splitHeads(dense(x, width, name + "/query", Activation::None,
                                Initializer::glorotUniform(), loc));
    Tensor k = splitHeads(dense(x, width, name + "/key", Activation::None,
                                Initializer::glorotUniform(), loc));
    Tensor v = splitHeads(dense(x, width, name + "/value", Activation::None,
                                Initializer::glorotUniform(), loc));
    Tensor attended = scaledDotProductAttention(q, k, v, options, loc);
    Tensor merged = reshape(transpose(attended, {0, 2, 1, 3}, loc), {batch, length, width}, loc);
    return dense(merged, width, name + "/output", Activation::None,
                 Initializer::glorotUniform(), loc);
  });
}

} // namespace smelt
