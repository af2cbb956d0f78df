// Converters of ONNX's reductions (ReduceSum/Mean/Max/Min and the Prod, L1, L2, SumSquare,
// LogSum, LogSumExp compositions) with axes, keepdims and noop_with_empty_axes, ArgMax/ArgMin,
// TopK and CumSum.
#include "frontend/onnx/NodeImporter.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace smelt::onnx {
namespace {

enum class Reduction { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

/// Smelt has no product reduction: the sign from the count of negative factors, the magnitude
/// exp(sum(log|x|)) (within ONNX's tolerance in float), 0 where a factor is 0.
Tensor product(const NodeImporter &n, Tensor x, const std::vector<int64_t> &axes, KeepDims keep) {
  DType d = x.dtype();
  if (!rt::isFloat(d))
    fail(ImportErrorKind::UnsupportedDtype, "ReduceProd of " + std::string(dtypeName(d)) +
                                                " (Smelt computes it on floats only)");
  Tensor zero = scalarLike(x, 0), one = scalarLike(x, 1);
  Tensor isZero = compare(x, zero, CompareDirection::eq);
  Tensor anyZero = reduceMax(convert(isZero, d), axes, keep);
  Tensor magnitude = exp(reduceSum(log(select(isZero, one, abs(x))), axes, keep));
  Tensor negatives = reduceSum(convert(compare(x, zero, CompareDirection::lt), d), axes, keep);
  Tensor half = mul(negatives, scalarLike(x, 0.5));
  Tensor odd = compare(convert(convert(half, DType::i64), d), half, CompareDirection::ne);
  Tensor withSign = select(odd, neg(magnitude), magnitude);
  return select(compare(anyZero, zero, CompareDirection::gt), scalarLike(withSign, 0), withSign);
}

/// CumSum as a matmul with a triangle of ones along the axis (integers in f64, exact below
/// 2^53): exclusive drops the diagonal, reverse flips the triangle.
void cumSum(NodeImporter &n) {
  Tensor x = n.input(0);
  int64_t axis = normalizeAxis(n, n.intsInput(1, "the axis").at(0), x.rank(), "axis");
  DType d = x.dtype();
  bool isFloat = rt::isFloat(d);
  Tensor work = convert(x, isFloat ? d : DType::f64);
  Tensor last = axisLast(work, axis);
  int64_t length = x.dim(axis), rows = last.numElements() / std::max<int64_t>(length, 1);
  bool exclusive = n.attrInt("exclusive", 0), reverse = n.attrInt("reverse", 0);
  std::vector<double> triangle;
  for (int64_t i = 0; i < length; ++i)
    for (int64_t j = 0; j < length; ++j) // out[j] sums x[i] over these i
      triangle.push_back(reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j));
  Tensor sums = matmul(reshape(last, {rows, length}),
                       constant(n.g, triangle, {length, length}, work.dtype()));
  n.setOutput(0, convert(axisBack(reshape(sums, last.shape()), axis), d));
}

void reduceOp(NodeImporter &n, Reduction kind) {
  Tensor x = n.input(0);
  // ReduceSum took its axes as an input from opset 13, the others from opset 18.
  int64_t axesAsInput = kind == Reduction::Sum ? 13 : 18;
  std::vector<int64_t> given = n.opset >= axesAsInput
                                   ? (n.hasInput(1) ? n.intsInput(1, "axes") : std::vector<int64_t>{})
                                   : n.attrInts("axes", {});
  if (given.empty() && n.attrInt("noop_with_empty_axes", 0)) {
    // Nothing to reduce: what is left is the reduction's elementwise part (SumSquare squares,
    // L1 and L2 take the magnitude, LogSum the log; log(exp x) is x).
    if (kind == Reduction::SumSquare)
      x = mul(x, x);
    else if (kind == Reduction::L1 || kind == Reduction::L2)
      x = abs(x);
    else if (kind == Reduction::LogSum)
      x = log(x);
    n.setOutput(0, x);
    return;
  }
  std::set<int64_t> axisSet;
  for (int64_t a : given)
    axisSet.insert(normalizeAxis(n, a, x.rank(), "axis"));
  if (given.empty())
    for (int64_t d = 0; d < x.rank(); ++d)
      axisSet.insert(d);
  std::vector<int64_t> axes(axisSet.begin(), axisSet.end());
  KeepDims keep = n.attrInt("keepdims", 1) ? KeepDims::yes : KeepDims::no;
  // ReduceMax and ReduceMin of bool (opset 20: any and all) reduce 0s and 1s.
  bool isBool = x.dtype() == DType::i1;
  if (isBool && kind != Reduction::Max && kind != Reduction::Min)
    fail(ImportErrorKind::UnsupportedDtype, "a bool input (only ReduceMax and ReduceMin take one)");
  if (isBool)
    x = convert(x, DType::i32);
  // Below a transpose (the NCHW view of an NHWC activation, as a squeeze-and-excitation block's
  // global pooling reads): its source reduced over the same dimensions, the kept-dims result
  // transposed back, so the reduction reads memory in order and the transposes around it cancel
  // with the convolutions' (TransposeSinking.cpp does the same for elementwise nodes).
  std::optional<std::vector<int64_t>> below;
  if (auto t = x.value().getDefiningOp<TransposeOp>(); t && keep == KeepDims::yes) {
    below = t.getPermutation().vec();
    for (int64_t &a : axes)
      a = (*below)[size_t(a)];
    std::sort(axes.begin(), axes.end());
    x = Tensor(&n.g, t.getX());
  }
  Tensor y;
  switch (kind) {
  case Reduction::Sum:
    y = reduceSum(x, axes, keep);
    break;
  case Reduction::Mean:
    y = mean(x, axes, keep);
    break;
  case Reduction::Max:
    y = reduceMax(x, axes, keep);
    break;
  case Reduction::Min:
    y = reduceMin(x, axes, keep);
    break;
  case Reduction::Prod:
    y = product(n, x, axes, keep);
    break;
  case Reduction::SumSquare:
    y = reduceSum(mul(x, x), axes, keep);
    break;
  case Reduction::L1:
    y = reduceSum(abs(x), axes, keep);
    break;
  case Reduction::L2:
    y = sqrt(reduceSum(mul(x, x), axes, keep));
    break;
  case Reduction::LogSum:
    y = log(reduceSum(x, axes, keep));
    break;
  case Reduction::LogSumExp: {
    // Stable: max + log(sum(exp(x - max))).
    Tensor m = reduceMax(x, axes, KeepDims::yes);
    y = add(log(reduceSum(exp(sub(x, m)), axes, KeepDims::yes)), m);
    if (keep == KeepDims::no)
      y = reduceSum(y, axes, KeepDims::no); // drops the size-1 axes
    break;
  }
  }
  if (below)
    y = foldingTranspose(y, *below);
  n.setOutput(0, isBool ? convert(y, DType::i1) : y);
}

template <Reduction K> void reduction(NodeImporter &n) { reduceOp(n, K); }

void argExtreme(NodeImporter &n, bool isMax) {
  Tensor x = n.input(0);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), x.rank(), "axis");
  Tensor scores = isMax ? x : neg(x);
  Tensor index;
  if (n.attrInt("select_last_index", 0)) {
    // Smelt's argmax picks the first of ties: the first in the reversed axis is the last.
    std::vector<int64_t> reversed;
    for (int64_t k = x.dim(axis) - 1; k >= 0; --k)
      reversed.push_back(k);
    Tensor first = argmax(pickAlong(scores, axis, reversed), axis);
    index = sub(constant(n.g, double(x.dim(axis) - 1), {}, DType::i64), first);
  } else {
    index = argmax(scores, axis);
  }
  if (n.attrInt("keepdims", 1)) {
    std::vector<int64_t> shape = x.shape();
    shape[size_t(axis)] = 1;
    index = reshape(index, shape);
  }
  n.setOutput(0, index);
}
void argMaxOp(NodeImporter &n) { argExtreme(n, true); }

/// TopK as k rounds of argmax: each round's winner (the first of ties, as ONNX wants) is
/// picked by its one-hot mask and then masked out with the lowest value of the type.
void topK(NodeImporter &n) {
  Tensor x = n.input(0);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", -1), x.rank(), "axis");
  int64_t k = n.opset >= 10 ? n.intsInput(1, "k").at(0) : n.attrInt("k", 0);
  if (k < 1 || k > x.dim(axis))
    n.unsupported("k=" + std::to_string(k) + " for an axis of " + std::to_string(x.dim(axis)));
  if (k > 256)
    n.unsupported("k=" + std::to_string(k) + " (Smelt unrolls TopK: at most 256)");
  DType d = x.dtype();
  bool isFloat = rt::isFloat(d);
  double lowest = isFloat ? -INFINITY : d == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  Tensor scores = n.attrInt("largest", 1) ? x : neg(x);
  std::vector<int64_t> shape = x.shape(), kept = shape;
  kept[size_t(axis)] = 1;
  std::vector<Tensor> values, indices;
  for (int64_t i = 0; i < k; ++i) {
    Tensor index = argmax(scores, axis);
    Tensor mask = indexMask(index, shape, axis);
    values.push_back(reshape(reduceSum(select(mask, x, scalarLike(x, 0)), {axis}), kept));
    indices.push_back(reshape(index, kept));
    scores = select(mask, scalarLike(scores, lowest), scores);
  }
  n.setOutput(0, k == 1 ? values[0] : concat(values, axis));
  n.setOutput(1, k == 1 ? indices[0] : concat(indices, axis));
}
void argMinOp(NodeImporter &n) { argExtreme(n, false); }

} // namespace

void addReduceOps(ConverterTable &t) {
  t["ReduceSum"] = reduction<Reduction::Sum>;
  t["ReduceMean"] = reduction<Reduction::Mean>;
  t["ReduceMax"] = reduction<Reduction::Max>;
  t["ReduceMin"] = reduction<Reduction::Min>;
  t["ReduceProd"] = reduction<Reduction::Prod>;
  t["ReduceSumSquare"] = reduction<Reduction::SumSquare>;
  t["CumSum"] = cumSum;
  t["TopK"] = topK;
  t["ReduceL1"] = reduction<Reduction::L1>;
  t["ReduceL2"] = reduction<Reduction::L2>;
  t["ReduceLogSum"] = reduction<Reduction::LogSum>;
  t["ReduceLogSumExp"] = reduction<Reduction::LogSumExp>;
  t["ArgMax"] = argMaxOp;
  t["ArgMin"] = argMinOp;
}

} // namespace smelt::onnx
