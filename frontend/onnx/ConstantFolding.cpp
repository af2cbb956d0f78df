// Import-time evaluation of small integer and float computations on known values. Exporters
// compute shapes in the graph (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, or
// TorchScript's pads: Concat -> Reshape -> Slice backwards -> Transpose -> Reshape -> Pad); a
// static-shape compiler needs those values while importing, so nodes whose inputs are all known
// are evaluated here on TensorValues instead of becoming ops. Each result is rounded to its
// element type as ONNX Runtime computes it (f32 arithmetic in f32, int32 wrapping), so a folded
// value is the value the op would have produced.
#include "frontend/onnx/NodeImporter.h"

#include "ir/SmeltDialect.h"
#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <functional>
#include <numeric>
#include <set>

namespace smelt::onnx {
namespace {

/// Larger known values are left to the ops: folding is for shape arithmetic.
constexpr size_t kMaxFoldedElements = 1 << 16;

bool isInteger(DType t) { return !rt::isFloat(t); }

int64_t elementCount(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
}

/// `x` rounded to what an element of `type` holds.
double roundTo(double x, DType type) {
  auto viaAPFloat = [x](const llvm::fltSemantics &semantics) {
    llvm::APFloat value(x);
    bool inexact;
    value.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &inexact);
    return value.convertToDouble();
  };
  switch (type) {
  case DType::f32:
    return double(float(x));
  case DType::f16:
    return viaAPFloat(llvm::APFloat::IEEEhalf());
  case DType::bf16:
    return viaAPFloat(llvm::APFloat::BFloat());
  case DType::f64:
    return x;
  case DType::i32:
    return double(int32_t(uint32_t(uint64_t(int64_t(x))))); // two's complement wrap
  case DType::i64:
    return std::trunc(x);
  case DType::i1:
    return x != 0;
  }
  return x;
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

/// NumPy-broadcast elementwise `f` of `inputs` (an element of each, in order) into `type`.
TensorValue broadcastEach(const std::vector<const TensorValue *> &inputs, DType type,
                          const std::function<double(const std::vector<double> &)> &f) {
  TensorValue out;
  out.type = type;
  for (const TensorValue *in : inputs)
    out.shape = broadcastShapes(out.shape, in->shape);
  std::vector<std::vector<int64_t>> strides;
  for (const TensorValue *in : inputs)
    strides.push_back(broadcastStrides(in->shape, out.shape.size()));
  int64_t count = elementCount(out.shape);
  std::vector<double> args(inputs.size());
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i;
    std::vector<int64_t> source(inputs.size(), 0);
    for (size_t d = out.shape.size(); d-- > 0;) {
      int64_t index = rest % out.shape[d];
      rest /= out.shape[d];
      for (size_t k = 0; k < inputs.size(); ++k)
        source[k] += index * strides[k][d];
    }
    for (size_t k = 0; k < inputs.size(); ++k)
      args[k] = inputs[k]->values[size_t(source[k])];
    out.values.push_back(roundTo(f(args), type));
  }
  return out;
}

/// ONNX's Mod: with fmod=1, C's fmod (the dividend's sign); with fmod=0 (integers only), the
/// divisor's sign, as Python's %.
double modValue(double x, double y, bool integer, bool fmod) {
  if (integer && y == 0)
    fail(ImportErrorKind::BadFile, "integer Mod by zero");
  if (!integer && !fmod)
    fail(ImportErrorKind::BadFile, "Mod of floats needs fmod=1");
  double r = std::fmod(x, y);
  if (!fmod && r != 0 && (r < 0) != (y < 0))
    r += y;
  return r;
}

TensorValue binary(const TensorValue &a, const TensorValue &b, const std::string &op, bool fmod) {
  bool comparison = op == "Equal" || op == "Less" || op == "Greater";
  bool integer = isInteger(a.type);
  return broadcastEach(
      {&a, &b}, comparison ? DType::i1 : a.type, [&](const std::vector<double> &xy) {
        double x = xy[0], y = xy[1];
        if (integer && (op == "Add" || op == "Sub" || op == "Mul")) {
          // In two's complement, wrapping as ONNX Runtime's integers do, before
          // the result becomes a double (which holds no 60-bit product).
          uint64_t i = uint64_t(int64_t(x)), j = uint64_t(int64_t(y));
          uint64_t r = op == "Add" ? i + j : op == "Sub" ? i - j : i * j;
          return a.type == DType::i32 ? double(int32_t(uint32_t(r))) : double(int64_t(r));
        }
        if (op == "Add")
          return x + y;
        if (op == "Sub")
          return x - y;
        if (op == "Mul")
          return x * y;
        if (op == "Div") {
          if (integer && y == 0)
            fail(ImportErrorKind::BadFile, "integer division by zero");
          return integer ? std::trunc(x / y) : x / y;
        }
        if (op == "Mod")
          return modValue(x, y, integer, fmod);
        if (op == "Min")
          return std::min(x, y);
        if (op == "Max")
          return std::max(x, y);
        if (op == "Equal")
          return double(x == y);
        if (op == "Less")
          return double(x < y);
        return double(x > y); // Greater
      });
}

TensorValue castValue(const TensorValue &v, int to) {
  std::optional<DType> dtype = smeltDType(to);
  if (!dtype)
    fail(ImportErrorKind::UnsupportedDtype, "cast to " + onnxTypeName(to));
  return broadcastEach({&v}, *dtype, [](const std::vector<double> &x) { return x[0]; });
}

/// Concat of known values along `axis` (1-D shape vectors in practice; any rank works).
TensorValue concatValues(const std::vector<const TensorValue *> &parts, int64_t axis) {
  TensorValue out = *parts[0];
  for (const TensorValue *p : parts) {
    std::vector<int64_t> shape = p->shape;
    if (p->type != out.type || shape.size() != out.shape.size())
      fail(ImportErrorKind::BadFile, "Concat's inputs differ in element type or rank");
    shape[size_t(axis)] = out.shape[size_t(axis)];
    if (shape != out.shape)
      fail(ImportErrorKind::BadFile, "Concat's inputs " + shapeString(out.shape) + " and " +
                                         shapeString(p->shape) + " differ off the axis");
  }
  int64_t outer = elementCount({out.shape.begin(), out.shape.begin() + axis});
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

/// The value of `shape` whose element at index (i0, i1, ...) is `v`'s element at index
/// (source(0, i0), source(1, i1), ...)... for maps where each result dimension reads one
/// dimension `from[d]` of `v`: slices (from = identity) and transposes (from = permutation).
TensorValue remapValues(const TensorValue &v, const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &from,
                        const std::function<int64_t(size_t, int64_t)> &source) {
  TensorValue out;
  out.type = v.type;
  out.shape = shape;
  std::vector<int64_t> inputStrides(v.shape.size(), 1);
  for (size_t d = v.shape.size(); d-- > 1;)
    inputStrides[d - 1] = inputStrides[d] * v.shape[d];
  int64_t count = elementCount(shape);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offset = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      offset += source(d, rest % shape[d]) * inputStrides[size_t(from[d])];
      rest /= shape[d];
    }
    out.values.push_back(v.values[size_t(offset)]);
  }
  return out;
}

TensorValue sliceValues(const NodeImporter &n, const TensorValue &v) {
  std::vector<SliceAxis> axes = sliceAxes(n, v.shape);
  std::vector<int64_t> shape, identity(v.shape.size());
  std::iota(identity.begin(), identity.end(), 0);
  for (const SliceAxis &a : axes)
    shape.push_back(a.count);
  return remapValues(v, shape, identity, [&](size_t d, int64_t i) {
    return axes[d].start + i * axes[d].step;
  });
}

TensorValue transposeValues(const NodeImporter &n, const TensorValue &v) {
  std::vector<int64_t> reversed(v.shape.size());
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  std::vector<int64_t> perm = n.attrInts("perm", reversed), sorted = perm,
                       identity(v.shape.size());
  std::sort(sorted.begin(), sorted.end());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    fail(ImportErrorKind::BadFile, "perm " + shapeString(perm) +
                                       " is not a permutation of the dimensions of " +
                                       shapeString(v.shape));
  std::vector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(v.shape[size_t(p)]);
  return remapValues(v, shape, perm, [](size_t, int64_t i) { return i; });
}

/// How many inputs each folded op needs (its optional ones may follow).
const std::map<std::string, int> &foldedOpInputs() {
  static const std::map<std::string, int> inputs = {
      {"Add", 2},   {"Sub", 2},     {"Mul", 2},    {"Div", 2},     {"Neg", 1},
      {"Cast", 1},  {"Concat", 1},  {"Gather", 2}, {"Equal", 2},   {"Less", 2},
      {"Greater", 2}, {"Slice", 1}, {"Transpose", 1}, {"Where", 3}, {"Expand", 2},
      {"Mod", 2},   {"Min", 1},     {"Max", 1},    {"Abs", 1}};
  return inputs;
}

} // namespace

std::vector<std::string> foldedOps() {
  std::vector<std::string> ops;
  for (const auto &[op, inputs] : foldedOpInputs())
    ops.push_back(op);
  for (const char *op : {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
    ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

bool foldKnownNode(NodeImporter &n) {
  const std::string &op = n.node.op_type();
  auto folded = foldedOpInputs().find(op);
  if (folded == foldedOpInputs().end())
    return false;
  for (int i = 0; i < folded->second; ++i)
    if (!n.hasInput(i))
      fail(ImportErrorKind::BadFile, op + " needs " + std::to_string(folded->second) +
                                         (folded->second == 1 ? " input" : " inputs") +
                                         "; input " + std::to_string(i) + " is missing");
  std::vector<const TensorValue *> inputs;
  std::vector<int64_t> broadcast; // the shape elementwise ops and Expand produce
  for (int i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i))
      continue; // an optional input left out (Slice's axes or steps)
    if (!n.isKnown(i) || n.knownElements(i) > int64_t(kMaxFoldedElements))
      return false;
    inputs.push_back(&n.constantInput(i, "input"));
  }
  const TensorValue &x = *inputs[0];
  if (op != "Concat" && op != "Gather" && op != "Slice" && op != "Transpose") {
    // Elementwise (and Expand): the broadcast result must stay small too.
    for (size_t i = 0; i < inputs.size(); ++i)
      broadcast = broadcastShapes(broadcast, op == "Expand" && i == 1
                                                 ? n.intsInput(1, "the shape")
                                                 : inputs[i]->shape);
    if (std::any_of(broadcast.begin(), broadcast.end(), [](int64_t d) { return d < 0; }))
      fail(ImportErrorKind::BadFile, "a negative dimension in " + shapeString(broadcast));
    if (elementCount(broadcast) > int64_t(kMaxFoldedElements))
      return false;
  }
  if (op == "Neg" || op == "Abs") {
    bool negate = op == "Neg";
    n.setConstantOutput(0, broadcastEach({&x}, x.type, [negate](const std::vector<double> &v) {
                          return negate ? -v[0] : std::abs(v[0]);
                        }));
  } else if (op == "Cast") {
    n.setConstantOutput(0, castValue(x, int(n.attrInt("to", 0))));
  } else if (op == "Concat") {
    int64_t rank = int64_t(x.shape.size());
    int64_t axis = normalizeAxis(n, n.attrInt("axis", 0), rank, "axis");
    n.setConstantOutput(0, concatValues(inputs, axis));
  } else if (op == "Gather") {
    if (x.shape.size() != 1 || n.attrInt("axis", 0) != 0)
      return false; // gathers of data are not import-time arithmetic
    n.setConstantOutput(0, gatherValues(x, *inputs[1]));
  } else if (op == "Slice") {
    n.setConstantOutput(0, sliceValues(n, x));
  } else if (op == "Transpose") {
    n.setConstantOutput(0, transposeValues(n, x));
  } else if (op == "Where") {
    if (inputs[1]->type != inputs[2]->type)
      return false;
    n.setConstantOutput(0, broadcastEach(inputs, inputs[1]->type, [](const std::vector<double> &v) {
                          return v[0] != 0 ? v[1] : v[2];
                        }));
  } else if (op == "Expand") {
    TensorValue target; // zeros of the result's shape: only its shape counts
    target.shape = broadcast;
    target.values.assign(size_t(elementCount(broadcast)), 0.0);
    n.setConstantOutput(0, broadcastEach({&x, &target}, x.type,
                                         [](const std::vector<double> &v) { return v[0]; }));
  } else {
    // Min and Max take one or more inputs, folded left to right; on integers only (shape
    // arithmetic), leaving floats' NaN rules to the op.
    if ((op == "Min" || op == "Max") && !isInteger(x.type))
      return false;
    TensorValue result = x;
    for (size_t i = 1; i < inputs.size(); ++i) {
      if (inputs[i]->type != x.type)
        return false;
      result = binary(result, *inputs[i], op, n.attrInt("fmod", 0) != 0);
    }
    if (inputs.size() < 2 && op != "Min" && op != "Max")
      return false;
    n.setConstantOutput(0, result);
  }
  return true;
}

void recordKnownResult(NodeImporter &n) {
  // These only reinterpret the row-major elements with the shape the converter computed.
  static const std::set<std::string> shapeOnly = {"Reshape", "Squeeze", "Unsqueeze", "Flatten",
                                                  "Identity"};
  if (!shapeOnly.count(n.node.op_type()) || !n.isKnown(0) || !n.wantsOutput(0) ||
      n.knownOutput(0) || n.knownElements(0) > int64_t(kMaxFoldedElements))
    return;
  TensorValue v = n.constantInput(0, "input");
  Tensor out = n.output(0);
  v.shape = out.shape();
  n.setOutput(0, out, v);
}

} // namespace smelt::onnx
