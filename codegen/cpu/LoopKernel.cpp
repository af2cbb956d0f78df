// The loop kernel: computes and stores one element of every result per iteration over the
// linear element indices [begin, end) of the iteration space. Results of a loop fusion share
// the iteration shape, so each is stored at the loop's index; when the body is elementwise
// the loads use that index too, and one flat loop is contiguous and vectorizes. A body that
// reads at coordinates (a broadcast, a transpose) gets a loop over rows around a loop along
// the last dimension instead: the last coordinate is the inner loop's variable and the others
// are computed once per row, where the flat loop would divide for every element (the
// squeeze-and-excitation gate's broadcast multiply ran at 5 GB/s that way).
#include "codegen/cpu/CpuTarget.h"
#include "codegen/cpu/KernelEmitter.h"
#include "codegen/cpu/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace smelt::codegen::cpu {

namespace {

/// Whether some element of the body is read at coordinates of the loop's index: a broadcast
/// that changes the shape (of more than one element), a transpose, an iota, a gather.
bool readsAtCoordinates(FusionOp fusion) {
  for (Operation &op : fusion.getBody().front().without_terminator()) {
    if (isa<TransposeOp, IotaOp, GatherOp>(op))
      return true;
    if (auto broadcast = dyn_cast<BroadcastInDimOp>(op)) {
      auto from = cast<RankedTensorType>(broadcast.getOperand().getType());
      if (from.getNumElements() > 1 && from.getShape() != broadcast.getType().getShape())
        return true;
    }
  }
  return false;
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
    if (rows > 1 && shape_.back() > 1 && readsAtCoordinates(fusion_))
      emitRows();
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

  void emitRows() {
    int64_t size = shape_.back();
    OpBuilder::InsertionGuard guard(b_);
    RowLoop rows = emitRowLoop(body_, size, b_);
    SmallVector<Val> prefix = delinearize(target_, target_.wrap(rows.row), shape_.drop_back());
    auto columns = scf::ForOp::create(b_, rows.lo, rows.hi, i64(1));
    b_.setInsertionPointToStart(columns.getBody());
    Value column = columns.getInductionVar();
    Value i = arith::AddIOp::create(b_, rows.rowStart, column);
    walk_.newScope();
    SmallVector<Val> coords = prefix;
    coords.push_back(target_.wrap(column));
    store(i, walk_.knownIndex(shape_, target_.wrap(i), coords));
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
