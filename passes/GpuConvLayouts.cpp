// smelt-gpu-conv-layouts: gives the convolutions placed on a GPU what cuDNN's calls read as they
// are, so the runtime makes no layout or padding copies of its own (issue 31: the compiler owns
// what it knows). Two rewrites, each with ops the rest of the pipeline fuses or folds:
//   1. The filter in cuDNN's KRSC layout: conv2d and conv2d_backward_input read a transpose of
//      the HWIO filter to OHWI ([3, 0, 1, 2]), conv2d_backward_filter writes OHWI and a
//      transpose brings it back ([1, 2, 3, 0]); the ops say `filter_layout = ohwi`. The
//      transpose of a constant filter (inference) folds away; a parameter's is one small
//      kernel shared by the forward and input-gradient convolutions, where cuDNN's
//      cudnnTransformTensor ran once per call.
//   2. Symmetric padding: cuDNN's convolution descriptor pads both sides alike. Where top !=
//      bottom or left != right (TensorFlow's SAME at stride 2), the convolution pads
//      min(top, bottom) and min(left, right) itself and reads an input padded with zeros by the
//      rest (smelt.pad, which fuses into the kernel that writes or reads it); the input
//      gradient is computed for that padded input and its interior sliced out (smelt.slice).
// Convolutions on the CPU are left alone: oneDNN reads HWIO and pads each side as asked.
#include "passes/Passes.h"

#include "passes/FusionUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <array>
#include <map>
#include <tuple>

namespace smelt {

#define GEN_PASS_DEF_GPUCONVLAYOUTS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

constexpr int64_t kToOhwi[] = {3, 0, 1, 2}, kToHwio[] = {1, 2, 3, 0};

/// The padding cuDNN applies (the smaller side of each dimension, on both) and what is left
/// for an explicit pad of the input: [top, bottom, left, right] each.
struct SplitPadding {
  SmallVector<int64_t> symmetric;
  SmallVector<int64_t> extraLow, extraHigh; // NHWC: [0, top or bottom, left or right, 0]
  bool needsPad() const {
    return llvm::any_of(extraLow, [](int64_t p) { return p != 0; }) ||
           llvm::any_of(extraHigh, [](int64_t p) { return p != 0; });
  }
};

SplitPadding splitPadding(ArrayRef<int64_t> padding) {
  SplitPadding split{{}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  for (int d = 0; d < 2; ++d) {
    int64_t low = padding[2 * d], high = padding[2 * d + 1], both = std::min(low, high);
    split.symmetric.append({both, both});
    split.extraLow[1 + d] = low - both;
    split.extraHigh[1 + d] = high - both;
  }
  return split;
}

/// Builds ops placed where the convolution is, at its location.
struct Rewriter {
  OpBuilder builder;
  Location loc;
  StringAttr device;

  template <typename OpTy, typename... Args> OpTy make(Args &&...args) {
    auto op = OpTy::create(builder, loc, std::forward<Args>(args)...);
    op->setAttr("smelt.device", device);
    return op;
  }
  /// A constant's transpose folds into a constant now (inference's filters): no kernel.
  Value transpose(Value x, ArrayRef<int64_t> permutation) {
    Value result = builder.createOrFold<TransposeOp>(loc, x, permutation);
    if (Operation *def = result.getDefiningOp(); def && !def->hasAttr("smelt.device"))
      def->setAttr("smelt.device", device);
    return result;
  }
  Value pad(Value x, const SplitPadding &split) {
    return make<PadOp>(x, ArrayRef<int64_t>(split.extraLow), ArrayRef<int64_t>(split.extraHigh),
                       llvm::APFloat(0.0))
        .getResult();
  }
};

Rewriter rewriterAt(Operation *op) {
  return {OpBuilder(op), op->getLoc(), op->getAttrOfType<StringAttr>("smelt.device")};
}

/// The ops made so far, each shared by the convolutions on one device that need it: the OHWI
/// transpose of a filter (read by the forward and input-gradient convolutions) and a padded
/// input (by the forward and filter-gradient ones). Each is made before the first convolution
/// that needs it, which precedes the others in the block.
struct Made {
  llvm::DenseMap<std::pair<Value, Attribute>, Value> transposes;
  std::map<std::tuple<const void *, const void *, std::array<int64_t, 4>>, Value> pads;
};

Value ohwiFilter(Rewriter &r, Value hwio, Made &made) {
  Value &ohwi = made.transposes[{hwio, r.device}];
  if (!ohwi)
    ohwi = r.transpose(hwio, kToOhwi);
  return ohwi;
}

Value paddedInput(Rewriter &r, Value x, const SplitPadding &split, Made &made) {
  if (!split.needsPad())
    return x;
  std::array<int64_t, 4> extra = {split.extraLow[1], split.extraHigh[1], split.extraLow[2],
                                  split.extraHigh[2]};
  Value &padded = made.pads[{x.getAsOpaquePointer(), r.device.getAsOpaquePointer(), extra}];
  if (!padded)
    padded = r.pad(x, split);
  return padded;
}

void rewrite(Conv2DOp conv, Made &made) {
  Rewriter r = rewriterAt(conv);
  SplitPadding split = splitPadding(conv.getPadding());
  conv.getInputMutable().assign(paddedInput(r, conv.getInput(), split, made));
  conv.getFilterMutable().assign(ohwiFilter(r, conv.getFilter(), made));
  conv.setPadding(split.symmetric);
  conv.setFilterLayout(FilterLayout::ohwi);
}

void rewrite(Conv2DBackwardInputOp conv, Made &made) {
  Rewriter r = rewriterAt(conv);
  SplitPadding split = splitPadding(conv.getPadding());
  auto inputType = cast<RankedTensorType>(conv.getType());
  SmallVector<int64_t> padded(inputType.getShape());
  for (int d = 1; d < 3; ++d)
    padded[d] += split.extraLow[d] + split.extraHigh[d];
  auto gradient = r.make<Conv2DBackwardInputOp>(
      inputType.clone(padded), conv.getGradOutput(), ohwiFilter(r, conv.getFilter(), made),
      conv.getStrides(), split.symmetric, conv.getDilation(), conv.getFeatureGroupCount(),
      FilterLayout::ohwi);
  Value result = gradient.getResult();
  if (split.needsPad()) { // the padding's gradient is dropped: only the interior is the input's
    SmallVector<int64_t> limit(split.extraLow), step(4, 1);
    for (int d = 0; d < 4; ++d)
      limit[d] += inputType.getDimSize(d);
    result = r.make<SliceOp>(result, ArrayRef<int64_t>(split.extraLow), ArrayRef<int64_t>(limit),
                             ArrayRef<int64_t>(step))
                 .getResult();
  }
  conv.getResult().replaceAllUsesWith(result);
  conv.erase();
}

void rewrite(Conv2DBackwardFilterOp conv, Made &made) {
  Rewriter r = rewriterAt(conv);
  SplitPadding split = splitPadding(conv.getPadding());
  auto hwio = cast<RankedTensorType>(conv.getType());
  SmallVector<int64_t> ohwi;
  for (int64_t d : kToOhwi)
    ohwi.push_back(hwio.getDimSize(d));
  auto gradient = r.make<Conv2DBackwardFilterOp>(
      hwio.clone(ohwi), paddedInput(r, conv.getInput(), split, made), conv.getGradOutput(),
      conv.getStrides(), split.symmetric, conv.getDilation(), conv.getFeatureGroupCount(),
      FilterLayout::ohwi);
  conv.getResult().replaceAllUsesWith(r.transpose(gradient.getResult(), kToHwio));
  conv.erase();
}

bool onGpu(Operation *op) { return deviceOf(op).starts_with("gpu:"); }

struct GpuConvLayouts : impl::GpuConvLayoutsBase<GpuConvLayouts> {
  void runOnOperation() override {
    SmallVector<Operation *> convs;
    getOperation().walk([&](Operation *op) {
      auto layout =
          isa<Conv2DOp>(op)                 ? cast<Conv2DOp>(op).getFilterLayout()
          : isa<Conv2DBackwardInputOp>(op)  ? cast<Conv2DBackwardInputOp>(op).getFilterLayout()
          : isa<Conv2DBackwardFilterOp>(op) ? cast<Conv2DBackwardFilterOp>(op).getFilterLayout()
                                            : FilterLayout::ohwi;
      if (layout == FilterLayout::hwio && onGpu(op))
        convs.push_back(op);
    });
    Made made;
    for (Operation *op : convs) {
      if (auto conv = dyn_cast<Conv2DOp>(op))
        rewrite(conv, made);
      else if (auto conv = dyn_cast<Conv2DBackwardInputOp>(op))
        rewrite(conv, made);
      else
        rewrite(cast<Conv2DBackwardFilterOp>(op), made);
    }
    // A constant filter's HWIO copy, now unread, would be one more copy of the weights.
    for (auto &[key, ohwi] : made.transposes)
      if (Operation *hwio = key.first.getDefiningOp();
          hwio && isa<ConstantOp>(hwio) && hwio->use_empty())
        hwio->erase();
    numRewritten += convs.size();
  }
};

} // namespace
} // namespace smelt
