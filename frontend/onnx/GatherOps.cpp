// Converters of Gather, GatherElements, GatherND, ScatterElements, ScatterND and
// ReverseSequence. Indices known at import time become a concat of one-wide slices; indices
// known only at run time become smelt.gather and smelt.scatter_add (docs/ops.md) on a view of
// the data whose rows are what an index picks: the gathered axis moved first, or the data
// flattened and each index made a linear position. Their work grows with the output, not with
// the axis (a one-hot mask would be out * K for an axis of K entries: an embedding table of 30k
// rows), and gather's gradient is scatter_add, so imported models train.
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

/// `data` [P, D...] with `updates` [U, D...] landed at rows `index` [U] (i64, in range): added
/// to the rows, or replacing the rows some update lands on (several landing on one row add up,
/// which ONNX leaves undefined). scatter_add sums floats, so integers and booleans go through
/// f64 (exact to 2^53).
Tensor scatterRows(Tensor data, Tensor updates, Tensor index, bool adds) {
  DType dtype = data.dtype();
  DType work = rt::isFloat(dtype) ? dtype : DType::f64;
  int64_t rows = data.dim(0);
  Tensor landed = scatterAdd(convert(updates, work), index, rows);
  Tensor base = convert(data, work), result;
  if (adds) {
    result = add(base, landed);
  } else {
    Tensor hits = scatterAdd(broadcastTo(constant(data.graph(), 1.0, {}, work), updates.shape()),
                             index, rows);
    result = select(compare(hits, scalarLike(hits, 0), CompareDirection::gt), landed, base);
  }
  return convert(result, dtype);
}

/// The row-major position in a tensor of `shape` of each element of `index` (i64, in range),
/// taken as the coordinate along `axis` while the element's own position gives the others:
/// [index's shape].
Tensor positionsAlong(Tensor index, const std::vector<int64_t> &shape, int64_t axis) {
  Graph &g = index.graph();
  Tensor position = index;
  double stride = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    Tensor coordinate = d == axis ? index : iota(g, index.shape(), d, DType::i64);
    Tensor term = stride == 1 ? coordinate : mul(coordinate, scalarLike(coordinate, stride));
    position = d == int64_t(shape.size()) - 1 ? term : add(position, term);
    stride *= double(shape[size_t(d)]);
  }
  return position;
}

/// GatherElements' and ScatterElements' indices: of the data's rank, at most as long as the
/// data on the other axes.
void checkElementIndices(const NodeImporter &n, Tensor data, Tensor indices, int64_t axis) {
  if (indices.rank() != data.rank())
    fail(ImportErrorKind::BadFile, "data and indices must have one rank");
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.dim(d) > data.dim(d))
      fail(ImportErrorKind::BadFile,
           "indices dimension " + std::to_string(d) + " (" + std::to_string(indices.dim(d)) +
               ") is longer than the data's (" + std::to_string(data.dim(d)) + ")");
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
  // out[pre, j..., post] = x[pre, indices[j...], post]: the axis moved first, its rows
  // gathered ([j..., pre..., post...]), then the index dimensions moved to where it was.
  Tensor indices = wrapped(n.input(1), size);
  if (axis == 0) {
    n.setOutput(0, gatherRows(x, indices));
    return;
  }
  int64_t rank = x.rank(), m = indices.rank();
  std::vector<int64_t> toFront = {axis}, back;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      toFront.push_back(d);
  for (int64_t d = 0; d < axis; ++d)
    back.push_back(m + d);
  for (int64_t j = 0; j < m; ++j)
    back.push_back(j);
  for (int64_t d = axis + 1; d < rank; ++d)
    back.push_back(m + d - 1);
  n.setOutput(0, transpose(gatherRows(transpose(x, toFront), indices), back));
}

/// GatherElements: out[p] = x[p with p[axis] = indices[p]], each a linear position in x.
void gatherElements(NodeImporter &n) {
  Tensor x = n.input(0), indices = n.input(1);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), x.rank(), "axis");
  checkElementIndices(n, x, indices, axis);
  Tensor positions = positionsAlong(wrapped(indices, x.dim(axis)), x.shape(), axis);
  n.setOutput(0, gatherRows(reshape(x, {x.numElements()}), positions));
}

/// The reduction of a scatter: "none" replaces, "add" adds; "mul" (opset 16), "max" and "min"
/// (18) are unsupported: smelt.scatter_add only adds.
bool scatterAdds(const NodeImporter &n) {
  std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    n.unsupported("reduction '" + reduction + "' (Smelt's scatter adds: none and add only)");
  return reduction == "add";
}

/// ScatterElements: out[p with p[axis] = indices[p]] = updates[p] (or += with reduction add),
/// each a linear position in the data.
void scatterElements(NodeImporter &n) {
  Tensor data = n.input(0), indices = n.input(1), updates = n.input(2);
  int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), data.rank(), "axis");
  bool adds = scatterAdds(n);
  checkElementIndices(n, data, indices, axis);
  if (updates.shape() != indices.shape())
    fail(ImportErrorKind::BadFile, "updates and indices must have one shape");
  int64_t count = indices.numElements();
  Tensor positions = positionsAlong(wrapped(indices, data.dim(axis)), data.shape(), axis);
  Tensor scattered = scatterRows(reshape(data, {data.numElements()}), reshape(updates, {count}),
                                 reshape(positions, {count}), adds);
  n.setOutput(0, reshape(scattered, data.shape()));
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

/// The data's [P, D...] view for index tuples of length k: its first k dimensions as one.
Tensor tupleRows(Tensor data, int64_t k) {
  std::vector<int64_t> shape = data.shape(), rows = {1};
  for (int64_t i = 0; i < int64_t(shape.size()); ++i)
    i < k ? void(rows[0] *= shape[size_t(i)]) : rows.push_back(shape[size_t(i)]);
  return reshape(data, rows);
}

/// GatherND: each index tuple picks a slice of the data, a row of its tupleRows view. With
/// batch_dims b, the first b dimensions of the data and of the indices are one batch: a tuple
/// of batch item j indexes that item's data (its rows offset by j times the rows of an item).
void gatherND(NodeImporter &n) {
  Tensor data = n.input(0), indices = n.input(1);
  int64_t b = n.attrInt("batch_dims", 0), k = indices.dim(-1);
  std::vector<int64_t> shape = data.shape(), idxShape = indices.shape();
  if (b < 0 || b >= indices.rank() || b + k > data.rank())
    fail(ImportErrorKind::BadFile,
         "batch_dims " + std::to_string(b) + " with indices " + shapeString(idxShape) +
             " into data " + shapeString(shape) +
             " (batch_dims + the tuples' length must not exceed the data's rank)");
  int64_t batch = 1, perItem = 1;
  for (int64_t d = 0; d < b; ++d) {
    if (shape[size_t(d)] != idxShape[size_t(d)])
      fail(ImportErrorKind::BadFile, "batch dimension " + std::to_string(d) + " is " +
                                         std::to_string(shape[size_t(d)]) + " in the data and " +
                                         std::to_string(idxShape[size_t(d)]) + " in the indices");
    batch *= shape[size_t(d)];
  }
  for (int64_t d = b; d < b + k; ++d)
    perItem *= shape[size_t(d)];
  Tensor linear = linearIndex(n, indices, std::vector<int64_t>(shape.begin() + b, shape.end()));
  if (b > 0) { // the item's rows come first: j * perItem
    int64_t tuples = linear.dim(0);
    Tensor item = reshape(iota(n.g, {batch, tuples / batch}, 0, DType::i64), {tuples});
    linear = add(linear, mul(item, constant(n.g, double(perItem), {}, DType::i64)));
  }
  Tensor rows = gatherRows(tupleRows(data, b + k), linear); // [U, D...]
  std::vector<int64_t> out(idxShape.begin(), idxShape.end() - 1);
  out.insert(out.end(), shape.begin() + b + k, shape.end());
  n.setOutput(0, reshape(rows, out));
}

/// ReverseSequence: along the time axis, each batch item's first sequence_lens[b] entries
/// reversed and the rest kept, as gathers of the [batch * time, ...] rows at b * time + t',
/// t' = len - 1 - t below len and t from there.
void reverseSequence(NodeImporter &n) {
  Tensor x = n.input(0), lens = n.input(1);
  int64_t timeAxis = n.attrInt("time_axis", 0), batchAxis = n.attrInt("batch_axis", 1);
  if (x.rank() < 2 || !((timeAxis == 0 && batchAxis == 1) || (timeAxis == 1 && batchAxis == 0)))
    fail(ImportErrorKind::BadFile, "time_axis " + std::to_string(timeAxis) + " and batch_axis " +
                                       std::to_string(batchAxis) + " of an input " +
                                       shapeString(x.shape()) + " (they are 0 and 1, either way)");
  int64_t time = x.dim(timeAxis), batch = x.dim(batchAxis);
  if (lens.rank() != 1 || lens.dim(0) != batch || rt::isFloat(lens.dtype()))
    fail(ImportErrorKind::BadFile, "sequence_lens is " + shapeString(lens.shape()) + " " +
                                       dtypeName(lens.dtype()) + ", expected [" +
                                       std::to_string(batch) + "] integers");
  std::vector<int64_t> swap(size_t(x.rank()));
  std::iota(swap.begin(), swap.end(), 0);
  std::swap(swap[0], swap[1]);
  Tensor itemsFirst = batchAxis == 0 ? x : transpose(x, swap); // [batch, time, ...]
  std::vector<int64_t> grid = {batch, time}, rows = itemsFirst.shape();
  rows.erase(rows.begin());
  rows[0] = batch * time;
  Tensor length = broadcastTo(reshape(convert(lens, DType::i64), {batch, 1}), grid);
  Tensor t = iota(n.g, grid, 1, DType::i64);
  Tensor source = select(compare(t, length, CompareDirection::lt),
                         sub(sub(length, scalarLike(length, 1)), t), t);
  Tensor position =
      add(mul(iota(n.g, grid, 0, DType::i64), constant(n.g, double(time), {}, DType::i64)), source);
  Tensor reversed = reshape(gatherRows(reshape(itemsFirst, rows), position), itemsFirst.shape());
  n.setOutput(0, batchAxis == 0 ? reversed : transpose(reversed, swap));
}

/// ScatterND: each index tuple's slice of the data replaced by (or added to) its update.
void scatterND(NodeImporter &n) {
  Tensor data = n.input(0), indices = n.input(1), updates = n.input(2);
  bool adds = scatterAdds(n);
  int64_t k = indices.dim(-1);
  Tensor linear = linearIndex(n, indices, data.shape()), rows = tupleRows(data, k);
  std::vector<int64_t> updateRows = rows.shape();
  updateRows[0] = linear.dim(0);
  int64_t rowElements = 1; // a data slice's: the product of the dims after the first k
  for (int64_t i = 1; i < rows.rank(); ++i)
    rowElements *= rows.dim(i);
  if (updates.numElements() != rowElements * linear.dim(0))
    fail(ImportErrorKind::BadFile, "updates do not match the indices and the data");
  n.setOutput(0,
              reshape(scatterRows(rows, reshape(updates, updateRows), linear, adds), data.shape()));
}

} // namespace

Tensor gatherRows(Tensor table, Tensor index) {
  if (table.dtype() != DType::i1)
    return smelt::gather(table, index);
  // i1 tables go through i32: smelt.gather takes numbers.
  Tensor rows = smelt::gather(convert(table, DType::i32), index);
  return compare(rows, scalarLike(rows, 0), CompareDirection::ne);
}

void addGatherOps(ConverterTable &t) {
  t["Gather"] = gather;
  t["GatherElements"] = gatherElements;
  t["GatherND"] = gatherND;
  t["ScatterElements"] = scatterElements;
  t["Scatter"] = scatterElements; // its name before opset 11
  t["ScatterND"] = scatterND;
  t["ReverseSequence"] = reverseSequence;
}

} // namespace smelt::onnx
