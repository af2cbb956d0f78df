// The importer's inside: what a converter of one ONNX op sees (its node's inputs, attributes
// and outputs, through NodeImporter), how it fails (a Failure carrying an ImportErrorKind), and
// the table from op type to converter that the op files fill. Not part of the public API.
#pragma once

#include "frontend/Graph.h"
#include "frontend/Ops.h"
#include "frontend/onnx/ImportInto.h"

#include "onnx/onnx_pb.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace smelt::onnx {

/// Thrown inside the importer, turned into an ImportError at its boundary.
struct Failure {
  ImportErrorKind kind;
  std::string message;
  std::string value;
};
[[noreturn]] void fail(ImportErrorKind kind, const std::string &message,
                       const std::string &value = "");

/// The ONNX element type `onnxType` (TensorProto::DataType) as Smelt's, if Smelt has it.
std::optional<DType> smeltDType(int onnxType);
/// INT8, UINT8, INT16 and UINT16, which Smelt carries as i32 holding the same integers: the
/// importer tracks which values have them (Values::narrow), wraps arithmetic on them to their
/// range as ONNX Runtime computes it, and QuantizeLinear saturates to it.
bool isNarrowInteger(int onnxType);
/// The [lowest, highest] value of narrow integer type `onnxType`.
std::pair<int64_t, int64_t> narrowRange(int onnxType);
/// "FLOAT", "UINT8", ...: for messages.
std::string onnxTypeName(int onnxType);
/// A TensorProto's element type, shape and element count, checked: a type Smelt has, a valid
/// shape (errors name `what`).
struct TensorLayout {
  DType dtype;
  std::vector<int64_t> shape;
  int64_t count;
  int onnxType;     // the file's element type
  size_t fileWidth; // bytes per element in the file (1 for UINT8 carried as i32)
};
TensorLayout tensorLayout(const ::onnx::TensorProto &proto, const std::string &what);
/// The contents of `proto`, whose data is in the proto (ExternalData::inlineInto brings an
/// external tensor's in); `what` names it in errors (unsupported dtype, a short tensor).
TensorValue tensorValue(const ::onnx::TensorProto &proto, const std::string &what);
/// A constant op holding `value`.
Tensor constantTensor(Graph &g, const TensorValue &value);

/// A large initializer kept as the file's little-endian, row-major bytes rather than as
/// doubles: it becomes a dense_resource constant or a parameter's value without conversion.
/// Bytes that `owner` keeps alive: a raw_data string moved out of its proto, or a memory-mapped
/// external data file.
struct WeightBytes {
  std::shared_ptr<const void> owner;
  llvm::StringRef data;
  bool fileMapped = false; // a read-only mapping of the file
};
struct Weight {
  DType dtype;
  std::vector<int64_t> shape;
  WeightBytes bytes;
  /// A narrow integer type (INT8 ...) whose bytes are at the file's width, else 0.
  int narrowType = 0;
  int64_t count() const;
};
/// Element `i` of `w` (at its file width for a narrow integer weight).
double weightElement(const Weight &w, int64_t i);
/// `proto`'s contents as a Weight; its raw data is moved out of `proto`, not copied. Not for
/// bool tensors (MLIR stores i1 constants as bits) nor external ones (ExternalData::weight).
Weight weightValue(::onnx::TensorProto &proto, const std::string &what);
/// A weight of `layout` from its file bytes, as they are (narrow integers too: weightConstant
/// and weightTensor widen them to i32 where an op reads them as integers).
Weight fileWeight(const TensorLayout &layout, WeightBytes bytes);
/// Fails unless `size` bytes hold the `layout`'s elements exactly.
void checkRawSize(const std::string &what, size_t size, const TensorLayout &layout);
/// A Weight as a known value (an op that reads it at import time).
TensorValue weightAsValue(const Weight &w);
/// A constant op named `name` holding `w` in a dense_resource blob that shares its bytes.
Tensor weightConstant(Graph &g, const std::string &name, const Weight &w);
/// The runtime's tensor of `w` (a parameter's value for `smelt import --weights-out`).
rt::HostTensor weightTensor(const Weight &w);

/// Every named value built so far, the contents of those known at import time, and the large
/// initializers that become constants when an op reads them.
struct Values {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, TensorValue> constants;
  std::map<std::string, Weight> weights;
  /// importInto's parameters and variables: their contents are known, but only as initial
  /// values, so no op is folded from them (that would cut them out of training).
  std::set<std::string> trainable;
  /// The variables among them (BatchNormalization's running statistics).
  std::set<std::string> variables;
  /// The values of a narrow integer type (isNarrowInteger), carried as i32: their ONNX type.
  std::map<std::string, int> narrow;
};

/// One node being converted: a converter reads its inputs and attributes and sets its outputs.
class NodeImporter {
public:
  NodeImporter(Graph &graph, const ::onnx::NodeProto &node, int index, Values &values,
               int64_t opset, const GraphBinding *binding)
      : g(graph), node(node), index(index), opset(opset), binding(binding), values_(values) {}

  Graph &g;
  const ::onnx::NodeProto &node;
  int index; // the node's position in the graph

  /// Inputs: a missing optional input is an empty name or one past the end.
  bool hasInput(int i) const { return i < node.input_size() && !node.input(i).empty(); }
  Tensor input(int i) const;
  std::optional<Tensor> optionalInput(int i) const;
  /// The contents of input `i`, which must be known now (a DataDependentShape error if not).
  const TensorValue &constantInput(int i, const std::string &what) const;
  std::vector<int64_t> intsInput(int i, const std::string &what) const;
  int numInputs() const { return node.input_size(); }

  /// Attributes, with ONNX's defaults given by the caller.
  const ::onnx::AttributeProto *attribute(const std::string &name) const;
  int64_t attrInt(const std::string &name, int64_t fallback) const;
  double attrFloat(const std::string &name, double fallback) const;
  std::vector<int64_t> attrInts(const std::string &name, std::vector<int64_t> fallback) const;
  std::string attrString(const std::string &name, std::string fallback) const;
  /// An element-type attribute (an ONNX TensorProto type: Cast's to, the random ops' dtype),
  /// `fallback` when absent; an UnsupportedDtype failure for a type Smelt does not have.
  DType attrDType(const std::string &name, DType fallback) const;

  /// Outputs: `known`, when given, records the value's contents for later static uses.
  int numOutputs() const { return node.output_size(); }
  bool wantsOutput(int i) const { return i < node.output_size() && !node.output(i).empty(); }
  void setOutput(int i, Tensor t, std::optional<TensorValue> known = std::nullopt);
  /// Sets output `i` to a constant of `value`, known for later static uses.
  void setConstantOutput(int i, const TensorValue &value);

  /// True when input `i` is present and its contents are known now (and fixed: not the
  /// initial value of a parameter or variable of importInto).
  bool isKnown(int i) const {
    return hasInput(i) && !values_.trainable.count(node.input(i)) &&
           (values_.constants.count(node.input(i)) || values_.weights.count(node.input(i)));
  }
  /// True when input `i` is one of importInto's variables.
  bool isVariable(int i) const { return hasInput(i) && values_.variables.count(node.input(i)); }
  /// Known input `i` when it is a large initializer kept as its file's bytes, else null.
  const Weight *knownWeight(int i) const {
    if (!isKnown(i))
      return nullptr;
    auto it = values_.weights.find(node.input(i));
    return it == values_.weights.end() ? nullptr : &it->second;
  }
  /// The number of elements of known input `i` (without reading a large weight as doubles).
  int64_t knownElements(int i) const;
  /// The ONNX type of input `i` when it is a narrow integer (UINT8 ...), else 0.
  int narrowType(int i) const {
    auto it = hasInput(i) ? values_.narrow.find(node.input(i)) : values_.narrow.end();
    return it == values_.narrow.end() ? 0 : it->second;
  }
  /// Records that output `i` holds narrow integer type `onnxType` (0: it does not).
  void setNarrowType(int i, int onnxType) {
    if (!wantsOutput(i))
      return;
    if (isNarrowInteger(onnxType))
      values_.narrow[node.output(i)] = onnxType;
    else
      values_.narrow.erase(node.output(i));
  }
  /// The tensor setOutput gave output `i`.
  Tensor output(int i) const { return values_.tensors.at(node.output(i)); }
  /// The known contents of output `i`'s value, if it has some.
  const TensorValue *knownOutput(int i) const {
    auto it = values_.constants.find(node.output(i));
    return it == values_.constants.end() ? nullptr : &it->second;
  }

  /// An UnsupportedAttribute failure ("pads must be non-negative").
  [[noreturn]] void unsupported(const std::string &reason) const;

  /// The model's opset of the default domain: some ops changed meaning between opsets.
  int64_t opset;
  /// importInto's binding; null for importModel.
  const GraphBinding *binding;
  /// True in importInto's training mode (GraphBinding::training).
  bool training() const { return binding && binding->training; }

  /// Makes input(i) give `t` until clearSubstitutes(): a converter then runs on another
  /// layout of its inputs (convertBelowTranspose).
  void substituteInput(int i, Tensor t) { substitutes_[i] = t; }
  void clearSubstitutes() { substitutes_.clear(); }

private:
  Values &values_;
  std::map<int, Tensor> substitutes_;
};

using Converter = void (*)(NodeImporter &);
using ConverterTable = std::map<std::string, Converter>;

/// Converts elementwise node `n` with `convert` on the sources of the transposes it reads and
/// transposes its results back (TransposeSinking.cpp); false, converting nothing, when `n` is
/// not elementwise or its inputs do not share one transpose.
bool convertBelowTranspose(NodeImporter &n, Converter convert);
/// Each op file adds its converters.
void addElementwiseOps(ConverterTable &table);
void addActivationOps(ConverterTable &table);
void addShapeOps(ConverterTable &table);
void addReduceOps(ConverterTable &table);
void addNeuralOps(ConverterTable &table);
void addNormalizationOps(ConverterTable &table);
void addAttentionOps(ConverterTable &table);
void addMaskOps(ConverterTable &table);
void addLossOps(ConverterTable &table);
void addGatherOps(ConverterTable &table);
void addResizeOps(ConverterTable &table);
void addRecurrentOps(ConverterTable &table);
void addGridOps(ConverterTable &table);
void addRandomOps(ConverterTable &table);
/// The draws of node `n` (RandomOps.cpp; Dropout's masks too): a seed of its own from its
/// index (and, in importInto, the binding's seed), and the counter offset, importInto's step
/// (none at inference, where every run draws the same).
uint64_t nodeSeed(const NodeImporter &n);
std::optional<Tensor> drawOffset(const NodeImporter &n);
void addSignalOps(ConverterTable &table);
void addUnpoolOps(ConverterTable &table);
void addQuantizeOps(ConverterTable &table);
void addIntegerOps(ConverterTable &table); // BitShift (IntegerTypes.cpp)
/// com.microsoft's quantized ops (QuantizeOps.cpp): QLinearAdd, QLinearMul, QLinearConcat, ...
void addMicrosoftQuantizeOps(ConverterTable &table);
/// The converter of `opType` in the com.microsoft domain, or null; the ops that have one.
Converter findMicrosoftConverter(const std::string &opType);
std::vector<std::string> supportedMicrosoftOps();
/// After node `n` is converted (IntegerTypes.cpp): its outputs' narrow integer types, from a
/// Cast's `to`, a Constant's value or the inputs they are computed from, and arithmetic on
/// them (and casts to them) wrapped to their range, as ONNX Runtime's 8- and 16-bit integers
/// wrap. The quantization ops type their outputs themselves.
void settleNarrowOutputs(NodeImporter &n);
/// MaxPool's Indices output (UnpoolOps.cpp): for `pooled` [N, C, O...], the maximum of `x`
/// [N, C, D...] over windows of `kernel` with `strides` and the pads `low` and `high`, the flat
/// position in `x` each maximum came from (row-major, or column-major over the spatial axes).
Tensor maxPoolIndices(Tensor x, Tensor pooled, const std::vector<int64_t> &kernel,
                      const std::vector<int64_t> &strides, const std::vector<int64_t> &low,
                      const std::vector<int64_t> &high, bool columnMajor);
void addWindowOps(ConverterTable &table); // Conv and pooling, called by addNeuralOps
/// ONNX's Conv of `x` [N, C, D...] by `w` [F, C / group, K...] plus `bias` [F], with node
/// `n`'s attributes (pads, strides, dilations, group, auto_pad): Conv, ConvInteger, QLinearConv.
Tensor convolve(const NodeImporter &n, Tensor x, Tensor w, std::optional<Tensor> bias);
/// NumPy's matmul (batch broadcasting, 1-D operands), MatMul's and the integer matmuls'.
Tensor numpyMatmul(Tensor a, Tensor b);
void addEinsumOp(ConverterTable &table);  // called by addNeuralOps
/// An activation function of ONNX's RNN, GRU or LSTM, with the alpha and beta it takes.
struct RecurrentActivation {
  Tensor (*apply)(Tensor x, double alpha, double beta);
  double alpha, beta;
  Tensor operator()(Tensor x) const { return apply(x, alpha, beta); }
};
/// The functions the `activations` attribute of recurrent node `n` names (ActivationOps.cpp),
/// `defaults` per direction when it is absent: `defaults.size()` per direction, forward first.
/// Names match in any case; alphas and betas go to the functions that take them, in order, and
/// a function left without one takes its ONNX op's default.
std::vector<RecurrentActivation> recurrentActivations(const NodeImporter &n,
                                                      const std::vector<std::string> &defaults,
                                                      int64_t directions);
/// One axis of an ONNX Slice as the spec resolves it (negative indices counted from the end,
/// start and end clamped by the direction of the step): entries start, start + step, ...,
/// `count` of them.
struct SliceAxis {
  int64_t start, step, count;
};
/// The axes of Slice node `n` (starts, ends, axes, steps: inputs from opset 10, attributes
/// before) over an input of `shape`, one per dimension; the same for the op and the fold.
std::vector<SliceAxis> sliceAxes(const NodeImporter &n, const std::vector<int64_t> &shape);
/// Import-time evaluation of nodes whose inputs are all known (the Shape -> Slice -> Concat ->
/// Reshape chains exporters write): true when `n`'s outputs were set as known values.
bool foldKnownNode(NodeImporter &n);
/// After a shape-only op (Reshape, Squeeze, Slice, ...) converted a known input: its output is
/// known too.
void recordKnownResult(NodeImporter &n);

/// Fails when `node` does not fit ONNX's schema of its op at `opset` (input and output counts,
/// attribute names), as onnx.checker would; models of opsets newer than libonnx knows pass.
void checkAgainstSchema(const ::onnx::NodeProto &node, int64_t opset);

/// The converter of `opType` in the default domain, or null.
Converter findConverter(const std::string &opType);

/// Input `i`, which must be a float tensor: Smelt's transcendental ops, matmul and the
/// normalizations have no integer form (an UnsupportedDtype failure naming the op).
Tensor floatInput(const NodeImporter &n, int i);
/// Normalizes a possibly negative `axis` of a rank-`rank` tensor; fails naming `what`.
int64_t normalizeAxis(const NodeImporter &n, int64_t axis, int64_t rank, const char *what);
/// NumPy's two-way broadcast of two shapes; fails when they do not broadcast.
std::vector<int64_t> broadcastShapes(std::vector<int64_t> a, std::vector<int64_t> b);
/// The entries `indices` (in range, in that order) of `x` along `axis`: a concat of one-wide
/// slices, for gathers, reversals and reflections with indices known at import time.
Tensor pickAlong(Tensor x, int64_t axis, const std::vector<int64_t> &indices);
/// An i1 tensor of `shape`: true where the index along `axis` equals `indices` (integer, of
/// `shape` without `axis`): one-hot rows, for Hardmax, OneHot and the losses' label picks.
Tensor indexMask(Tensor indices, const std::vector<int64_t> &shape, int64_t axis);
/// `table` [V, D...] at row indices `index` (i64, in range) -> [index dims..., D...], any dtype.
Tensor gatherRows(Tensor table, Tensor index);
/// The largest integer not above each element of float `x` (a truncating convert, corrected
/// below zero), and the nearest integer with ties to even (ONNX's and NumPy's Round).
Tensor floorOf(Tensor x);
Tensor roundHalfEven(Tensor x);
/// Logical and, or of i1 tensors of one shape (as selects: Smelt has no logic ops).
Tensor andOf(Tensor a, Tensor b);
Tensor orOf(Tensor a, Tensor b);
/// `x` with dimension `axis` moved last, and back (transposes that fold with their neighbours).
Tensor axisLast(Tensor x, int64_t axis);
Tensor axisBack(Tensor x, int64_t axis);
/// transpose that folds into a transpose producing `x` (and disappears when they cancel), so
/// the NCHW <-> NHWC transposes around consecutive convolutions and pools vanish.
Tensor foldingTranspose(Tensor x, const std::vector<int64_t> &permutation);
/// The permutation that undoes `permutation` (transposing by one, then the other, is none).
std::vector<int64_t> inversePermutation(const std::vector<int64_t> &permutation);

} // namespace smelt::onnx
