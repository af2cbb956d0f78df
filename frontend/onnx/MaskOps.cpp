// Converters of ONNX ops that are masks over indices, built from iota and compare: Hardmax
// (one-hot of the argmax), OneHot, Trilu (a triangle of a matrix) and EyeLike; and the signal
// windows (Hann, Hamming, Blackman), constants known from their size.
#include "frontend/onnx/NodeImporter.h"

#include <cmath>
#include <numeric>

namespace smelt::onnx {
namespace {

void hardmax(NodeImporter &n) {
  Tensor x = n.input(0);
  std::vector<int64_t> shape = x.shape();
  auto oneHotMax = [](Tensor t, int64_t axis) {
    return convert(indexMask(argmax(t, axis), t.shape(), axis), t.dtype());
  };
  if (n.opset >= 13) {
    n.setOutput(0, oneHotMax(x, normalizeAxis(n, n.attrInt("axis", -1), x.rank(), "axis")));
    return;
  }
  // Before opset 13 the input is read as 2-D, as for Softmax.
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 1), x.rank(), "axis");
  int64_t outer = std::accumulate(shape.begin(), shape.begin() + axis, int64_t(1), std::multiplies<>());
  int64_t inner = std::accumulate(shape.begin() + axis, shape.end(), int64_t(1), std::multiplies<>());
  n.setOutput(0, reshape(oneHotMax(reshape(x, {outer, inner}), 1), shape));
}

void oneHot(NodeImporter &n) {
  Tensor indices = convert(n.input(0), DType::i64), values = n.input(2);
  const TensorValue &depthValue = n.constantInput(1, "depth");
  if (depthValue.values.size() != 1 || values.numElements() != 2)
    fail(ImportErrorKind::BadFile, "depth must be a scalar and values [off, on]");
  int64_t depth = int64_t(depthValue.values[0]);
  std::vector<int64_t> shape = indices.shape();
  int64_t axis = normalizeAxis(n, n.attrInt("axis", -1), indices.rank() + 1, "axis");
  shape.insert(shape.begin() + axis, depth);
  // Negative indices count from the end.
  Tensor depthTensor = constant(n.g, double(depth), {}, DType::i64);
  indices = select(compare(indices, constant(n.g, 0.0, {}, DType::i64), CompareDirection::lt),
                   add(indices, depthTensor), indices);
  Tensor flat = reshape(values, {2});
  Tensor off = reshape(slice(flat, {0}, {1}), {}), on = reshape(slice(flat, {1}, {2}), {});
  n.setOutput(0, select(indexMask(indices, shape, axis), on, off));
}

void trilu(NodeImporter &n) {
  Tensor x = n.input(0);
  if (x.rank() < 2)
    fail(ImportErrorKind::BadFile, "Trilu needs a rank of at least 2");
  int64_t k = n.hasInput(1) ? n.intsInput(1, "k").at(0) : 0;
  std::vector<int64_t> shape = x.shape();
  Tensor row = iota(n.g, shape, x.rank() - 2), column = iota(n.g, shape, x.rank() - 1);
  Tensor offset = sub(column, row), kTensor = constant(n.g, double(k), {}, DType::i64);
  bool upper = n.attrInt("upper", 1) != 0;
  Tensor keep = compare(offset, kTensor, upper ? CompareDirection::ge : CompareDirection::le);
  n.setOutput(0, select(keep, x, scalarLike(x, 0)));
}

void eyeLike(NodeImporter &n) {
  Tensor x = n.input(0);
  if (x.rank() != 2)
    fail(ImportErrorKind::BadFile, "EyeLike takes a 2-D input");
  DType dtype = x.dtype();
  if (const ::onnx::AttributeProto *a = n.attribute("dtype")) {
    std::optional<DType> given = smeltDType(int(a->i()));
    if (!given)
      fail(ImportErrorKind::UnsupportedDtype, "dtype " + onnxTypeName(int(a->i())));
    dtype = *given;
  }
  TensorValue eye;
  eye.type = dtype;
  eye.shape = x.shape();
  if (x.numElements() > (int64_t(1) << 28))
    fail(ImportErrorKind::BadFile, "EyeLike of " + std::to_string(x.numElements()) + " elements");
  int64_t k = n.attrInt("k", 0);
  for (int64_t i = 0; i < eye.shape[0]; ++i)
    for (int64_t j = 0; j < eye.shape[1]; ++j)
      eye.values.push_back(j - i == k ? 1.0 : 0.0);
  n.setConstantOutput(0, eye);
}

/// The signal windows, a cosine sum over n / N (N = size, or size - 1 when symmetric), known
/// at import time from the size.
template <int Kind> void window(NodeImporter &n) {
  int64_t size = n.intsInput(0, "the size").at(0);
  if (size < 1 || size > (int64_t(1) << 24))
    n.unsupported("a window of " + std::to_string(size) + " samples");
  double period = double(n.attrInt("periodic", 1) ? size : size - 1);
  TensorValue w;
  std::optional<DType> dtype = smeltDType(int(n.attrInt("output_datatype", 1)));
  if (!dtype)
    fail(ImportErrorKind::UnsupportedDtype, "output_datatype " +
                                                onnxTypeName(int(n.attrInt("output_datatype", 1))));
  w.type = *dtype;
  w.shape = {size};
  for (int64_t i = 0; i < size; ++i) {
    double phase = 2 * M_PI * double(i) / period;
    w.values.push_back(Kind == 0   ? 0.5 - 0.5 * std::cos(phase)                  // Hann
                       : Kind == 1 ? 25.0 / 46 - 21.0 / 46 * std::cos(phase)      // Hamming
                                   : 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2 * phase));
  }
  n.setConstantOutput(0, w);
}

} // namespace

void addMaskOps(ConverterTable &t) {
  t["Hardmax"] = hardmax;
  t["OneHot"] = oneHot;
  t["Trilu"] = trilu;
  t["EyeLike"] = eyeLike;
  t["HannWindow"] = window<0>;
  t["HammingWindow"] = window<1>;
  t["BlackmanWindow"] = window<2>;
}

} // namespace smelt::onnx
