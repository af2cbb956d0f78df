// Converters of ONNX's network ops outside convolution and pooling, normalization and attention:
// MatMul (NumPy batch broadcasting, 1-D operands), Gemm, Softmax/LogSoftmax (both opset
// conventions) and Dropout (the identity at inference). The table entry of this family also
// adds the windowed ops and Einsum.
#include "frontend/onnx/NodeImporter.h"

#include "frontend/Layers.h"
#include "ir/SmeltDialect.h"

#include <algorithm>
#include <numeric>

namespace smelt::onnx {
namespace {

std::vector<int64_t> leading(const std::vector<int64_t> &shape, size_t drop) {
  return {shape.begin(), shape.end() - int64_t(drop)};
}

/// When `x` is a transpose that swaps only its last two dimensions (a weight [N, K] read as
/// [K, N], as Hugging Face's Linear layers export): its operand, which a matmul reads with its
/// transpose flag, so that no transposed copy of the weight is made.
std::optional<Tensor> swappedLastTwo(Tensor x) {
  auto transpose = x.value().getDefiningOp<TransposeOp>();
  if (!transpose || x.rank() < 2)
    return std::nullopt;
  llvm::ArrayRef<int64_t> perm = transpose.getPermutation();
  size_t rank = perm.size();
  for (size_t i = 0; i + 2 < rank; ++i)
    if (perm[i] != int64_t(i))
      return std::nullopt;
  if (perm[rank - 2] != int64_t(rank - 1) || perm[rank - 1] != int64_t(rank - 2))
    return std::nullopt;
  return Tensor(&x.graph(), transpose.getX());
}

} // namespace

Tensor numpyMatmul(Tensor a, Tensor b) {
  if (a.rank() == 0 || b.rank() == 0)
    fail(ImportErrorKind::BadFile, "MatMul's inputs are at least 1-D; input " +
                                       std::string(a.rank() == 0 ? "A" : "B") + " is a scalar");
  // NumPy: a 1-D lhs is a row, a 1-D rhs a column, and that dimension leaves the result.
  bool rowVector = a.rank() == 1, columnVector = b.rank() == 1;
  if (rowVector)
    a = reshape(a, {1, a.dim(0)});
  if (columnVector)
    b = reshape(b, {b.dim(0), 1});
  std::vector<int64_t> batchA = leading(a.shape(), 2), batchB = leading(b.shape(), 2);
  auto product = [](const std::vector<int64_t> &dims) {
    return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<>());
  };
  if (!batchA.empty() && product(batchB) == 1 && batchA.size() >= batchB.size()) {
    // Activations times a weight matrix (a Linear over [batch, seq, features]): the batch
    // dimensions of `a` are more rows of one matmul. Broadcasting the weights to every batch
    // entry would materialize them that many times (ViT-B/16: 24 of 197 x 768 x 2304 floats).
    int64_t k = a.dim(-1);
    Tensor lhs = reshape(a, {product(batchA) * a.dim(-2), k});
    std::optional<Tensor> weightRows = swappedLastTwo(b);
    Tensor rows = weightRows ? matmul(lhs, reshape(*weightRows, {b.dim(-1), b.dim(-2)}),
                                      /*transposeA=*/false, /*transposeB=*/true)
                             : matmul(lhs, reshape(b, {b.dim(-2), b.dim(-1)}));
    std::vector<int64_t> shape = batchA;
    if (!rowVector)
      shape.push_back(a.dim(-2));
    if (!columnVector)
      shape.push_back(b.dim(-1));
    return reshape(rows, shape);
  }
  if (batchA != batchB) {
    // Broadcast the batch dimensions of both to their common shape.
    std::vector<int64_t> batch = batchA.size() >= batchB.size() ? batchA : batchB;
    std::vector<int64_t> other = batchA.size() >= batchB.size() ? batchB : batchA;
    other.insert(other.begin(), batch.size() - other.size(), 1);
    for (size_t i = 0; i < batch.size(); ++i)
      if (batch[i] == 1)
        batch[i] = other[i];
    auto withBatch = [&](Tensor x) {
      std::vector<int64_t> shape = batch;
      shape.push_back(x.dim(-2));
      shape.push_back(x.dim(-1));
      return broadcastTo(x, shape);
    };
    a = withBatch(a);
    b = withBatch(b);
  }
  std::optional<Tensor> bRows = batchA == batchB ? swappedLastTwo(b) : std::nullopt;
  Tensor y = bRows ? matmul(a, *bRows, /*transposeA=*/false, /*transposeB=*/true) : matmul(a, b);
  std::vector<int64_t> shape = leading(y.shape(), 2);
  if (!rowVector)
    shape.push_back(y.dim(-2));
  if (!columnVector)
    shape.push_back(y.dim(-1));
  return rowVector || columnVector ? reshape(y, shape) : y;
}

namespace {

void matMulOp(NodeImporter &n) { n.setOutput(0, numpyMatmul(floatInput(n, 0), floatInput(n, 1))); }

void gemm(NodeImporter &n) {
  Tensor a = floatInput(n, 0), b = floatInput(n, 1);
  Tensor y = matmul(a, b, n.attrInt("transA", 0) != 0, n.attrInt("transB", 0) != 0);
  if (double alpha = n.attrFloat("alpha", 1.0); alpha != 1.0)
    y = mul(y, scalarLike(y, alpha));
  if (std::optional<Tensor> c = n.optionalInput(2)) {
    double beta = n.attrFloat("beta", 1.0);
    y = add(y, beta == 1.0 ? *c : mul(*c, scalarLike(*c, beta)));
  }
  n.setOutput(0, y);
}

void softmaxLike(NodeImporter &n, bool logarithm) {
  Tensor x = floatInput(n, 0);
  auto apply = [&](Tensor t, int64_t axis) { return logarithm ? logSoftmax(t, axis) : softmax(t, axis); };
  if (n.opset >= 13) {
    n.setOutput(0, apply(x, normalizeAxis(n, n.attrInt("axis", -1), x.rank(), "axis")));
    return;
  }
  // Before opset 13 the input is read as 2-D: [dims before axis, dims from axis on].
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 1), x.rank(), "axis");
  std::vector<int64_t> s = x.shape();
  int64_t outer = std::accumulate(s.begin(), s.begin() + axis, int64_t(1), std::multiplies<>());
  int64_t inner = std::accumulate(s.begin() + axis, s.end(), int64_t(1), std::multiplies<>());
  n.setOutput(0, reshape(apply(reshape(x, {outer, inner}), 1), s));
}
void softmaxOp(NodeImporter &n) { softmaxLike(n, false); }
void logSoftmaxOp(NodeImporter &n) { softmaxLike(n, true); }

/// The identity at inference. In importInto's training steps, and wherever the node's
/// training_mode input is true (a graph exported in training mode), a mask drawn from the
/// node's index (and the binding's seed), offset by the binding's step when there is one (a
/// fresh mask per training step; at inference the same mask every run, as the random ops
/// draw), with the ratio of the node (an attribute before opset 12, an input from it; 0.5 by
/// default). The mask output is the kept elements.
void dropout(NodeImporter &n) {
  bool trainingMode = n.opset >= 12 && n.hasInput(2) &&
                      n.constantInput(2, "training_mode").values.at(0) != 0;
  Tensor x = n.input(0);
  if (!n.training() && !trainingMode) {
    n.setOutput(0, x);
    if (n.wantsOutput(1))
      n.setOutput(1, constant(n.g, 1.0, x.shape(), DType::i1));
    return;
  }
  double ratio = n.opset >= 12 ? (n.hasInput(1) ? n.constantInput(1, "ratio").values.at(0) : 0.5)
                               : n.attrFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1))
    n.unsupported("ratio " + std::to_string(ratio) + " (it must be in [0, 1))");
  uint64_t seed = nodeSeed(n);
  std::optional<Tensor> step = drawOffset(n);
  n.setOutput(0, smelt::dropout(x, ratio, seed, true, step));
  if (n.wantsOutput(1)) { // smelt::dropout's draws (one op after CSE) at or above the ratio
    Tensor u = rngUniform(n.g, x.shape(), seed, 0, 1, x.dtype(), step);
    n.setOutput(1, compare(u, scalarLike(u, ratio), CompareDirection::ge));
  }
}

} // namespace

void addNeuralOps(ConverterTable &t) {
  t["MatMul"] = matMulOp;
  t["Gemm"] = gemm;
  t["Softmax"] = softmaxOp;
  t["LogSoftmax"] = logSoftmaxOp;
  t["Dropout"] = dropout;
  addWindowOps(t);
  addEinsumOp(t);
}

} // namespace smelt::onnx
