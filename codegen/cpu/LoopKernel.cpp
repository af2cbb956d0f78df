// The loop kernel: computes and stores one element of every result per iteration over the
// linear element indices [begin, end) of the iteration space. Results of a loop fusion share
// the iteration shape, so each is stored at the loop's index; when the body is elementwise
// the loads use that index too, and one flat loop is contiguous and vectorizes. A body that
// reads at coordinates (a broadcast, a transpose) gets a loop over rows around a loop along
// the last dimension instead: the last coordinate is the inner loop's variable and the others
// are computed once per row, where the flat loop would divide for every element (the
// squeeze-and-excitation gate's broadcast multiply ran at 5 GB/s that way). A concat or a pad
// along the column's dimension splits that inner loop at its pieces' boundaries, as XLA emits a
// concat one operand at a time: in each piece the walk knows which operand a column falls in,
// so it reads that one contiguously and selects nothing.
#include "codegen/cpu/CpuTarget.h"
#include "codegen/cpu/KernelEmitter.h"
#include "codegen/cpu/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <set>

using namespace mlir;

namespace smelt::codegen::cpu {

namespace {

/// The most pieces the inner loop is split into: each holds a copy of the body.
constexpr size_t kMaxColumnPieces = 8;

/// Whether some element of the body is read at coordinates of the loop's index: a broadcast
/// that changes the shape (of more than one element), a transpose, a slice, a concat, a pad,
/// an iota, a gather.
bool readsAtCoordinates(FusionOp fusion) {
  for (Operation &op : fusion.getBody().front().without_terminator()) {
    if (isa<TransposeOp, IotaOp, GatherOp, SliceOp, ConcatOp, PadOp>(op))
      return true;
    if (auto broadcast = dyn_cast<BroadcastInDimOp>(op)) {
      auto from = cast<RankedTensorType>(broadcast.getOperand().getType());
      if (from.getNumElements() > 1 && from.getShape() != broadcast.getType().getShape())
        return true;
    }
  }
  return false;
}

/// The columns (strictly inside (0, size)) where a concat changes operand or a pad enters or
/// leaves its operand along a dimension `size` long: the loop's column may be that coordinate,
/// directly or through transposes (ONNX's NCHW concat of NHWC activations, read in NHWC); none
/// when they would make more than kMaxColumnPieces pieces. A cut that does not line up with the
/// column costs a loop, not correctness: the walk then selects as without cuts.
std::vector<int64_t> columnCuts(FusionOp fusion, int64_t size) {
  std::set<int64_t> cuts;
  for (Operation &op : fusion.getBody().front().without_terminator()) {
    ArrayRef<int64_t> shape = cast<RankedTensorType>(op.getResult(0).getType()).getShape();
    if (auto concat = dyn_cast<ConcatOp>(op); concat && shape[concat.getDimension()] == size) {
      for (int64_t bound : concatBounds(concat))
        cuts.insert(bound); // 0 and the size are dropped below
    } else if (auto pad = dyn_cast<PadOp>(op)) {
      for (auto [d, low, high] : llvm::enumerate(pad.getLow(), pad.getHigh()))
        if ((low || high) && shape[d] == size)
          cuts.insert({low, low + pad.getX().getType().getShape()[d]});
    }
  }
  std::vector<int64_t> inside;
  for (int64_t cut : cuts)
    if (cut > 0 && cut < size)
      inside.push_back(cut);
  return inside.size() < kMaxColumnPieces ? inside : std::vector<int64_t>{};
}

class LoopEmitter {
public:
  LoopEmitter(FusionOp fusion, const KernelBody &body, ImplicitLocOpBuilder &b)
      : fusion_(fusion), body_(body), b_(b), target_(b, body.inputs, body.inputDTypes),
        walk_(fusion, target_), shape_(fusion.getIterationShape()) {}

  std::string emit() {
    int64_t rows = 1;
    for (int64_t size : shape_.drop_back(shape_.empty() ? 0 : 1))
      rows *= size;
    std::vector<int64_t> cuts =
        shape_.empty() ? std::vector<int64_t>{} : columnCuts(fusion_, shape_.back());
    if (!shape_.empty() && shape_.back() > 1 &&
        ((rows > 1 && readsAtCoordinates(fusion_)) || !cuts.empty()))
      emitRows(cuts);
    else
      emitFlat();
    return target_.error();
  }

private:
  Value i64(int64_t value) { return intConstant(b_, b_.getI64Type(), value); }

  void emitFlat() {
    auto loop = scf::ForOp::create(b_, body_.begin, body_.end, i64(1));
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    walk_.newScope();
    store(i, walk_.linearIndex(shape_, target_.wrap(i)));
  }

  /// A loop over rows around loops along the last dimension, one per piece between `cuts`.
  void emitRows(ArrayRef<int64_t> cuts) {
    int64_t size = shape_.back();
    OpBuilder::InsertionGuard guard(b_);
    RowLoop rows = emitRowLoop(body_, size, b_);
    SmallVector<Val> prefix = delinearize(target_, target_.wrap(rows.row), shape_.drop_back());
    SmallVector<int64_t> bounds{0};
    llvm::append_range(bounds, cuts);
    bounds.push_back(size);
    for (size_t piece = 0; piece + 1 < bounds.size(); ++piece) {
      Value lo = rows.lo, hi = rows.hi;
      if (!cuts.empty()) {
        lo = arith::MaxSIOp::create(b_, lo, i64(bounds[piece]));
        hi = arith::MinSIOp::create(b_, hi, i64(bounds[piece + 1]));
      }
      auto columns = scf::ForOp::create(b_, lo, hi, i64(1));
      OpBuilder::InsertionGuard inner(b_);
      b_.setInsertionPointToStart(columns.getBody());
      Value column = columns.getInductionVar();
      Value i = arith::AddIOp::create(b_, rows.rowStart, column);
      walk_.newScope();
      SmallVector<Val> coords = prefix;
      coords.push_back(target_.wrap(column));
      if (!cuts.empty())
        walk_.setRange(coords.back(), bounds[piece], bounds[piece + 1]);
      store(i, walk_.knownIndex(shape_, target_.wrap(i), coords));
    }
  }

  /// Emits every result's element at `at` and stores it at linear index `i`.
  void store(Value i, FusionWalk::IndexRef at) {
    for (auto [result, value] : llvm::zip(body_.results, fusion_.getYield().getValues()))
      storeElement(b_, result, i, target_.value(walk_.emit(value, at)), elementDType(value));
  }

  FusionOp fusion_;
  const KernelBody &body_;
  ImplicitLocOpBuilder &b_;
  CpuTarget target_;
  FusionWalk walk_;
  ArrayRef<int64_t> shape_;
};

} // namespace

std::string emitLoopBody(FusionOp fusion, const KernelBody &body, ImplicitLocOpBuilder &b) {
  return LoopEmitter(fusion, body, b).emit();
}

} // namespace smelt::codegen::cpu
