// Converters of ONNX's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the label's entry
// of each row is picked with a one-hot mask (Smelt has no gather), weighted, with ignore_index
// and the none / sum / mean reductions (mean divides by the summed weights, as ONNX does).
#include "frontend/onnx/NodeImporter.h"

#include "frontend/Layers.h"

#include <numeric>

namespace smelt::onnx {
namespace {

/// The loss of log-probabilities `logProb` [N, C, d...] at `target` [N, d...].
Tensor nllLoss(const NodeImporter &n, Tensor logProb, Tensor target, std::optional<Tensor> weight) {
  if (logProb.rank() < 2 || target.rank() != logProb.rank() - 1)
    fail(ImportErrorKind::BadFile, "the input must be [N, C, ...] and the target [N, ...]");
  std::vector<int64_t> shape = logProb.shape();
  Tensor mask = indexMask(target, shape, 1);
  Tensor zero = scalarLike(logProb, 0);
  Tensor picked = reduceSum(select(mask, logProb, zero), {1});
  Tensor weights = weight ? reduceSum(select(mask, broadcastInDim(*weight, shape, {1}), zero), {1})
                          : constant(n.g, 1.0, target.shape(), logProb.dtype());
  if (const ::onnx::AttributeProto *ignore = n.attribute("ignore_index")) {
    Tensor keep = compare(convert(target, DType::i64),
                          constant(n.g, double(ignore->i()), {}, DType::i64), CompareDirection::ne);
    weights = select(keep, weights, zero);
  }
  Tensor loss = neg(mul(picked, weights));
  std::string reduction = n.attrString("reduction", "mean");
  std::vector<int64_t> all(size_t(loss.rank()));
  std::iota(all.begin(), all.end(), 0);
  if (reduction == "none")
    return loss;
  if (reduction == "sum")
    return reduceSum(loss, all);
  if (reduction == "mean")
    return div(reduceSum(loss, all), reduceSum(weights, all));
  n.unsupported("reduction '" + reduction + "'");
}

void negativeLogLikelihoodLoss(NodeImporter &n) {
  n.setOutput(0, nllLoss(n, n.input(0), n.input(1), n.optionalInput(2)));
}

void softmaxCrossEntropyLoss(NodeImporter &n) {
  Tensor logProb = logSoftmax(n.input(0), 1);
  n.setOutput(0, nllLoss(n, logProb, n.input(1), n.optionalInput(2)));
  n.setOutput(1, logProb);
}

} // namespace

void addLossOps(ConverterTable &t) {
  t["NegativeLogLikelihoodLoss"] = negativeLogLikelihoodLoss;
  t["SoftmaxCrossEntropyLoss"] = softmaxCrossEntropyLoss;
}

} // namespace smelt::onnx
