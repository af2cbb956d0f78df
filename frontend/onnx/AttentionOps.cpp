// Converters of ONNX's transformer ops: Attention (opsets 23-25: scaled dot-product attention
// with a boolean or additive mask, is_causal, scale, softcap, grouped-query heads, the past and
// present key/value cache, nonpad_kv_seqlen and sliding windows) and RotaryEmbedding (23). Every
// mask becomes one additive bias of 0 and -inf built from iota and compares, as ONNX's function
// body builds it, so a run-time mask or sequence length costs no more than a known one.
#include "frontend/onnx/NodeImporter.h"

#include "frontend/Layers.h"

#include <cmath>

namespace smelt::onnx {
namespace {

/// Q, K or V of rank 3 [B, S, heads * D] as [B, heads, S, D]; rank 4 as it is.
Tensor toHeads(const NodeImporter &n, Tensor x, int64_t heads, const char *what) {
  if (x.rank() == 4)
    return x;
  if (heads < 1 || x.dim(2) % heads)
    fail(ImportErrorKind::BadFile, std::string(what) + " of shape " + shapeString(x.shape()) +
                                       " does not split into " + std::to_string(heads) +
                                       " heads");
  return transpose(reshape(x, {x.dim(0), x.dim(1), heads, x.dim(2) / heads}), {0, 2, 1, 3});
}

/// [B, Hkv, S, D] with each head repeated `times` times in place (h0, h0, h1, h1, ...), as
/// grouped-query attention shares a key/value head between consecutive query heads.
Tensor repeatHeads(Tensor x, int64_t times) {
  if (times == 1)
    return x;
  std::vector<int64_t> s = x.shape();
  Tensor spread = broadcastInDim(x, {s[0], s[1], times, s[2], s[3]}, {0, 1, 3, 4});
  return reshape(spread, {s[0], s[1] * times, s[2], s[3]});
}

/// 0 where `allowed`, -inf elsewhere, of `like`'s type.
Tensor biasOf(Tensor allowed, Tensor like) {
  return select(allowed, scalarLike(like, 0), scalarLike(like, -INFINITY));
}

/// Where query i (of `queries`) may look at key j (of `keys`) by position, a bool tensor: the
/// frontier j <= i + offset (causal), and the window offset + i - left <= j <= offset + i +
/// right for the bounds that are not -1. `offset` (the keys before the query block) is a
/// number, or [B] i64 from nonpad_kv_seqlen (then the result is [B, 1, queries, keys]).
struct PositionRule {
  bool causal;
  int64_t left, right;
};
std::optional<Tensor> positionsAllowed(Graph &g, const PositionRule &rule, int64_t queries,
                                       int64_t keys, int64_t offset,
                                       std::optional<Tensor> perBatchOffset) {
  if (!rule.causal && rule.left < 0 && rule.right < 0)
    return std::nullopt;
  std::vector<int64_t> shape = {queries, keys};
  Tensor i = iota(g, shape, 0, DType::i64), j = iota(g, shape, 1, DType::i64);
  Tensor position = add(i, constant(g, double(offset), {}, DType::i64)); // p = offset + i
  if (perBatchOffset) {
    int64_t batch = perBatchOffset->dim(0);
    shape = {batch, 1, queries, keys};
    position = add(broadcastInDim(position, shape, {2, 3}),
                   broadcastInDim(*perBatchOffset, shape, {0}));
    j = broadcastInDim(j, shape, {2, 3});
  }
  std::optional<Tensor> allowed;
  auto require = [&](Tensor condition) {
    allowed = allowed ? andOf(*allowed, condition) : condition;
  };
  if (rule.causal)
    require(compare(j, position, CompareDirection::le));
  if (rule.left >= 0)
    require(compare(j, sub(position, constant(g, double(rule.left), {}, DType::i64)),
                    CompareDirection::ge));
  if (rule.right >= 0)
    require(compare(j, add(position, constant(g, double(rule.right), {}, DType::i64)),
                    CompareDirection::le));
  return allowed;
}

/// softmax over the last axis where a row whose bias is -inf everywhere (no key allowed) is
/// zeros, not NaN, as ONNX's Attention-23 function body has it.
Tensor guardedSoftmax(Tensor scores, Tensor bias) {
  int64_t last = scores.rank() - 1;
  Tensor lowest = scalarLike(scores, -INFINITY);
  Tensor top = reduceMax(scores, {last}, KeepDims::yes);
  top = select(compare(top, lowest, CompareDirection::eq), scalarLike(top, 0), top);
  Tensor e = exp(sub(scores, top));
  Tensor sum = reduceSum(e, {last}, KeepDims::yes);
  sum = select(compare(sum, scalarLike(sum, 0), CompareDirection::eq), scalarLike(sum, 1), sum);
  Tensor masked = compare(reduceMax(bias, {bias.rank() - 1}, KeepDims::yes),
                          scalarLike(bias, -INFINITY), CompareDirection::eq);
  return select(masked, scalarLike(scores, 0), div(e, sum));
}

void attention(NodeImporter &n) {
  Tensor q = floatInput(n, 0), k = floatInput(n, 1), v = floatInput(n, 2);
  if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
    fail(ImportErrorKind::BadFile, "Q, K and V must all be 3-D or all 4-D; they are " +
                                       shapeString(q.shape()) + ", " + shapeString(k.shape()) +
                                       " and " + shapeString(v.shape()));
  bool threeD = q.rank() == 3;
  if (threeD && (!n.attribute("q_num_heads") || !n.attribute("kv_num_heads")))
    fail(ImportErrorKind::BadFile, "3-D Q, K and V need q_num_heads and kv_num_heads");
  q = toHeads(n, q, n.attrInt("q_num_heads", 0), "Q");
  k = toHeads(n, k, n.attrInt("kv_num_heads", 0), "K");
  v = toHeads(n, v, n.attrInt("kv_num_heads", 0), "V");
  int64_t batch = q.dim(0), queryHeads = q.dim(1), queries = q.dim(2), kvHeads = k.dim(1);
  if (k.dim(0) != batch || v.dim(0) != batch || v.dim(1) != kvHeads || k.dim(3) != q.dim(3) ||
      v.dim(2) != k.dim(2) || queryHeads % kvHeads)
    fail(ImportErrorKind::BadFile,
         "Q " + shapeString(q.shape()) + ", K " + shapeString(k.shape()) + " and V " +
             shapeString(v.shape()) + " (as [batch, heads, sequence, head size]) do not fit: "
             "one batch, one head size for Q and K, one sequence for K and V, and query heads a "
             "multiple of the key/value heads");
  if (n.hasInput(4) != n.hasInput(5))
    fail(ImportErrorKind::BadFile, "past_key and past_value come together");
  bool hasPast = n.hasInput(4);
  std::optional<Tensor> nonpad = n.opset >= 24 ? n.optionalInput(6) : std::nullopt;
  if (hasPast && nonpad)
    fail(ImportErrorKind::BadFile, "nonpad_kv_seqlen does not go with past_key and past_value");
  int64_t pastLength = 0;
  if (hasPast) {
    Tensor pastKey = n.input(4), pastValue = n.input(5);
    pastLength = pastKey.dim(2);
    k = concat({pastKey, k}, 2);
    v = concat({pastValue, v}, 2);
  }
  n.setOutput(1, k);
  n.setOutput(2, v);
  int64_t keys = k.dim(2);
  Graph &g = n.g;

  // The bias: the mask (bool: 0 or -inf; float: added), then the position rules.
  std::optional<Tensor> bias;
  auto addBias = [&](Tensor b) { bias = bias ? add(*bias, b) : b; };
  if (std::optional<Tensor> mask = n.optionalInput(3)) {
    bool isBool = mask->dtype() == DType::i1;
    if (!isBool && mask->dtype() != q.dtype())
      fail(ImportErrorKind::BadFile, "attn_mask is " + std::string(dtypeName(mask->dtype())) +
                                         "; it must be bool or Q's type");
    int64_t missing = mask->rank() ? keys - mask->dim(-1) : -1;
    if (missing < 0)
      fail(ImportErrorKind::BadFile, "attn_mask " + shapeString(mask->shape()) +
                                         " does not end in at most the " + std::to_string(keys) +
                                         " keys");
    std::vector<int64_t> low(size_t(mask->rank()), 0), high = low;
    high.back() = missing; // a shorter mask (an external cache's) leaves the rest out
    Tensor padded = pad(isBool ? convert(*mask, DType::i32) : *mask, low, high,
                        isBool ? 0.0 : -INFINITY);
    addBias(isBool ? biasOf(convert(padded, DType::i1), q) : padded);
  }
  PositionRule rule{n.attrInt("is_causal", 0) != 0, n.attrInt("left_window_size", -1),
                    n.attrInt("right_window_size", -1)};
  if (rule.left < -1 || rule.right < -1)
    n.unsupported("a window size below -1");
  std::optional<Tensor> perBatchOffset;
  if (nonpad) {
    if (nonpad->rank() != 1 || nonpad->dim(0) != batch)
      fail(ImportErrorKind::BadFile, "nonpad_kv_seqlen must be [" + std::to_string(batch) + "]");
    Tensor lengths = convert(*nonpad, DType::i64);
    perBatchOffset = sub(lengths, constant(g, double(queries), {}, DType::i64));
    // Keys at and past a batch's length are padding.
    std::vector<int64_t> shape = {batch, 1, 1, keys};
    addBias(biasOf(compare(iota(g, shape, 3, DType::i64), broadcastInDim(lengths, shape, {0}),
                           CompareDirection::lt),
                   q));
  }
  if (std::optional<Tensor> allowed =
          positionsAllowed(g, rule, queries, keys, pastLength, perBatchOffset))
    addBias(biasOf(*allowed, q));

  // Q and K each scaled by sqrt(scale), as ONNX's reference does (it keeps q k^T in range).
  double scale = n.attrFloat("scale", 1.0 / std::sqrt(double(q.dim(3))));
  Tensor root = scalarLike(q, std::sqrt(scale));
  int64_t groups = queryHeads / kvHeads;
  Tensor raw = matmul(mul(q, root), mul(repeatHeads(k, groups), root), false, true);
  Tensor scores = raw;
  if (double softcap = n.attrFloat("softcap", 0); softcap > 0)
    scores = mul(tanh(div(scores, scalarLike(scores, softcap))), scalarLike(scores, softcap));
  Tensor capped = scores;
  if (bias)
    scores = add(scores, *bias);
  DType work = q.dtype();
  if (const ::onnx::AttributeProto *precision = n.attribute("softmax_precision")) {
    std::optional<DType> d = smeltDType(int(precision->i()));
    if (!d || !rt::isFloat(*d))
      n.unsupported("softmax_precision " + onnxTypeName(int(precision->i())));
    work = *d;
  }
  Tensor probabilities =
      bias ? guardedSoftmax(convert(scores, work), convert(*bias, work))
           : softmax(convert(scores, work), -1);
  probabilities = convert(probabilities, q.dtype());
  if (n.wantsOutput(3)) {
    int64_t mode = n.attrInt("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
      n.unsupported("qk_matmul_output_mode " + std::to_string(mode) + " (0 to 3)");
    Tensor modes[] = {raw, capped, scores, probabilities};
    n.setOutput(3, modes[mode]);
  }
  Tensor y = matmul(probabilities, repeatHeads(v, groups)); // [B, Hq, Sq, Dv]
  if (threeD)
    y = reshape(transpose(y, {0, 2, 1, 3}), {batch, queries, queryHeads * y.dim(3)});
  n.setOutput(0, y);
}

/// RoPE: in each head, pairs (x1, x2) of the first rotary_embedding_dim entries (its two halves,
/// or even and odd entries when interleaved) rotate by their position's angle: x1 cos - x2
/// sin, x1 sin + x2 cos. The caches are [B, S, R/2], or [P, R/2] rows picked by position_ids.
void rotaryEmbedding(NodeImporter &n) {
  Tensor x = floatInput(n, 0), cosine = n.input(1), sine = n.input(2);
  if (x.rank() != 3 && x.rank() != 4)
    fail(ImportErrorKind::BadFile, "X must be 3-D or 4-D, not " + shapeString(x.shape()));
  bool threeD = x.rank() == 3;
  int64_t heads = n.attrInt("num_heads", 0);
  if (threeD && (heads < 1 || x.dim(2) % heads))
    fail(ImportErrorKind::BadFile, "a 3-D X " + shapeString(x.shape()) +
                                       " needs num_heads that divides its last dimension");
  // [B, S, H, D] either way.
  Tensor h = threeD ? reshape(x, {x.dim(0), x.dim(1), heads, x.dim(2) / heads})
                    : transpose(x, {0, 2, 1, 3});
  int64_t batch = h.dim(0), length = h.dim(1), headSize = h.dim(3);
  int64_t rotary = n.attrInt("rotary_embedding_dim", 0);
  rotary = rotary == 0 ? headSize : rotary;
  if (rotary < 2 || rotary % 2 || rotary > headSize)
    fail(ImportErrorKind::BadFile, "rotary_embedding_dim " + std::to_string(rotary) +
                                       " must be even and at most the head size " +
                                       std::to_string(headSize));
  int64_t half = rotary / 2;
  if (std::optional<Tensor> positions = n.optionalInput(3)) {
    if (cosine.rank() != 2 || sine.shape() != cosine.shape() ||
        positions->shape() != std::vector<int64_t>{batch, length})
      fail(ImportErrorKind::BadFile, "with position_ids [B, S], the caches must be [P, R/2]");
    // Positions past the cache read its last row (smelt.gather clamps), where ONNX is undefined.
    Tensor index = convert(*positions, DType::i64);
    cosine = smelt::gather(cosine, index);
    sine = smelt::gather(sine, index);
  }
  std::vector<int64_t> cacheShape = {batch, length, half};
  if (cosine.shape() != cacheShape || sine.shape() != cacheShape)
    fail(ImportErrorKind::BadFile, "the caches are " + shapeString(cosine.shape()) + " and " +
                                       shapeString(sine.shape()) + "; they must be " +
                                       shapeString(cacheShape));
  std::vector<int64_t> pairShape = {batch, length, h.dim(2), half};
  cosine = broadcastInDim(convert(cosine, x.dtype()), pairShape, {0, 1, 3});
  sine = broadcastInDim(convert(sine, x.dtype()), pairShape, {0, 1, 3});
  bool interleaved = n.attrInt("interleaved", 0) != 0;
  std::vector<int64_t> start = {0, 0, 0, 0}, limit = h.shape();
  limit[3] = rotary;
  Tensor rotate = slice(h, start, limit), first, second;
  if (interleaved) {
    Tensor pairs = reshape(rotate, {batch, length, h.dim(2), half, 2});
    first = reshape(slice(pairs, {0, 0, 0, 0, 0}, {batch, length, h.dim(2), half, 1}), pairShape);
    second = reshape(slice(pairs, {0, 0, 0, 0, 1}, {batch, length, h.dim(2), half, 2}), pairShape);
  } else {
    limit[3] = half;
    first = slice(rotate, start, limit);
    start[3] = half;
    limit[3] = rotary;
    second = slice(rotate, start, limit);
  }
  Tensor real = sub(mul(cosine, first), mul(sine, second));
  Tensor imaginary = add(mul(sine, first), mul(cosine, second));
  Tensor rotated = interleaved
                       ? reshape(concat({reshape(real, {batch, length, h.dim(2), half, 1}),
                                         reshape(imaginary, {batch, length, h.dim(2), half, 1})},
                                        4),
                                 {batch, length, h.dim(2), rotary})
                       : concat({real, imaginary}, 3);
  if (rotary < headSize)
    rotated = concat({rotated, slice(h, {0, 0, 0, rotary}, h.shape())}, 3);
  n.setOutput(0, threeD ? reshape(rotated, x.shape()) : transpose(rotated, {0, 2, 1, 3}));
}

} // namespace

void addAttentionOps(ConverterTable &t) {
  t["Attention"] = attention;
  t["RotaryEmbedding"] = rotaryEmbedding;
}

} // namespace smelt::onnx
