// Lowers a smelt function to an rt::Executable: buffers for values, a typed step for each fusion
// and library op (its attributes as typed parameters), constants as little-endian bytes.
#include "codegen/BuildExecutable.h"

#include "codegen/FusionWalk.h"
#include "codegen/PlanSchedule.h"
#include "ir/ConstantData.h"
#include "ir/LocationText.h"
#include "ir/SmeltDialect.h"
#include "ir/TensorSize.h"
#include "passes/FusionUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace smelt::codegen {

namespace {

std::vector<int64_t> ints(ArrayRef<int64_t> values) { return {values.begin(), values.end()}; }

template <typename Window> rt::ConvParams convParams(Window op) {
  static_assert(uint8_t(rt::FilterLayout::ohwi) == uint32_t(FilterLayout::ohwi));
  rt::ConvParams params{ints(op.getStrides()), ints(op.getPadding()), ints(op.getDilation()),
                        int64_t(op.getFeatureGroupCount())};
  params.filterLayout = rt::FilterLayout(uint8_t(op.getFilterLayout()));
  return params;
}

/// The bias and activation smelt-fuse folded into a matmul or conv2d.
template <typename Contraction> rt::Epilogue epilogueOf(Contraction op) {
  rt::Epilogue epilogue;
  epilogue.bias = bool(op.getBias());
  // rt::Activation is the dialect's Epilogue after its `none`.
  static_assert(uint8_t(rt::Activation::relu) == uint32_t(Epilogue::relu) + 1 &&
                uint8_t(rt::Activation::swish) == uint32_t(Epilogue::swish) + 1 &&
                rt::kNumActivations == uint32_t(Epilogue::swish) + 2);
  if (std::optional<Epilogue> activation = op.getActivation())
    epilogue.activation = rt::Activation(uint8_t(uint32_t(*activation) + 1));
  return epilogue;
}

template <typename Window> rt::PoolParams poolParams(Window op) {
  return {ints(op.getWindow()), ints(op.getStrides()), ints(op.getPadding())};
}

/// The runtime step an op outside a fusion becomes, with its parameters (`kernel`: the entry of
/// Executable::kernels an argmax or scatter_add runs on a GPU); failure for an op the runtime
/// only runs inside a kernel.
FailureOr<std::pair<rt::StepOp, rt::StepParams>> stepOf(Operation &op, int64_t kernel) {
  using R = std::pair<rt::StepOp, rt::StepParams>;
  using rt::StepOp;
  std::optional<R> step =
      llvm::TypeSwitch<Operation *, std::optional<R>>(&op)
          .Case([](MatmulOp m) {
            return R{StepOp::Matmul,
                     rt::MatmulParams{bool(m.getTransposeLhs()), bool(m.getTransposeRhs()),
                                      epilogueOf(m)}};
          })
          .Case([](Conv2DOp c) {
            rt::ConvParams params = convParams(c);
            params.epilogue = epilogueOf(c);
            return R{StepOp::Conv2D, params};
          })
          .Case([](Conv2DBackwardInputOp c) {
            return R{StepOp::Conv2DBackwardInput, convParams(c)};
          })
          .Case([](Conv2DBackwardFilterOp c) {
            return R{StepOp::Conv2DBackwardFilter, convParams(c)};
          })
          .Case([](MaxPool2DOp p) {
            return R{StepOp::MaxPool2D, poolParams(p)};
          })
          .Case([](AvgPool2DOp p) {
            return R{StepOp::AvgPool2D, poolParams(p)};
          })
          .Case([](MaxPool2DBackwardOp p) {
            return R{StepOp::MaxPool2DBackward, poolParams(p)};
          })
          .Case([](AvgPool2DBackwardOp p) {
            return R{StepOp::AvgPool2DBackward, poolParams(p)};
          })
          .Case([&](ArgmaxOp a) {
            return R{StepOp::Argmax, rt::ArgmaxParams{int64_t(a.getAxis()), kernel}};
          })
          .Case([&](ScatterAddOp) {
            return R{StepOp::ScatterAdd, rt::ScatterAddParams{kernel}};
          })
          .Case([](ConcatOp c) {
            return R{StepOp::Concat, rt::AxisParams{int64_t(c.getDimension())}};
          })
          .Case([](SliceOp s) {
            return R{StepOp::Slice, rt::SliceParams{ints(s.getStartIndices()),
                                                    ints(s.getLimitIndices()),
                                                    ints(s.getStrides())}};
          })
          .Case([](PadOp p) {
            return R{StepOp::Pad, rt::PadParams{ints(p.getLow()), ints(p.getHigh()),
                                                p.getValue().convertToDouble()}};
          })
          .Case([](CopyOp) {
            return R{StepOp::Copy, rt::NoParams{}};
          })
          .Case([](AllReduceOp a) {
            return R{StepOp::AllReduce,
                     rt::AllReduceParams{a.getKind() == AllReduceKind::sum ? rt::ReduceKind::sum
                                                                            : rt::ReduceKind::mean,
                                         int64_t(a.getReplicas())}};
          })
          .Case([](ReplicaIdOp) {
            return R{StepOp::ReplicaId, rt::NoParams{}};
          })
          .Default([](Operation *) { return std::nullopt; });
  if (!step)
    return op.emitOpError("runs only inside a smelt.fusion kernel: run smelt-fuse before "
                          "codegen (the default pipeline does; without fusion, "
                          "smelt-fuse{one-op-per-kernel} gives each op a kernel of its own)");
  return *step;
}

/// The elements of a constant as little-endian bytes of `dtype`'s width.
FailureOr<rt::SharedBytes> constantBytes(ConstantOp op, rt::DType dtype) {
  auto elements = dyn_cast<ElementsAttr>(op.getValue());
  if (std::optional<ArrayRef<char>> raw = elements ? rawElementBytes(elements) : std::nullopt) {
    auto *data = reinterpret_cast<const uint8_t *>(raw->data());
    // A model's weights (memory-mapped) or a folded constant: the executable shares them.
    if (std::shared_ptr<const void> owner = sharedOwnerOf(raw->data()))
      return rt::SharedBytes(std::move(owner), data, raw->size());
    return rt::SharedBytes(std::vector<uint8_t>(data, data + raw->size())); // MLIR's: a copy
  }
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitOpError("value must be a dense elements attribute or a dense_resource with "
                          "its blob to be compiled, got ")
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
  return rt::SharedBytes(std::move(bytes));
}

/// The arena offsets smelt-assign-buffers gave `op`'s results, when it ran.
void placeInArena(Operation &op, const std::vector<rt::BufferId> &results, rt::Executable &exe) {
  auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("smelt.arena_offsets");
  if (!offsets || offsets.size() != int64_t(results.size()))
    return;
  for (auto [id, offset] : llvm::zip(results, offsets.asArrayRef()))
    exe.buffers[size_t(id)].offset = offset;
}

std::string smeltName(DictionaryAttr attrs, const char *fallback, unsigned index) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("smelt.name"))
      return name.str();
  return fallback + std::to_string(index);
}

/// The runtime type of a Smelt value's type: the dialect's types are static tensors of the
/// element types dtypeOf knows, as the verifier checked.
rt::TensorType runtimeType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return {*dtypeOf(tensor.getElementType()), tensor.getShape().vec()};
}

/// The bytes of the largest value `op` computes, itself or in its body.
uint64_t largestValueBytes(Operation *op) {
  uint64_t largest = 0;
  op->walk([&](Operation *inner) {
    for (Type type : inner->getResultTypes())
      if (std::optional<int64_t> bytes = tensorBytes(type))
        largest = std::max(largest, uint64_t(*bytes));
  });
  return largest;
}

} // namespace

bool hasOwnGpuKernel(Operation *op) {
  auto device = op->getAttrOfType<StringAttr>("smelt.device");
  return isa<ArgmaxOp, ScatterAddOp>(op) && device && device.getValue().starts_with("gpu");
}

rt::FusedKernel describeKernel(Operation *op, std::string name) {
  rt::FusedKernel kernel;
  kernel.name = std::move(name);
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion) { // a kernel of its own: one unit per result element
    kernel.kind = op->getName().stripDialect().str();
    kernel.units = cast<RankedTensorType>(op->getResult(0).getType()).getNumElements();
    for (Type type : op->getOperandTypes())
      kernel.inputs.push_back(runtimeType(type));
    kernel.results.push_back(runtimeType(op->getResult(0).getType()));
    kernel.ops = kernel.kind;
    kernel.computeOps = 1;
    kernel.largestValueBytes = largestValueBytes(op);
    return kernel;
  }
  kernel.kind = stringifyFusionKind(fusion.getKind()).str();
  // A loop kernel's unit is one element of its results; a reduction's, one reduced result.
  auto result = cast<RankedTensorType>(fusion.getResult(0).getType());
  kernel.units = result.getNumElements();
  for (Value input : fusion.getInputs())
    kernel.inputs.push_back(runtimeType(input.getType()));
  for (Type type : fusion.getResultTypes())
    kernel.results.push_back(runtimeType(type));
  for (Operation &inner : fusion.getBody().front().without_terminator()) {
    kernel.ops += (kernel.ops.empty() ? "" : "+") + inner.getName().stripDialect().str();
    FusionRole role = fusionRole(&inner);
    if ((role == FusionRole::Elementwise && !isa<ConvertOp>(inner)) || role == FusionRole::Reduce)
      ++kernel.computeOps;
  }
  kernel.largestValueBytes = largestValueBytes(fusion);
  return kernel;
}

std::vector<FusionOp> fusionsInOrder(func::FuncOp function) {
  auto range = function.getBody().front().getOps<FusionOp>();
  return std::vector<FusionOp>(range.begin(), range.end());
}

std::vector<Operation *> kernelOpsInOrder(func::FuncOp function) {
  std::vector<Operation *> ops;
  for (FusionOp fusion : fusionsInOrder(function))
    ops.push_back(fusion);
  for (Operation &op : function.getBody().front())
    if (hasOwnGpuKernel(&op))
      ops.push_back(&op);
  return ops;
}

std::string kernelName(func::FuncOp function, Operation *op, size_t index) {
  std::string kind = isa<FusionOp>(op) ? "fusion" : op->getName().stripDialect().str();
  return function.getSymName().str() + "_" + kind + std::to_string(index);
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
  // The ops with a kernel of their own come after the fusions in exe.kernels
  // (kernelOpsInOrder), so a fusion's kernel index is its position among the fusions.
  size_t fusionCount = fusionsInOrder(function).size();
  std::vector<rt::FusedKernel> ownKernels;
  for (BlockArgument arg : function.getArguments()) {
    FailureOr<rt::BufferId> id = addBuffer(arg, argumentName(function, arg.getArgNumber()));
    if (failed(id))
      return failure();
    exe.inputs.push_back(*id);
    exe.inputNames.push_back(argumentName(function, arg.getArgNumber()));
  }
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    exe.outputNames.push_back(resultName(function, i));

  for (Operation &op : function.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        exe.outputs.push_back(bufferOf.at(v));
      break;
    }
    if (!isa<SmeltDialect>(op.getDialect()))
      return op.emitOpError("is not a smelt op; only smelt ops can be compiled");
    std::string where = locationText(op.getLoc());
    // Before placement (smelt-opt pipelines without it, hand-written fusions) everything runs
    // on the host.
    auto placed = op.getAttrOfType<StringAttr>("smelt.device");
    std::string device = placed ? placed.str() : "cpu:0";
    std::string label = op.getName().stripDialect().str() + (where.empty() ? "" : " at " + where);
    if (auto fusion = dyn_cast<FusionOp>(op)) {
      rt::Step step;
      step.op = rt::StepOp::Fusion;
      rt::KernelParams params{int64_t(exe.kernels.size())};
      if (auto inPlace = fusion->getAttrOfType<DenseI64ArrayAttr>("smelt.in_place"))
        params.inPlace.assign(inPlace.asArrayRef().begin(), inPlace.asArrayRef().end());
      step.params = params;
      step.location = where;
      step.device = device;
      for (Value operand : fusion.getInputs())
        step.operands.push_back(bufferOf.at(operand));
      for (Value result : fusion.getResults()) {
        FailureOr<rt::BufferId> id = addBuffer(result, label);
        if (failed(id))
          return failure();
        step.results.push_back(*id);
      }
      exe.kernels.push_back(
          describeKernel(fusion, kernelName(function, fusion, exe.kernels.size())));
      placeInArena(op, step.results, exe);
      exe.steps.push_back(std::move(step));
      continue;
    }
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      FailureOr<rt::BufferId> result = addBuffer(constant.getResult(), label);
      if (failed(result))
        return failure();
      FailureOr<rt::SharedBytes> bytes = constantBytes(constant, exe.buffers[*result].type.dtype);
      if (failed(bytes))
        return failure();
      exe.constants.push_back({*result, std::move(*bytes)});
      continue;
    }
    int64_t kernel = rt::kNoKernel;
    if (hasOwnGpuKernel(&op)) {
      kernel = int64_t(fusionCount + ownKernels.size());
      ownKernels.push_back(describeKernel(&op, kernelName(function, &op, size_t(kernel))));
    }
    FailureOr<std::pair<rt::StepOp, rt::StepParams>> kindAndParams = stepOf(op, kernel);
    if (failed(kindAndParams))
      return failure();
    rt::Step step;
    step.op = kindAndParams->first;
    step.params = std::move(kindAndParams->second);
    step.location = where;
    step.device = device;
    for (Value operand : op.getOperands())
      step.operands.push_back(bufferOf.at(operand));
    // Every op but a fusion has one result, except a bucketed all_reduce.
    for (Value value : op.getResults()) {
      FailureOr<rt::BufferId> id = addBuffer(value, label);
      if (failed(id))
        return failure();
      step.results.push_back(*id);
    }
    if (step.results.empty())
      return op.emitOpError("has no results; only ops with results can be compiled");
    placeInArena(op, step.results, exe);
    exe.steps.push_back(std::move(step));
  }
  llvm::append_range(exe.kernels, ownKernels);
  // smelt-assign-buffers' prediction, when the pipeline ran it.
  if (auto peaks = function->getAttrOfType<DictionaryAttr>("smelt.peak_bytes"))
    for (NamedAttribute peak : peaks)
      if (auto bytes = dyn_cast<IntegerAttr>(peak.getValue()))
        exe.peakBytes[peak.getName().str()] = uint64_t(bytes.getInt());
  // The schedule: device segments and when each buffer goes back, which the runtime runs.
  planSchedule(exe);
  return exe;
}

} // namespace smelt::codegen
