// One builder function per smelt op, plus NumPy-broadcasting arithmetic operators. Each takes
// the caller's source location (a defaulted argument) so an error points at the user's line.
#pragma once

#include "frontend/Graph.h"
#include "ir/SmeltDialect.h"

#include <array>
#include <optional>

namespace smelt {

// Sources.
Tensor constant(Graph &g, double value, const std::vector<int64_t> &shape = {},
                DType dtype = DType::f32, Loc loc = Loc::current());
Tensor constant(Graph &g, const std::vector<double> &values, const std::vector<int64_t> &shape,
                DType dtype = DType::f32, Loc loc = Loc::current());
Tensor iota(Graph &g, const std::vector<int64_t> &shape, int64_t dimension,
            DType dtype = DType::i64, Loc loc = Loc::current());
/// Counter-based draws; `offset` (a rank-0 i64 tensor, such as a step counter) selects a fresh
/// stream per value without recompiling.
Tensor rngUniform(Graph &g, const std::vector<int64_t> &shape, uint64_t seed, double low,
                  double high, DType dtype = DType::f32,
                  std::optional<Tensor> offset = std::nullopt, Loc loc = Loc::current());
Tensor rngNormal(Graph &g, const std::vector<int64_t> &shape, uint64_t seed, double mean,
                 double stddev, DType dtype = DType::f32,
                 std::optional<Tensor> offset = std::nullopt, Loc loc = Loc::current());

// Elementwise, unary: one line each over `unary`, which builds any one-operand smelt op by name.
Tensor unary(const char *op, Tensor x, Loc loc = Loc::current());
inline Tensor neg(Tensor x, Loc loc = Loc::current()) { return unary("smelt.neg", x, loc); }
inline Tensor abs(Tensor x, Loc loc = Loc::current()) { return unary("smelt.abs", x, loc); }
inline Tensor relu(Tensor x, Loc loc = Loc::current()) { return unary("smelt.relu", x, loc); }
inline Tensor exp(Tensor x, Loc loc = Loc::current()) { return unary("smelt.exp", x, loc); }
inline Tensor log(Tensor x, Loc loc = Loc::current()) { return unary("smelt.log", x, loc); }
inline Tensor tanh(Tensor x, Loc loc = Loc::current()) { return unary("smelt.tanh", x, loc); }
inline Tensor logistic(Tensor x, Loc loc = Loc::current()) {
  return unary("smelt.logistic", x, loc);
}
inline Tensor sqrt(Tensor x, Loc loc = Loc::current()) { return unary("smelt.sqrt", x, loc); }
inline Tensor rsqrt(Tensor x, Loc loc = Loc::current()) { return unary("smelt.rsqrt", x, loc); }
inline Tensor erf(Tensor x, Loc loc = Loc::current()) { return unary("smelt.erf", x, loc); }
inline Tensor sin(Tensor x, Loc loc = Loc::current()) { return unary("smelt.sin", x, loc); }
inline Tensor cos(Tensor x, Loc loc = Loc::current()) { return unary("smelt.cos", x, loc); }

// Elementwise, binary, with NumPy broadcasting (explicit broadcast_in_dim in the IR).
Tensor add(Tensor a, Tensor b, Loc loc = Loc::current());
Tensor sub(Tensor a, Tensor b, Loc loc = Loc::current());
Tensor mul(Tensor a, Tensor b, Loc loc = Loc::current());
Tensor div(Tensor a, Tensor b, Loc loc = Loc::current());
Tensor maximum(Tensor a, Tensor b, Loc loc = Loc::current());
Tensor minimum(Tensor a, Tensor b, Loc loc = Loc::current());
Tensor pow(Tensor a, Tensor b, Loc loc = Loc::current());
/// a ** exponent, the exponent a scalar of a's dtype.
Tensor pow(Tensor a, double exponent, Loc loc = Loc::current());
/// min(max(x, lo), hi) elementwise (NumPy's clip, PyTorch's clamp); lo <= hi.
Tensor clamp(Tensor x, double lo, double hi, Loc loc = Loc::current());
/// momentum * average + (1 - momentum) * value: an exponential moving average's next value (a
/// batch norm's statistics, the weights' average).
Tensor movingAverage(Tensor average, Tensor value, double momentum, Loc loc = Loc::current());
Tensor compare(Tensor a, Tensor b, CompareDirection direction, Loc loc = Loc::current());
Tensor select(Tensor pred, Tensor onTrue, Tensor onFalse, Loc loc = Loc::current());
Tensor convert(Tensor x, DType dtype, Loc loc = Loc::current());
/// A scalar of `like`'s dtype, broadcast by the caller as needed.
Tensor scalarLike(Tensor like, double value, Loc loc = Loc::current());

// Shape. Axes may be negative (counted from the end, as in NumPy).
Tensor broadcastTo(Tensor x, const std::vector<int64_t> &shape, Loc loc = Loc::current());
Tensor broadcastInDim(Tensor x, const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &dims, Loc loc = Loc::current());
/// One dimension may be -1: it takes what the element count leaves.
Tensor reshape(Tensor x, std::vector<int64_t> shape, Loc loc = Loc::current());
Tensor transpose(Tensor x, const std::vector<int64_t> &permutation, Loc loc = Loc::current());
Tensor slice(Tensor x, const std::vector<int64_t> &start, const std::vector<int64_t> &limit,
             std::vector<int64_t> strides = {}, Loc loc = Loc::current());
Tensor concat(const std::vector<Tensor> &parts, int64_t axis, Loc loc = Loc::current());
Tensor pad(Tensor x, const std::vector<int64_t> &low, const std::vector<int64_t> &high,
           double value = 0, Loc loc = Loc::current());

// Reductions. With KeepDims::yes the reduced axes stay as size 1 (NumPy's keepdims=True), so
// the result broadcasts against x.
enum class KeepDims { no, yes };
Tensor reduceSum(Tensor x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tensor reduceSum(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc = Loc::current());
Tensor reduceMax(Tensor x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tensor reduceMax(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc = Loc::current());
Tensor reduceMin(Tensor x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tensor reduceMin(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc = Loc::current());
Tensor mean(Tensor x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tensor mean(Tensor x, std::vector<int64_t> axes, KeepDims keep, Loc loc = Loc::current());
/// The population variance (divided by the count, as NumPy's default and layer norm use):
/// mean((x - mean(x))^2) over `axes`.
Tensor variance(Tensor x, std::vector<int64_t> axes, KeepDims keep = KeepDims::no,
                Loc loc = Loc::current());
Tensor argmax(Tensor x, int64_t axis, Loc loc = Loc::current());

// Gather and scatter (docs/ops.md): indices are i32 or i64, clamped into [0, rows).
/// table [V, D...] at indices [B...] -> [B..., D...]: row indices[b] of the table for each b.
Tensor gather(Tensor table, Tensor indices, Loc loc = Loc::current());
/// updates [B..., D...] added at indices [B...] into `rows` zero rows -> [rows, D...]; the
/// gradient of gather with respect to its table. f16/bf16 sums are kept in f32.
Tensor scatterAdd(Tensor updates, Tensor indices, int64_t rows, Loc loc = Loc::current());

// Contractions. Windows: strides {sh, sw}, padding {top, bottom, left, right}, dilation;
// `groups` is the feature group count (filter [KH, KW, C/groups, F]; depthwise: groups == C).
using Pair = std::array<int64_t, 2>;
using Quad = std::array<int64_t, 4>;
Tensor matmul(Tensor a, Tensor b, bool transposeA = false, bool transposeB = false,
              Loc loc = Loc::current());
Tensor conv2d(Tensor input, Tensor filter, Pair strides = {1, 1}, Quad padding = {0, 0, 0, 0},
              Pair dilation = {1, 1}, int64_t groups = 1, Loc loc = Loc::current());
Tensor conv2dBackwardInput(Tensor gradOutput, Tensor filter,
                           const std::vector<int64_t> &inputShape, Pair strides, Quad padding,
                           Pair dilation = {1, 1}, int64_t groups = 1, Loc loc = Loc::current());
Tensor conv2dBackwardFilter(Tensor input, Tensor gradOutput,
                            const std::vector<int64_t> &filterShape, Pair strides, Quad padding,
                            Pair dilation = {1, 1}, int64_t groups = 1,
                            Loc loc = Loc::current());
Tensor maxPool2d(Tensor input, Pair window, Pair strides, Quad padding = {0, 0, 0, 0},
                 Loc loc = Loc::current());
Tensor avgPool2d(Tensor input, Pair window, Pair strides, Quad padding = {0, 0, 0, 0},
                 Loc loc = Loc::current());
Tensor maxPool2dBackward(Tensor input, Tensor gradOutput, Pair window, Pair strides,
                         Quad padding = {0, 0, 0, 0}, Loc loc = Loc::current());
Tensor avgPool2dBackward(Tensor gradOutput, const std::vector<int64_t> &inputShape,
                         Pair window, Pair strides, Quad padding = {0, 0, 0, 0},
                         Loc loc = Loc::current());

// Collectives: a function run by several data-parallel replicas.
/// The sum or mean of `x` over all `replicas` replicas (AllReduceKind::sum / mean).
Tensor allReduce(Tensor x, AllReduceKind kind, int64_t replicas, Loc loc = Loc::current());
/// This replica's index as a rank-0 i64 (0 when run alone).
Tensor replicaId(Graph &g, Loc loc = Loc::current());

/// A Tensor that remembers where the expression using it was written: operators cannot take a
/// defaulted location argument, so their first operand captures it on conversion.
struct Located {
  Tensor tensor;
  Loc loc;
  Located(Tensor t, Loc l = Loc::current()) : tensor(t), loc(l) {}
};

Tensor operator+(Located a, Tensor b);
Tensor operator-(Located a, Tensor b);
Tensor operator*(Located a, Tensor b);
Tensor operator/(Located a, Tensor b);
Tensor operator+(Located a, double b);
Tensor operator-(Located a, double b);
Tensor operator*(Located a, double b);
Tensor operator/(Located a, double b);
Tensor operator+(double a, Located b);
Tensor operator-(double a, Located b);
Tensor operator*(double a, Located b);
Tensor operator/(double a, Located b);
Tensor operator-(Located a);

} // namespace smelt
