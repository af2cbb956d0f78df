// smelt-place-devices: gives every op a device (`smelt.device`), TensorFlow's soft placement
// done as a pass:
//  1. an op asks for the device of its builder scope (Graph::onDevice), else the default
//     (gpu:0 when the machine has one, else cpu:0);
//  2. when that device does not exist, or the GPU has no kernel for the op or its dtype, the op
//     falls back to cpu:0 with the reason recorded; `strict` makes that an error instead;
//  3. arguments arrive and results leave on cpu:0 (the caller's host memory); wherever a value
//     crosses devices a smelt.copy is inserted, one per value and destination;
//  4. the function gets `smelt.placement`, a one-line summary ("41 ops on gpu:0, 2 on cpu:0
//     (conv2d: no GPU kernel for 'conv2d' in f64), 3 copies") that the tools print, and with
//     `log-device-placement` every op's placement is printed as it is decided.
#include "passes/Passes.h"

#include "ir/Bracketed.h"
#include "ir/LocationText.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>

#define DEBUG_TYPE "smelt-place-devices"

namespace smelt {

#define GEN_PASS_DEF_PLACEDEVICES
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

constexpr llvm::StringLiteral kHost = "cpu:0";

std::string elementName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << cast<RankedTensorType>(type).getElementType();
  return text;
}

/// Why cuDNN, which runs convolutions and pooling on the GPU, cannot take `op` where its
/// element types are fine, or "". The runtime refuses such a call when its executor is made
/// (cudnnUnsupported in runtime/cuda/Cudnn.cpp); here the op falls back to the CPU instead.
/// A convolution's asymmetric padding is no reason: smelt-gpu-conv-layouts pads its input.
/// Pooling's is: its descriptor pads both sides alike, and zeros padded into the input would
/// win a max or count in a mean (TensorFlow's SAME pooling at stride 2 pads one side).
std::string whyNotOnCudnn(Operation *op) {
  if (!isa<Conv2DOp, Conv2DBackwardInputOp, Conv2DBackwardFilterOp, MaxPool2DOp, AvgPool2DOp,
           MaxPool2DBackwardOp, AvgPool2DBackwardOp>(op))
    return "";
  for (Type type : llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
    if (auto tensor = dyn_cast<RankedTensorType>(type);
        tensor && tensor.hasStaticShape() && tensor.getNumElements() > INT32_MAX)
      return "a tensor of " + std::to_string(tensor.getNumElements()) +
             " elements: cuDNN's sizes are 32-bit";
  auto window = op->getAttrOfType<DenseI64ArrayAttr>("window");
  auto padding = op->getAttrOfType<DenseI64ArrayAttr>("padding");
  if (!window || !padding || window.size() != 2 || padding.size() != 4) // a convolution
    return "";
  ArrayRef<int64_t> p = padding.asArrayRef(), w = window.asArrayRef();
  if (p[0] != p[1] || p[2] != p[3])
    return "asymmetric padding " + bracketed(p) + ": cuDNN's pooling pads both sides alike";
  if (p[0] >= w[0] || p[2] >= w[1])
    return "padding " + bracketed(p) + " not smaller than the window " + bracketed(w) +
           ": cuDNN's pooling needs it smaller";
  return "";
}

/// Why the GPU executor cannot run `op`, or "" when it can. Fusible ops become NVRTC kernels
/// (smelt-fuse runs next, fusing or one op per kernel), argmax and scatter_add NVRTC kernels of
/// their own, matmul a cuBLASLt call, convolutions and pooling cuDNN calls, all_reduce NCCL:
/// each op states the element types it has a GPU kernel for (Smelt_GpuKernel in
/// ir/SmeltOps.td), which must cover every type it reads or writes; the rest has no GPU kernel.
/// A cuDNN op must also fit cuDNN's calls (whyNotOnCudnn).
std::string whyNotOnGpu(Operation *op) {
  std::string name = op->getName().stripDialect().str();
  auto facts = dyn_cast<OpFacts>(op);
  unsigned types = facts ? facts.getGpuKernelTypes() : 0;
  if (types == kAllElements)
    return "";
  if (!types && facts && facts.getFusionRole() != FusionRole::None)
    return "";
  if (!types)
    return "no GPU kernel for '" + name + "'";
  for (Type type : llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
    if (!(types & elementBit(type)))
      return "no GPU kernel for '" + name + "' in " + elementName(type);
  return whyNotOnCudnn(op);
}

struct PlaceDevicesPass : impl::PlaceDevicesBase<PlaceDevicesPass> {
  using PlaceDevicesBase::PlaceDevicesBase;

  void runOnOperation() override {
    SmallVector<StringRef> list;
    StringRef(devices).split(list, ',', -1, false);
    llvm::SmallSetVector<StringRef, 4> available(list.begin(), list.end());
    available.insert(kHost);
    bool hasGpu = available.contains("gpu:0");
    std::string fallbackDefault = hasGpu ? "gpu:0" : kHost.str();
    std::string chosen = defaultDevice.empty() ? fallbackDefault : std::string(defaultDevice);
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() && failed(place(function, available, chosen, hasGpu)))
        return signalPassFailure();
  }

  LogicalResult place(func::FuncOp function, const llvm::SmallSetVector<StringRef, 4> &available,
                      const std::string &defaultName, bool hasGpu) {
    Block &body = function.getBody().front();
    OpBuilder builder(function.getContext());
    llvm::MapVector<StringRef, unsigned> counts;
    std::map<std::string, unsigned> fallbacks; // "conv2d: no GPU kernel ..." -> count
    auto deviceOf = [&](Value v) -> StringRef {
      if (Operation *def = v.getDefiningOp())
        if (auto attr = def->getAttrOfType<StringAttr>("smelt.device"))
          return attr.getValue();
      return kHost;
    };

    // 1-2. Decide each op's device.
    for (Operation &op : body) {
      if (isa<func::ReturnOp>(op))
        continue;
      auto requestedAttr = op.getAttrOfType<StringAttr>("smelt.device");
      std::string requested = requestedAttr ? requestedAttr.str() : defaultName;
      std::string why;
      if (!available.contains(requested))
        why = requested + " does not exist" +
              (noGpuReason.empty() || requested.rfind("gpu:", 0) != 0 ? ""
                                                                      : " (" + noGpuReason + ")");
      else if (requested.rfind("gpu:", 0) == 0)
        why = whyNotOnGpu(&op);
      std::string placed = why.empty() ? requested : kHost.str();
      if (!why.empty()) {
        if (strict)
          return op.emitOpError("cannot run on ") << requested << ": " << why
                                                  << " (strict placement)";
        ++fallbacks[op.getName().stripDialect().str() + ": " + why];
      }
      op.setAttr("smelt.device", builder.getStringAttr(placed));
      ++counts[op.getAttrOfType<StringAttr>("smelt.device").getValue()];
      if (logDevicePlacement)
        llvm::errs() << "@" << function.getSymName() << " " << opAndLocation(&op) << ": " << placed
                     << (why.empty() ? "" : " (wanted " + requested + ": " + why + ")") << "\n";
    }

    // 3. Copies where a value crosses devices; results go back to the host.
    DenseMap<std::pair<Value, StringRef>, Value> copies;
    unsigned numCopies = 0;
    auto onDevice = [&](Value v, StringRef device) -> Value {
      if (deviceOf(v) == device)
        return v;
      Value &copy = copies[{v, device}];
      if (!copy) {
        if (Operation *def = v.getDefiningOp())
          builder.setInsertionPointAfter(def);
        else
          builder.setInsertionPointToStart(&body);
        auto op = CopyOp::create(builder, v.getLoc(), v);
        op->setAttr("smelt.device", builder.getStringAttr(device));
        copy = op;
        ++numCopies;
      }
      return copy;
    };
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<CopyOp>(op))
        continue;
      StringRef device = isa<func::ReturnOp>(op)
                             ? StringRef(kHost)
                             : op.getAttrOfType<StringAttr>("smelt.device").getValue();
      for (OpOperand &operand : op.getOpOperands())
        operand.set(onDevice(operand.get(), device));
    }

    // 4. The summary.
    // Most ops first.
    SmallVector<std::pair<StringRef, unsigned>> byCount(counts.begin(), counts.end());
    llvm::stable_sort(byCount, [](auto &a, auto &b) { return a.second > b.second; });
    std::string summary;
    for (auto [device, count] : byCount)
      summary += (summary.empty() ? "" : ", ") + std::to_string(count) + " op" +
                 (count == 1 ? "" : "s") + " on " + device.str();
    if (summary.empty())
      summary = "no ops";
    SmallVector<std::string> reasons;
    for (auto [reason, count] : fallbacks)
      reasons.push_back(count == 1 ? reason : reason + " (x" + std::to_string(count) + ")");
    if (!reasons.empty())
      summary += " (" + llvm::join(reasons, "; ") + ")";
    else if (!hasGpu && !noGpuReason.empty())
      summary += " (no GPU: " + noGpuReason + ")";
    if (numCopies)
      summary += ", " + std::to_string(numCopies) + " cop" + (numCopies == 1 ? "y" : "ies");
    function->setAttr("smelt.placement", builder.getStringAttr(summary));
    return success();
  }
};

} // namespace

} // namespace smelt
