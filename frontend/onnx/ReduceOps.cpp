// Converters of ONNX's reductions (ReduceSum/Mean/Max/Min and the L1, L2, SumSquare, LogSum,
// LogSumExp compositions) with axes, keepdims and noop_with_empty_axes, and ArgMax/ArgMin.
#include "frontend/onnx/NodeImporter.h"

#include <set>

namespace smelt::onnx {
namespace {

enum class Reduction { Sum, Mean, Max, Min, SumSquare, L1, L2, LogSum, LogSumExp };

void reduceOp(NodeImporter &n, Reduction kind) {
  Tensor x = n.input(0);
  // ReduceSum took its axes as an input from opset 13, the others from opset 18.
  int64_t axesAsInput = kind == Reduction::Sum ? 13 : 18;
  std::vector<int64_t> given = n.opset >= axesAsInput
                                   ? (n.hasInput(1) ? n.intsInput(1, "axes") : std::vector<int64_t>{})
                                   : n.attrInts("axes", {});
  if (given.empty() && n.attrInt("noop_with_empty_axes", 0)) {
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
  n.setOutput(0, y);
}

template <Reduction K> void reduction(NodeImporter &n) { reduceOp(n, K); }

void argExtreme(NodeImporter &n, bool isMax) {
  Tensor x = n.input(0);
  if (n.attrInt("select_last_index", 0))
    n.unsupported("select_last_index=1 (Smelt's argmax picks the first of ties)");
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), x.rank(), "axis");
  Tensor index = argmax(isMax ? x : neg(x), axis);
  if (n.attrInt("keepdims", 1)) {
    std::vector<int64_t> shape = x.shape();
    shape[size_t(axis)] = 1;
    index = reshape(index, shape);
  }
  n.setOutput(0, index);
}
void argMaxOp(NodeImporter &n) { argExtreme(n, true); }
void argMinOp(NodeImporter &n) { argExtreme(n, false); }

} // namespace

void addReduceOps(ConverterTable &t) {
  t["ReduceSum"] = reduction<Reduction::Sum>;
  t["ReduceMean"] = reduction<Reduction::Mean>;
  t["ReduceMax"] = reduction<Reduction::Max>;
  t["ReduceMin"] = reduction<Reduction::Min>;
  t["ReduceSumSquare"] = reduction<Reduction::SumSquare>;
  t["ReduceL1"] = reduction<Reduction::L1>;
  t["ReduceL2"] = reduction<Reduction::L2>;
  t["ReduceLogSum"] = reduction<Reduction::LogSum>;
  t["ReduceLogSumExp"] = reduction<Reduction::LogSumExp>;
  t["ArgMax"] = argMaxOp;
  t["ArgMin"] = argMinOp;
}

} // namespace smelt::onnx
