// Lowers a smelt function to an rt::Executable: buffers for values, steps for ops, attributes
// as plain values (docs/ops.md names them), constants as little-endian bytes.
#include "codegen/BuildExecutable.h"

#include "codegen/FusionWalk.h"
#include "ir/SmeltDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace smelt::codegen {

namespace {

/// "file:line:col" of the first file location inside `loc`, or "" when there is none.
std::string locationString(Location loc) {
  std::string text;
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = (file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" +
              std::to_string(file.getColumn()));
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

/// An op's inherent attribute as a plain value; enums become their keyword.
std::optional<rt::AttrValue> plainAttr(Operation &op, Attribute attr) {
  // Enum attributes are integer attributes underneath, so they are told apart by op, not by
  // attribute class (a reduce kind would pass for a compare direction).
  if (auto compare = dyn_cast<CompareOp>(op); compare && attr == compare.getDirectionAttr())
    return std::string(stringifyCompareDirection(compare.getDirection()));
  if (auto reduce = dyn_cast<ReduceOp>(op); reduce && attr == reduce.getKindAttr())
    return std::string(stringifyReduceKind(reduce.getKind()));
  if (auto allReduce = dyn_cast<AllReduceOp>(op); allReduce && attr == allReduce.getKindAttr())
    return std::string(stringifyAllReduceKind(allReduce.getKind()));
  if (isa<UnitAttr>(attr))
    return int64_t(1);
  if (auto b = dyn_cast<BoolAttr>(attr))
    return int64_t(b.getValue());
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getInt();
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto list = dyn_cast<DenseI64ArrayAttr>(attr))
    return std::vector<int64_t>(list.asArrayRef().begin(), list.asArrayRef().end());
  return std::nullopt;
}

/// The elements of a dense constant as little-endian bytes of `dtype`'s width.
FailureOr<std::vector<uint8_t>> constantBytes(ConstantOp op, rt::DType dtype) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError("value must be a dense elements attribute to be compiled, got ")
           << op.getValue();
  size_t width = rt::byteWidth(dtype);
  std::vector<uint8_t> bytes;
  bytes.reserve(size_t(dense.getNumElements()) * width);
  auto append = [&](const llvm::APInt &bits) {
    uint64_t word = bits.zextOrTrunc(64).getZExtValue(); // every dtype is at most 64 bits wide
    for (size_t b = 0; b < width; ++b)
      bytes.push_back(uint8_t(word >> (8 * b)));
  };
  if (rt::isFloat(dtype))
    for (const llvm::APFloat &value : dense.getValues<llvm::APFloat>())
      append(value.bitcastToAPInt());
  else
    for (const llvm::APInt &value : dense.getValues<llvm::APInt>())
      append(value);
  return bytes;
}

std::string smeltName(DictionaryAttr attrs, const char *fallback, unsigned index) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("smelt.name"))
      return name.str();
  return fallback + std::to_string(index);
}

} // namespace

rt::FusedKernel describeKernel(FusionOp fusion, std::string name) {
  rt::FusedKernel kernel;
  kernel.name = std::move(name);
  kernel.kind = stringifyFusionKind(fusion.getKind()).str();
  // A loop kernel's unit is one element of its results; a reduction's, one reduced result.
  auto result = cast<RankedTensorType>(fusion.getResult(0).getType());
  kernel.units = result.getNumElements();
  kernel.numInputs = int64_t(fusion.getInputs().size());
  kernel.numResults = int64_t(fusion.getNumResults());
  for (Operation &op : fusion.getBody().front().without_terminator())
    kernel.ops += (kernel.ops.empty() ? "" : "+") + op.getName().stripDialect().str();
  return kernel;
}

std::vector<FusionOp> fusionsInOrder(func::FuncOp function) {
  auto range = function.getBody().front().getOps<FusionOp>();
  return std::vector<FusionOp>(range.begin(), range.end());
}

std::string argumentName(func::FuncOp function, unsigned index) {
  return smeltName(function.getArgAttrDict(index), "arg", index);
}

std::string resultName(func::FuncOp function, unsigned index) {
  return smeltName(function.getResultAttrDict(index), "result", index);
}

FailureOr<rt::Executable> buildExecutable(func::FuncOp function) {
  rt::Executable exe;
  exe.name = function.getSymName().str();
  if (auto placement = function->getAttrOfType<StringAttr>("smelt.placement"))
    exe.placement = placement.str();
  llvm::DenseMap<Value, rt::BufferId> bufferOf;

  auto addBuffer = [&](Value value, std::string name) -> FailureOr<rt::BufferId> {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    std::optional<rt::DType> dtype = type ? dtypeOf(type.getElementType()) : std::nullopt;
    if (!dtype || !type.hasStaticShape())
      return emitError(value.getLoc()) << "cannot compile a value of type " << value.getType()
                                       << ": Smelt needs static tensors of f32, f16, bf16, "
                                          "f64, i32, i64 or i1";
    rt::BufferId id = rt::BufferId(exe.buffers.size());
    exe.buffers.push_back({rt::TensorType{*dtype, type.getShape().vec()}, std::move(name)});
    bufferOf[value] = id;
    return id;
  };

  if (function.isExternal())
    return function.emitOpError("has no body to compile");
  for (BlockArgument arg : function.getArguments()) {
    FailureOr<rt::BufferId> id = addBuffer(arg, argumentName(function, arg.getArgNumber()));
    if (failed(id))
      return failure();
    exe.inputs.push_back(*id);
  }

  for (Operation &op : function.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        exe.outputs.push_back(bufferOf.at(v));
      break;
    }
    if (!isa<SmeltDialect>(op.getDialect()))
      return op.emitOpError("is not a smelt op; only smelt ops can be compiled");
    std::string where = locationString(op.getLoc());
    // Before placement (smelt-opt pipelines without it, hand-written fusions) everything runs
    // on the host.
    auto placed = op.getAttrOfType<StringAttr>("smelt.device");
    std::string device = placed ? placed.str() : "cpu:0";
    std::string label = op.getName().stripDialect().str() + (where.empty() ? "" : " at " + where);
    if (auto fusion = dyn_cast<FusionOp>(op)) {
      rt::Step step;
      step.op = "fusion";
      step.location = where;
      step.device = device;
      step.attrs["kernel"] = int64_t(exe.kernels.size());
      for (Value operand : fusion.getInputs())
        step.operands.push_back(bufferOf.at(operand));
      for (Value result : fusion.getResults()) {
        FailureOr<rt::BufferId> id = addBuffer(result, label);
        if (failed(id))
          return failure();
        step.results.push_back(*id);
      }
      exe.kernels.push_back(describeKernel(fusion, exe.name + "_fusion" +
                                                       std::to_string(exe.kernels.size())));
      exe.steps.push_back(std::move(step));
      continue;
    }
    // Every op but a fusion has one result, except a bucketed all_reduce.
    std::vector<rt::BufferId> results;
    for (Value value : op.getResults()) {
      FailureOr<rt::BufferId> id = addBuffer(value, label);
      if (failed(id))
        return failure();
      results.push_back(*id);
    }
    if (results.empty())
      return op.emitOpError("has no results; only ops with results can be compiled");
    rt::BufferId result = results[0];

    if (auto constant = dyn_cast<ConstantOp>(op)) {
      FailureOr<std::vector<uint8_t>> bytes =
          constantBytes(constant, exe.buffers[result].type.dtype);
      if (failed(bytes))
        return failure();
      exe.constants.push_back({result, std::move(*bytes)});
      continue;
    }

    rt::Step step;
    step.op = op.getName().stripDialect().str();
    step.location = where;
    step.device = device;
    for (Value operand : op.getOperands())
      step.operands.push_back(bufferOf.at(operand));
    step.results = std::move(results);
    for (NamedAttribute attr : op.getAttrs()) {
      // Discardable attributes (dialect-prefixed: smelt.device went into step.device) are not
      // semantics.
      if (attr.getName().getValue().contains('.'))
        continue;
      std::optional<rt::AttrValue> value = plainAttr(op, attr.getValue());
      if (!value)
        return op.emitOpError("attribute '") << attr.getName().getValue()
                                             << "' has a kind codegen cannot carry: "
                                             << attr.getValue();
      step.attrs[attr.getName().str()] = std::move(*value);
    }
    // Absent unit attributes mean false; the runtime reads every flag explicitly.
    if (isa<MatmulOp>(op)) {
      step.attrs.try_emplace("transpose_lhs", int64_t(0));
      step.attrs.try_emplace("transpose_rhs", int64_t(0));
    }
    exe.steps.push_back(std::move(step));
  }
  // smelt-assign-buffers' prediction, when the pipeline ran it.
  if (auto peaks = function->getAttrOfType<DictionaryAttr>("smelt.peak_bytes"))
    for (NamedAttribute peak : peaks)
      if (auto bytes = dyn_cast<IntegerAttr>(peak.getValue()))
        exe.peakBytes[peak.getName().str()] = uint64_t(bytes.getInt());
  return exe;
}

} // namespace smelt::codegen
