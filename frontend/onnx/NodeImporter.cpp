// NodeImporter: a converter's view of one ONNX node (inputs, known input contents, attributes
// with defaults, outputs), and the helpers every op file shares.
#include "frontend/onnx/NodeImporter.h"

#include "ir/SmeltDialect.h"

#include <numeric>

namespace smelt::onnx {

using ::onnx::AttributeProto;

Tensor NodeImporter::input(int i) const {
  if (!hasInput(i))
    fail(ImportErrorKind::BadFile, "input " + std::to_string(i) + " is required but missing");
  if (auto it = substitutes_.find(i); it != substitutes_.end())
    return it->second;
  const std::string &name = node.input(i);
  if (auto it = values_.tensors.find(name); it != values_.tensors.end())
    return it->second;
  // Contents known at import time become a constant op only when an op reads them as a
  // tensor: a Slice's INT64_MAX end never has to fit a tensor.
  if (auto it = values_.constants.find(name); it != values_.constants.end())
    return values_.tensors[name] = constantTensor(g, it->second);
  if (auto it = values_.weights.find(name); it != values_.weights.end())
    return values_.tensors[name] = weightConstant(g, name, it->second);
  fail(ImportErrorKind::BadFile, "input '" + name + "' is not defined before this node");
}

std::optional<Tensor> NodeImporter::optionalInput(int i) const {
  if (!hasInput(i))
    return std::nullopt;
  return input(i);
}

const TensorValue &NodeImporter::constantInput(int i, const std::string &what) const {
  if (!hasInput(i))
    unsupported(what + " (input " + std::to_string(i) + ") is missing");
  auto it = values_.constants.find(node.input(i));
  if (auto weight = values_.weights.find(node.input(i));
      it == values_.constants.end() && weight != values_.weights.end())
    it = values_.constants.emplace(node.input(i), weightAsValue(weight->second)).first;
  if (it == values_.constants.end())
    fail(ImportErrorKind::DataDependentShape,
         what + " (input " + std::to_string(i) + ", '" + node.input(i) +
             "') is only known at run time; Smelt needs it at import time (make it an "
             "initializer or a Constant)",
         node.input(i));
  return it->second;
}

int64_t NodeImporter::knownElements(int i) const {
  if (auto weight = values_.weights.find(node.input(i)); weight != values_.weights.end())
    return weight->second.count();
  return int64_t(constantInput(i, "input").values.size());
}

std::vector<int64_t> NodeImporter::intsInput(int i, const std::string &what) const {
  const TensorValue &v = constantInput(i, what);
  std::vector<int64_t> ints;
  for (double x : v.values)
    ints.push_back(x >= 9.2e18 ? INT64_MAX : x <= -9.2e18 ? INT64_MIN : int64_t(x));
  return ints;
}

const AttributeProto *NodeImporter::attribute(const std::string &name) const {
  for (const AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::attrInt(const std::string &name, int64_t fallback) const {
  const AttributeProto *a = attribute(name);
  return a ? a->i() : fallback;
}

double NodeImporter::attrFloat(const std::string &name, double fallback) const {
  const AttributeProto *a = attribute(name);
  return a ? double(a->f()) : fallback;
}

DType NodeImporter::attrDType(const std::string &name, DType fallback) const {
  const AttributeProto *a = attribute(name);
  if (!a)
    return fallback;
  std::optional<DType> dtype = smeltDType(int(a->i()));
  if (!dtype)
    fail(ImportErrorKind::UnsupportedDtype,
         name + " " + onnxTypeName(int(a->i())) + ", which Smelt does not have");
  return *dtype;
}

std::vector<int64_t> NodeImporter::attrInts(const std::string &name,
                                            std::vector<int64_t> fallback) const {
  const AttributeProto *a = attribute(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

std::string NodeImporter::attrString(const std::string &name, std::string fallback) const {
  const AttributeProto *a = attribute(name);
  return a ? a->s() : fallback;
}

void NodeImporter::setOutput(int i, Tensor t, std::optional<TensorValue> known) {
  if (!wantsOutput(i))
    return;
  values_.tensors[node.output(i)] = t;
  if (known)
    values_.constants[node.output(i)] = std::move(*known);
}

void NodeImporter::setConstantOutput(int i, const TensorValue &value) {
  if (!wantsOutput(i))
    return;
  values_.tensors.erase(node.output(i));
  values_.constants[node.output(i)] = value;
}

void NodeImporter::unsupported(const std::string &reason) const {
  fail(ImportErrorKind::UnsupportedAttribute, reason);
}

Tensor floatInput(const NodeImporter &n, int i) {
  Tensor x = n.input(i);
  if (!rt::isFloat(x.dtype()))
    fail(ImportErrorKind::UnsupportedDtype, "input " + std::to_string(i) + " is " +
                                                dtypeName(x.dtype()) + "; Smelt's " +
                                                n.node.op_type() + " takes float tensors");
  return x;
}

int64_t normalizeAxis(const NodeImporter &n, int64_t axis, int64_t rank, const char *what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    fail(ImportErrorKind::BadFile, std::string(what) + " " + std::to_string(axis) +
                                       " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> broadcastShapes(std::vector<int64_t> a, std::vector<int64_t> b) {
  if (a.size() < b.size())
    std::swap(a, b);
  b.insert(b.begin(), a.size() - b.size(), 1);
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1)
      fail(ImportErrorKind::BadFile, "shapes " + shapeString(a) + " and " + shapeString(b) +
                                         " do not broadcast");
    a[i] = a[i] == 1 ? b[i] : a[i];
  }
  return a;
}

Tensor pickAlong(Tensor x, int64_t axis, const std::vector<int64_t> &indices) {
  // One slice op each: beyond this many, a model wants a gather op Smelt does not have.
  if (indices.size() > (size_t(1) << 16))
    fail(ImportErrorKind::UnsupportedAttribute,
         std::to_string(indices.size()) + " entries picked along an axis (at most 65536)");
  std::vector<Tensor> parts;
  for (int64_t i : indices) {
    std::vector<int64_t> start(size_t(x.rank()), 0), limit = x.shape();
    start[size_t(axis)] = i;
    limit[size_t(axis)] = i + 1;
    parts.push_back(slice(x, start, limit));
  }
  return parts.size() == 1 ? parts[0] : concat(parts, axis);
}

Tensor indexMask(Tensor indices, const std::vector<int64_t> &shape, int64_t axis) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d)
    if (d != axis)
      dims.push_back(d);
  Tensor spread = broadcastInDim(convert(indices, DType::i64), shape, dims);
  return compare(iota(indices.graph(), shape, axis, DType::i64), spread, CompareDirection::eq);
}

/// The permutation that moves dimension `axis` of a rank-`rank` tensor last.
static std::vector<int64_t> axisLastOrder(int64_t rank, int64_t axis) {
  std::vector<int64_t> order(static_cast<size_t>(rank));
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + axis);
  order.push_back(axis);
  return order;
}

Tensor axisLast(Tensor x, int64_t axis) {
  return foldingTranspose(x, axisLastOrder(x.rank(), axis));
}

Tensor axisBack(Tensor x, int64_t axis) {
  return foldingTranspose(x, inversePermutation(axisLastOrder(x.rank(), axis)));
}

std::vector<int64_t> inversePermutation(const std::vector<int64_t> &permutation) {
  std::vector<int64_t> inverse(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i)
    inverse[size_t(permutation[i])] = int64_t(i);
  return inverse;
}

Tensor foldingTranspose(Tensor x, const std::vector<int64_t> &permutation) {
  bool isIdentity = true;
  for (size_t i = 0; i < permutation.size(); ++i)
    isIdentity &= permutation[i] == int64_t(i);
  if (isIdentity)
    return x;
  if (auto producer = x.value().getDefiningOp<TransposeOp>()) {
    // transpose(transpose(y, p), q): result dim i = y dim p[q[i]].
    llvm::ArrayRef<int64_t> inner = producer.getPermutation();
    std::vector<int64_t> composed;
    bool identity = true;
    for (size_t i = 0; i < permutation.size(); ++i) {
      composed.push_back(inner[size_t(permutation[i])]);
      identity &= composed.back() == int64_t(i);
    }
    Tensor y(&x.graph(), producer.getX());
    return identity ? y : transpose(y, composed);
  }
  return transpose(x, permutation);
}

static const ConverterTable &converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    addElementwiseOps(t);
    addActivationOps(t);
    addShapeOps(t);
    addReduceOps(t);
    addNeuralOps(t);
    addNormalizationOps(t);
    addAttentionOps(t);
    addMaskOps(t);
    addLossOps(t);
    addGatherOps(t);
    addResizeOps(t);
    addRecurrentOps(t);
    addGridOps(t);
    addRandomOps(t);
    addSignalOps(t);
    addUnpoolOps(t);
    addQuantizeOps(t);
    addIntegerOps(t);
    return t;
  }();
  return table;
}

Converter findConverter(const std::string &opType) {
  auto it = converters().find(opType);
  return it == converters().end() ? nullptr : it->second;
}

static const ConverterTable &microsoftConverters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    addMicrosoftQuantizeOps(t);
    return t;
  }();
  return table;
}

Converter findMicrosoftConverter(const std::string &opType) {
  auto it = microsoftConverters().find(opType);
  return it == microsoftConverters().end() ? nullptr : it->second;
}

std::vector<std::string> supportedMicrosoftOps() {
  std::vector<std::string> ops;
  for (const auto &[op, convert] : microsoftConverters())
    ops.push_back(op);
  return ops;
}

std::vector<std::string> supportedOps() {
  std::vector<std::string> ops;
  for (const auto &[op, convert] : converters())
    ops.push_back(op);
  return ops;
}

} // namespace smelt::onnx
