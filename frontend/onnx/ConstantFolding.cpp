// Import-time evaluation of small integer and float computations on known values. Exporters
// compute shapes in the graph (Shape -> Gather -> Unsqueeze -> Concat -> Reshape); a
// static-shape compiler needs those values while importing, so nodes whose inputs are all known
// are evaluated here on TensorValues instead of becoming ops.
#include "frontend/onnx/NodeImporter.h"

#include "ir/SmeltDialect.h"

#include <cmath>
#include <set>

namespace smelt::onnx {
namespace {

/// Larger known values are left to the ops: folding is for shape arithmetic.
constexpr size_t kMaxFoldedElements = 1 << 16;

bool isInteger(TensorValue::Type t) {
  return t == TensorValue::Type::i32 || t == TensorValue::Type::i64 || t == TensorValue::Type::i1;
}

/// Row-major strides of `shape` as seen from a broadcast result of rank `rank`: 0 along
/// broadcast dimensions.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape, size_t rank) {
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[rank - shape.size() + i] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

TensorValue binary(const TensorValue &a, const TensorValue &b, const std::string &op) {
  TensorValue out;
  out.type = op == "Equal" || op == "Less" || op == "Greater" ? TensorValue::Type::i1 : a.type;
  out.shape = broadcastShapes(a.shape, b.shape);
  std::vector<int64_t> sa = broadcastStrides(a.shape, out.shape.size()),
                       sb = broadcastStrides(b.shape, out.shape.size());
  int64_t count = 1;
  for (int64_t d : out.shape)
    count *= d;
  bool integer = isInteger(a.type);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, ia = 0, ib = 0;
    for (size_t d = out.shape.size(); d-- > 0;) {
      int64_t index = rest % out.shape[d];
      rest /= out.shape[d];
      ia += index * sa[d];
      ib += index * sb[d];
    }
    double x = a.values[size_t(ia)], y = b.values[size_t(ib)], r = 0;
    if (op == "Add")
      r = x + y;
    else if (op == "Sub")
      r = x - y;
    else if (op == "Mul")
      r = x * y;
    else if (op == "Div")
      r = integer ? (y == 0 ? 0 : std::trunc(x / y)) : x / y;
    else if (op == "Equal")
      r = x == y;
    else if (op == "Less")
      r = x < y;
    else if (op == "Greater")
      r = x > y;
    out.values.push_back(r);
  }
  return out;
}

TensorValue castValue(TensorValue v, int to) {
  std::optional<DType> dtype = smeltDType(to);
  if (!dtype)
    fail(ImportErrorKind::UnsupportedDtype, "cast to " + onnxTypeName(to));
  v.type = toValueType(*dtype);
  if (v.type == TensorValue::Type::i1)
    for (double &x : v.values)
      x = x != 0;
  else if (isInteger(v.type))
    for (double &x : v.values)
      x = std::trunc(x);
  return v;
}

/// Concat of known values along `axis` (1-D shape vectors in practice; any rank works).
TensorValue concatValues(const std::vector<const TensorValue *> &parts, int64_t axis) {
  TensorValue out = *parts[0];
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out.shape[size_t(d)];
  out.values.clear();
  out.shape[size_t(axis)] = 0;
  for (const TensorValue *p : parts)
    out.shape[size_t(axis)] += p->shape[size_t(axis)];
  for (int64_t o = 0; o < outer; ++o)
    for (const TensorValue *p : parts) {
      size_t block = p->values.size() / size_t(std::max<int64_t>(outer, 1));
      out.values.insert(out.values.end(), p->values.begin() + int64_t(o * block),
                        p->values.begin() + int64_t((o + 1) * block));
    }
  return out;
}

/// Gather along axis 0 of a 1-D value.
TensorValue gatherValues(const TensorValue &data, const TensorValue &indices) {
  TensorValue out;
  out.type = data.type;
  out.shape = indices.shape;
  int64_t size = int64_t(data.values.size());
  for (double x : indices.values) {
    int64_t i = int64_t(x) < 0 ? int64_t(x) + size : int64_t(x);
    if (i < 0 || i >= size)
      fail(ImportErrorKind::BadFile, "Gather index " + std::to_string(int64_t(x)) +
                                         " is out of range for " + std::to_string(size));
    out.values.push_back(data.values[size_t(i)]);
  }
  return out;
}

} // namespace

bool foldKnownNode(NodeImporter &n) {
  const std::string &op = n.node.op_type();
  static const std::set<std::string> foldable = {"Add",  "Sub",    "Mul",    "Div",  "Neg",
                                                 "Cast", "Concat", "Gather", "Equal", "Less",
                                                 "Greater"};
  if (!foldable.count(op) || n.numInputs() == 0)
    return false;
  std::vector<const TensorValue *> inputs;
  for (int i = 0; i < n.numInputs(); ++i) {
    if (!n.isKnown(i))
      return false;
    inputs.push_back(&n.constantInput(i, "input"));
    if (inputs.back()->values.size() > kMaxFoldedElements)
      return false;
  }
  if (op == "Neg") {
    TensorValue v = *inputs[0];
    for (double &x : v.values)
      x = -x;
    n.setConstantOutput(0, v);
  } else if (op == "Cast") {
    n.setConstantOutput(0, castValue(*inputs[0], int(n.attrInt("to", 0))));
  } else if (op == "Concat") {
    int64_t rank = int64_t(inputs[0]->shape.size());
    n.setConstantOutput(0, concatValues(inputs, normalizeAxis(n, n.attrInt("axis", 0), rank, "axis")));
  } else if (op == "Gather") {
    if (inputs[0]->shape.size() != 1 || n.attrInt("axis", 0) != 0)
      return false; // gathers of data are not import-time arithmetic
    n.setConstantOutput(0, gatherValues(*inputs[0], *inputs[1]));
  } else {
    if (inputs.size() != 2 || inputs[0]->type != inputs[1]->type)
      return false;
    n.setConstantOutput(0, binary(*inputs[0], *inputs[1], op));
  }
  return true;
}

/// The elements of `v` that smelt.slice `op` takes.
static TensorValue sliceValues(const TensorValue &v, SliceOp op) {
  llvm::ArrayRef<int64_t> start = op.getStartIndices(), strides = op.getStrides();
  TensorValue out;
  out.type = v.type;
  llvm::ArrayRef<int64_t> shape = op.getType().getShape();
  out.shape.assign(shape.begin(), shape.end());
  std::vector<int64_t> inputStrides = broadcastStrides(v.shape, v.shape.size());
  int64_t count = op.getType().getNumElements();
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, source = 0;
    for (size_t d = out.shape.size(); d-- > 0;) {
      source += (start[d] + (rest % out.shape[d]) * strides[d]) * inputStrides[d];
      rest /= out.shape[d];
    }
    out.values.push_back(v.values[size_t(source)]);
  }
  return out;
}

void recordKnownResult(NodeImporter &n) {
  static const std::set<std::string> shapeOnly = {"Reshape", "Squeeze", "Unsqueeze", "Flatten",
                                                  "Identity", "Slice"};
  if (!shapeOnly.count(n.node.op_type()) || !n.isKnown(0) || !n.wantsOutput(0) ||
      n.knownOutput(0))
    return;
  TensorValue v = n.constantInput(0, "input");
  if (v.values.size() > kMaxFoldedElements)
    return;
  Tensor out = n.output(0);
  if (auto slice = out.value().getDefiningOp<SliceOp>())
    v = sliceValues(v, slice);
  else if (n.node.op_type() == "Slice" && out.shape() != v.shape)
    return;
  v.shape = out.shape();
  n.setOutput(0, out, v);
}

} // namespace smelt::onnx
