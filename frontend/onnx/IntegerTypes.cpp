// ONNX's 8- and 16-bit integers (INT8, UINT8, INT16, UINT16) carried as Smelt's i32: which
// values have them, and arithmetic wrapped to their range. Quantized models keep weights and
// activations in these types; Smelt has no element type that narrow, and does not need one for
// the values (an i32 holds each exactly). What differs is overflow: 200 + 100 in UINT8 is 44,
// so the results of arithmetic and of casts to a narrow type are reduced modulo 2^8 or 2^16.
#include "frontend/onnx/NodeImporter.h"

#include <cmath>
#include <set>

namespace smelt::onnx {
namespace {

/// Ops whose integer results can leave their inputs' range (the rest select, move, compare or
/// clamp elements of it).
const std::set<std::string> &wrappingOps() {
  static const std::set<std::string> ops = {
      "Add",      "Sub",    "Mul",    "Div",       "Neg",        "Abs",
      "Sum",      "Pow",    "CumSum", "ReduceSum", "ReduceProd", "ReduceSumSquare",
      "ReduceL1", "MatMul", "Einsum", "Cast",      "CastLike",   "BitShift"};
  return ops;
}

/// Ops that give their outputs' types themselves (QuantizeOps.cpp) or produce other types
/// from narrow inputs (the integer matmuls' INT32).
const std::set<std::string> &typedOps() {
  static const std::set<std::string> ops = {
      "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
      "QLinearMatMul", "QLinearConv",
      // com.microsoft's
      "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat",
      "QLinearSoftmax", "QLinearGlobalAveragePool", "QGemm"};
  return ops;
}

double wrapped(double x, int onnxType) {
  auto [lo, hi] = narrowRange(onnxType);
  double span = double(hi - lo + 1);
  double r = std::fmod(x - double(lo), span);
  return (r < 0 ? r + span : r) + double(lo);
}

/// The narrow type node `n`'s outputs hold, or 0.
int outputType(const NodeImporter &n) {
  const std::string &op = n.node.op_type();
  if (op == "Cast") {
    const ::onnx::AttributeProto *to = n.attribute("to");
    return to ? int(to->i()) : 0;
  }
  if (op == "CastLike")
    return n.narrowType(1);
  if (op == "Constant" || op == "ConstantOfShape") {
    const ::onnx::AttributeProto *value = n.attribute("value");
    return value ? value->t().data_type() : 0;
  }
  // The others compute in their inputs' type: the first narrow one (Where's condition is bool).
  for (int i = 0; i < n.numInputs(); ++i)
    if (int type = n.narrowType(i))
      return type;
  return 0;
}

/// `x` (i32) wrapped to narrow integer type `onnxType`'s range (modulo 2^8 or 2^16).
Tensor wrapTo(Tensor x, int onnxType) {
  auto [lo, hi] = narrowRange(onnxType);
  int64_t span = hi - lo + 1;
  // (x - lo) mod span + lo, with a truncating division corrected below zero. x - lo may wrap
  // around i32, which keeps its residue: span divides 2^32.
  Tensor shifted = lo ? sub(x, scalarLike(x, double(lo))) : x;
  Tensor spanT = scalarLike(x, double(span));
  Tensor rest = sub(shifted, mul(div(shifted, spanT), spanT));
  rest = select(compare(rest, scalarLike(x, 0), CompareDirection::lt), add(rest, spanT), rest);
  return lo ? add(rest, scalarLike(x, double(lo))) : rest;
}

/// BitShift of UINT8 and UINT16 (the unsigned types Smelt carries; it has no UINT32 or
/// UINT64): x times or over 2^y. The power is computed in f64 for shifts clamped to 16, since a
/// shift past the width leaves 0 either way. settleNarrowOutputs wraps the left shift.
void bitShift(NodeImporter &n) {
  int type = n.narrowType(0);
  if (type != ::onnx::TensorProto::UINT8 && type != ::onnx::TensorProto::UINT16)
    fail(ImportErrorKind::UnsupportedDtype, "BitShift of " +
                                                std::string(dtypeName(n.input(0).dtype())) +
                                                " (Smelt shifts UINT8 and UINT16)");
  std::string direction = n.attrString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    fail(ImportErrorKind::BadFile,
         "BitShift's direction is '" + direction + "', not LEFT or RIGHT");
  Tensor x = n.input(0);
  Tensor shift = convert(clamp(n.input(1), 0, 16), DType::f64);
  Tensor power = convert(pow(scalarLike(shift, 2), shift), DType::i32);
  n.setOutput(0, direction == "LEFT" ? mul(x, power) : div(x, power));
}

} // namespace

void addIntegerOps(ConverterTable &t) { t["BitShift"] = bitShift; }

void settleNarrowOutputs(NodeImporter &n) {
  if (typedOps().count(n.node.op_type()))
    return;
  int type = outputType(n);
  bool wraps = wrappingOps().count(n.node.op_type()) > 0;
  for (int i = 0; i < n.numOutputs(); ++i) {
    if (!n.wantsOutput(i))
      continue;
    const TensorValue *known = n.knownOutput(i);
    DType dtype = known ? known->type : n.output(i).dtype();
    if (!isNarrowInteger(type) || dtype != DType::i32) {
      n.setNarrowType(i, 0); // an index, a bool, a float: not the inputs' type
      continue;
    }
    n.setNarrowType(i, type);
    if (!wraps)
      continue;
    if (known) {
      TensorValue v = *known;
      for (double &x : v.values)
        x = wrapped(x, type);
      n.setConstantOutput(i, v);
    } else {
      n.setOutput(i, wrapTo(n.output(i), type));
    }
  }
}

} // namespace smelt::onnx
