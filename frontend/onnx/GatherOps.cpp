// Converters of Gather, GatherElements, GatherND, ScatterElements and ScatterND. Smelt has no
// gather or scatter op: indices known at import time become a concat of one-wide slices;
// indices only known at run time become a one-hot mask over the gathered axis, multiplied out
// and summed (out * K work for an axis of K entries: right for the small tables of label picks
// and shape arithmetic, slow for large embeddings).
#include "frontend/onnx/NodeImporter.h"


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

/// The reduction of a scatter: "none" replaces, "add" adds; "mul" and others are unsupported.
bool scatterAdds(const NodeImporter &n) {
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    n.unsupported("reduction '" + reduction + "'");
  return reduction == "add";
}

/// data where no update lands, else the updates landing there (replaced, or added to data).
Tensor combine(Tensor data, Tensor landed, Tensor hits, bool adds) {
  return adds ? add(data, landed)
              : select(compare(hits, scalarLike(hits, 0), CompareDirection::gt), landed, data);
}

/// ScatterElements: out[p with p[axis] = indices[p]] = updates[p], through a mask over the
/// data's axis and the indices' positions along it.
void scatterElements(NodeImporter &n) {
  Tensor data = n.input(0), indices = n.input(1), updates = n.input(2);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), data.rank(), "axis"), size = data.dim(axis);
  bool adds = scatterAdds(n);
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.dim(d) != data.dim(d))
      n.unsupported("indices narrower than the data along a non-scatter axis");
  Tensor dataLast = axisLast(data, axis), index = axisLast(wrapped(indices, size), axis);
  Tensor update = axisLast(updates, axis);
  std::vector<int64_t> shape = dataLast.shape(), dims;
  int64_t r = data.rank();
  shape.push_back(indices.dim(axis)); // [others..., K, J]
  for (int64_t d = 0; d < r - 1; ++d)
    dims.push_back(d);
  dims.push_back(r); // J
  Tensor mask = compare(broadcastInDim(index, shape, dims), iota(n.g, shape, r - 1),
                        CompareDirection::eq);
  Tensor spread = broadcastInDim(update, shape, dims);
  Tensor landed = reduceSum(select(mask, spread, scalarLike(spread, 0)), {r});
  Tensor hits = reduceSum(convert(mask, DType::i32), {r});
  n.setOutput(0, axisBack(combine(dataLast, landed, hits, adds), axis));
}

/// The row-major linear index into `shape`'s leading dims of each k-tuple of `indices`
/// [..., k] (negative entries counting from the end), as [U] for U tuples.
Tensor linearIndex(const NodeImporter &n, Tensor indices, const std::vector<int64_t> &shape) {
  int64_t k = indices.dim(-1), tuples = indices.numElements() / std::max<int64_t>(k, 1);
  if (k < 1 || k > int64_t(shape.size()))
    fail(ImportErrorKind::BadFile, "the index tuples are longer than the data's rank");
  Tensor flat = reshape(convert(indices, DType::i64), {tuples, k});
  std::vector<double> strides(static_cast<size_t>(k)), sizes(static_cast<size_t>(k));
  double stride = 1;
  for (int64_t i = k - 1; i >= 0; --i) {
    strides[size_t(i)] = stride;
    sizes[size_t(i)] = double(shape[size_t(i)]);
    stride *= double(shape[size_t(i)]);
  }
  Tensor dimSizes = constant(n.g, sizes, {k}, DType::i64);
  Tensor positive = select(compare(flat, constant(n.g, 0.0, {}, DType::i64), CompareDirection::lt),
                           add(flat, dimSizes), flat);
  return reduceSum(mul(positive, constant(n.g, strides, {k}, DType::i64)), {1});
}

/// [P, U] one-hot of where each of U tuples points among the P leading positions.
Tensor tupleMask(const NodeImporter &n, Tensor linear, int64_t positions) {
  int64_t tuples = linear.dim(0);
  return compare(iota(n.g, {positions, tuples}, 0),
                 broadcastInDim(linear, {positions, tuples}, {1}), CompareDirection::eq);
}

/// GatherND (batch_dims 0): each index tuple picks a slice of the data, as a one-hot matmul.
void gatherND(NodeImporter &n) {
  Tensor data = n.input(0), indices = n.input(1);
  if (n.attrInt("batch_dims", 0) != 0)
    n.unsupported("batch_dims other than 0");
  std::vector<int64_t> shape = data.shape(), idxShape = indices.shape();
  int64_t k = indices.dim(-1);
  Tensor linear = linearIndex(n, indices, shape);
  int64_t positions = 1, rest = 1;
  for (int64_t i = 0; i < int64_t(shape.size()); ++i)
    (i < k ? positions : rest) *= shape[size_t(i)];
  DType d = data.dtype();
  DType work = d == DType::f32 || d == DType::f64 ? d : DType::f64;
  Tensor picks = convert(tupleMask(n, linear, positions), work); // [P, U]
  Tensor rows = matmul(picks, convert(reshape(data, {positions, rest}), work), true, false);
  std::vector<int64_t> out(idxShape.begin(), idxShape.end() - 1);
  out.insert(out.end(), shape.begin() + k, shape.end());
  n.setOutput(0, convert(reshape(rows, out), d));
}

/// ScatterND: each index tuple's slice of the data replaced by (or added to) its update.
void scatterND(NodeImporter &n) {
  Tensor data = n.input(0), indices = n.input(1), updates = n.input(2);
  bool adds = scatterAdds(n);
  std::vector<int64_t> shape = data.shape();
  int64_t k = indices.dim(-1);
  Tensor linear = linearIndex(n, indices, shape);
  int64_t positions = 1, rest = 1, tuples = linear.dim(0);
  for (int64_t i = 0; i < int64_t(shape.size()); ++i)
    (i < k ? positions : rest) *= shape[size_t(i)];
  DType d = data.dtype();
  DType work = d == DType::f32 || d == DType::f64 ? d : DType::f64;
  Tensor mask = convert(tupleMask(n, linear, positions), work); // [P, U]
  Tensor landed = matmul(mask, convert(reshape(updates, {tuples, rest}), work));
  Tensor hits = reduceSum(mask, {1}, KeepDims::yes);
  Tensor flatData = convert(reshape(data, {positions, rest}), work);
  n.setOutput(0, convert(reshape(combine(flatData, landed, broadcastTo(hits, {positions, rest}), adds),
                                 shape),
                         d));
}

} // namespace

void addGatherOps(ConverterTable &t) {
  t["Gather"] = gather;
  t["GatherElements"] = gatherElements;
  t["GatherND"] = gatherND;
  t["ScatterElements"] = scatterElements;
  t["Scatter"] = scatterElements; // its name before opset 11
  t["ScatterND"] = scatterND;
}

} // namespace smelt::onnx
