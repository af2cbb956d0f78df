// Converters of Gather and GatherElements. Smelt has no gather op: indices known at import time
// become a concat of one-wide slices; indices only known at run time become a one-hot mask over
// the gathered axis, multiplied out and summed (out * K work for an axis of K entries: right
// for the small tables of label picks and shape arithmetic, slow for large embeddings).
#include "frontend/onnx/NodeImporter.h"

#include <numeric>

namespace smelt::onnx {
namespace {

/// Run-time `indices` (any integer type, negative counting from the end of an axis of `size`)
/// as i64 in [0, size).
Tensor wrapped(Tensor indices, int64_t size) {
  Graph &g = indices.graph();
  Tensor i = convert(indices, DType::i64);
  return select(compare(i, constant(g, 0.0, {}, DType::i64), CompareDirection::lt),
                add(i, constant(g, double(size), {}, DType::i64)), i);
}

/// sum over k of `table`[..., k] where `index`[...] == k: `table` [..., K] and `index` [...]
/// of one shape but the last dimension.
Tensor pickByMask(Tensor table, Tensor index) {
  std::vector<int64_t> shape = table.shape();
  Tensor mask = indexMask(index, shape, int64_t(shape.size()) - 1);
  return reduceSum(select(mask, table, scalarLike(table, 0)), {int64_t(shape.size()) - 1});
}

/// `x` with dimension `axis` moved last.
Tensor axisLast(Tensor x, int64_t axis) {
  std::vector<int64_t> order(size_t(x.rank()));
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + axis);
  order.push_back(axis);
  return foldingTranspose(x, order);
}

void gather(NodeImporter &n) {
  Tensor x = n.input(0);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), x.rank(), "axis"), size = x.dim(axis);
  std::vector<int64_t> dataShape = x.shape(), shape;
  if (n.isKnown(1)) {
    const TensorValue &indices = n.constantInput(1, "the indices");
    std::vector<int64_t> picks;
    for (double v : indices.values) {
      int64_t i = int64_t(v) < 0 ? int64_t(v) + size : int64_t(v);
      if (i < 0 || i >= size)
        fail(ImportErrorKind::BadFile, "index " + std::to_string(int64_t(v)) +
                                           " is out of range for a dimension of " +
                                           std::to_string(size));
      picks.push_back(i);
    }
    if (picks.empty())
      n.unsupported("an empty list of indices");
    shape = dataShape;
    shape.erase(shape.begin() + axis);
    shape.insert(shape.begin() + axis, indices.shape.begin(), indices.shape.end());
    n.setOutput(0, reshape(pickAlong(x, axis, picks), shape));
    return;
  }
  // out[pre, j..., post] = x[pre, indices[j...], post]: the table x with the axis last,
  // broadcast over the index dimensions, picked by the one-hot mask of the indices.
  Tensor indices = n.input(1);
  std::vector<int64_t> idxShape = indices.shape();
  shape.assign(dataShape.begin(), dataShape.begin() + axis);
  shape.insert(shape.end(), idxShape.begin(), idxShape.end());
  shape.insert(shape.end(), dataShape.begin() + axis + 1, dataShape.end());
  std::vector<int64_t> tableShape = shape, tableDims, indexDims;
  tableShape.push_back(size);
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    bool isIndexDim = d >= axis && d < axis + int64_t(idxShape.size());
    (isIndexDim ? indexDims : tableDims).push_back(d);
  }
  tableDims.push_back(int64_t(shape.size()));
  Tensor table = broadcastInDim(axisLast(x, axis), tableShape, tableDims);
  Tensor index = broadcastInDim(wrapped(indices, size), shape, indexDims);
  n.setOutput(0, pickByMask(table, index));
}

void gatherElements(NodeImporter &n) {
  Tensor x = n.input(0), indices = n.input(1);
  if (indices.rank() != x.rank())
    fail(ImportErrorKind::BadFile, "data and indices must have one rank");
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), x.rank(), "axis"), size = x.dim(axis);
  // out[p] = x[p with p[axis] = indices[p]]: x cut to the indices' extent on the other axes,
  // the axis last and broadcast over the indices' positions along it.
  std::vector<int64_t> start(size_t(x.rank()), 0), limit = indices.shape();
  limit[size_t(axis)] = size;
  Tensor table = axisLast(slice(x, start, limit), axis);
  std::vector<int64_t> shape = indices.shape(), tableShape = shape, dims;
  tableShape.push_back(size);
  for (int64_t d = 0; d <= x.rank(); ++d)
    if (d != axis)
      dims.push_back(d);
  n.setOutput(0, pickByMask(broadcastInDim(table, tableShape, dims), wrapped(indices, size)));
}

} // namespace

void addGatherOps(ConverterTable &t) {
  t["Gather"] = gather;
  t["GatherElements"] = gatherElements;
}

} // namespace smelt::onnx
