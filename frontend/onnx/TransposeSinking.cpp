// Elementwise ONNX nodes computed below the transposes they read. ONNX is NCHW and Smelt's
// convolutions and pools NHWC, so the importer puts a transpose on each side of every Conv
// (foldingTranspose). Between two convolutions the pair cancels only if nothing else stands
// between them; an activation (Clip, HardSwish, PRelu), a residual Add or a Mul by a per-channel
// scale would read the NCHW copy and force both transposes to run, each a full pass over the
// activation. An elementwise op commutes with a transpose, so the node is converted on the
// transpose's NHWC source instead, and its result transposed back to NCHW with
// foldingTranspose, where the next Conv's transpose to NHWC cancels it.
#include "frontend/onnx/NodeImporter.h"

#include "ir/SmeltDialect.h"

#include <set>

namespace smelt::onnx {
namespace {

/// Ops whose outputs are their inputs' broadcast shape, each element computed from the
/// inputs' elements at the same index (attributes never name an axis).
const std::set<std::string> &elementwiseOps() {
  static const std::set<std::string> ops = {
      "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "Cast", "CastLike",
      "Ceil", "Celu", "Clip", "Cos", "Cosh", "Div", "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu",
      "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN",
      "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mod", "Mul",
      "Neg", "Not", "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Selu", "Shrink",
      "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Tan",
      "Tanh", "ThresholdedRelu", "Where", "Xor"};
  return ops;
}

/// A small operand that is not a transpose is transposed itself (a constant's transpose is
/// folded at compile time); a large computed one would cost the pass this saves.
constexpr int64_t kSmallOperand = 4096;

} // namespace

bool convertBelowTranspose(NodeImporter &n, Converter convert) {
  if (!elementwiseOps().count(n.node.op_type()))
    return false;
  std::optional<std::vector<int64_t>> permutation;
  std::vector<std::optional<Tensor>> inputs;
  for (int i = 0; i < n.numInputs(); ++i) {
    inputs.push_back(n.optionalInput(i));
    if (auto t = inputs.back() ? inputs.back()->value().getDefiningOp<TransposeOp>() : nullptr;
        t && !permutation)
      permutation = t.getPermutation().vec();
  }
  if (!permutation)
    return false;
  int64_t rank = int64_t(permutation->size());
  std::vector<int64_t> inverse = inversePermutation(*permutation);
  // Each input in the transposes' source layout, or no conversion here at all.
  std::vector<std::optional<Tensor>> sources;
  for (int i = 0; i < n.numInputs(); ++i) {
    std::optional<Tensor> t = inputs[size_t(i)];
    if (!t) {
      sources.push_back(std::nullopt);
      continue;
    }
    if (t->rank() > rank)
      return false;
    auto transpose = t->value().getDefiningOp<TransposeOp>();
    if (transpose && transpose.getPermutation() == llvm::ArrayRef<int64_t>(*permutation)) {
      sources.push_back(Tensor(&n.g, transpose.getX()));
    } else if (t->numElements() == 1) {
      sources.push_back(t); // broadcasts the same way in any layout
    } else if (n.isKnown(i) || t->numElements() <= kSmallOperand) {
      // Broadcasting aligns trailing dimensions: lift to the full rank, then lay it out.
      std::vector<int64_t> shape(size_t(rank - t->rank()), 1);
      for (int64_t d : t->shape())
        shape.push_back(d);
      sources.push_back(foldingTranspose(reshape(*t, shape), inverse));
    } else {
      return false;
    }
  }
  for (int i = 0; i < n.numInputs(); ++i)
    if (sources[size_t(i)])
      n.substituteInput(i, *sources[size_t(i)]);
  convert(n);
  n.clearSubstitutes();
  for (int i = 0; i < n.numOutputs(); ++i)
    if (n.wantsOutput(i) && n.output(i).rank() == rank)
      n.setOutput(i, foldingTranspose(n.output(i), *permutation));
  return true;
}

} // namespace smelt::onnx
