// The reduction kernel: units are elements of the reduces' results, each accumulated over the
// reduced coordinates in row-major order and rounded once when stored: sums in f64 (i64 for
// integers), max and min as IEEE 754-2019's maximum and minimum (a NaN propagates). Two loop
// orders keep the innermost loop contiguous, so it vectorizes:
// - rows, when the operand's last dimension is reduced: per unit, the reduced axes nest with
//   the accumulators in registers, the last axis innermost;
// - columns, when it is kept (a bias gradient's reduce over the batch): a tile of up to kTile
//   units that are consecutive along that dimension accumulates together in a stack buffer,
//   the reduced axes outside, the tile innermost. Reading a column unit by unit instead would
//   touch one cache line per element.
#include "codegen/cpu/CpuTarget.h"
#include "codegen/cpu/KernelEmitter.h"
#include "codegen/cpu/Numerics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <functional>
#include <limits>

using namespace mlir;

namespace smelt::codegen::cpu {

using rt::DType;

namespace {

/// Units a column tile accumulates at once: 2 KB of f64 per reduce, well inside L1.
constexpr int64_t kTile = 256;

/// The type a `kind` reduce of `dtype` accumulates in: sums in f64 (i64 for integers); a
/// float max or min is exact in the type it computes in (f32 for f32, f16 and bf16), where
/// twice as many lanes fit a vector as in f64.
DType accumulatorDType(ReduceKind kind, DType dtype) {
  if (!rt::isFloat(dtype))
    return DType::i64;
  return kind == ReduceKind::sum || dtype == DType::f64 ? DType::f64 : DType::f32;
}

/// The accumulator's start: 0, or the lowest / highest value of `dtype` (infinities for floats).
Value initialValue(ImplicitLocOpBuilder &b, ReduceKind kind, DType dtype) {
  Type type = computeType(b.getContext(), accumulatorDType(kind, dtype));
  if (rt::isFloat(dtype))
    return floatConstant(b, type,
                         kind == ReduceKind::sum   ? 0.0
                         : kind == ReduceKind::max ? -std::numeric_limits<double>::infinity()
                                                   : std::numeric_limits<double>::infinity());
  auto [lowest, highest] = integerLimits(dtype);
  return intConstant(b, type,
                     kind == ReduceKind::sum   ? 0
                     : kind == ReduceKind::max ? lowest
                                               : highest);
}

/// acc (+) x. Row sums may reassociate: in f64 the reordering is far below any dtype's
/// rounding, and it lets LLVM vectorize the inner loop.
Value combine(ImplicitLocOpBuilder &b, ReduceKind kind, Value acc, Value x) {
  bool isFloat = isa<FloatType>(acc.getType());
  if (kind == ReduceKind::sum) {
    if (!isFloat)
      return arith::AddIOp::create(b, acc, x); // wraps, as the runtime's unsigned add
    auto add = arith::AddFOp::create(b, acc, x);
    add.setFastmath(arith::FastMathFlags::reassoc);
    return add;
  }
  bool isMax = kind == ReduceKind::max;
  if (!isFloat)
    return isMax ? Value(arith::MaxSIOp::create(b, acc, x))
                 : Value(arith::MinSIOp::create(b, acc, x));
  // IEEE 754-2019's maximum and minimum: a NaN wins and stays. LLVM vectorizes a reduction of
  // them, where a compare and select that also tests for NaN ran one element at a time (the
  // softmax's row max of Whisper's attention scores ran at 8 GB/s, its exp-sum at 20).
  return isMax ? Value(arith::MaximumFOp::create(b, acc, x))
               : Value(arith::MinimumFOp::create(b, acc, x));
}

class ReductionEmitter {
public:
  ReductionEmitter(FusionOp fusion, const KernelBody &body, ImplicitLocOpBuilder &b)
      : b_(b), body_(body), target_(b, body.inputs, body.inputDTypes), walk_(fusion, target_),
        shape_(fusion.getIterationShape()) {
    for (Value value : fusion.getYield().getValues())
      roots_.push_back(value.getDefiningOp<ReduceOp>());
    axes_ = roots_.front().getAxes();
    for (int64_t d = 0; d < int64_t(shape_.size()); ++d)
      if (!llvm::is_contained(axes_, d))
        keptShape_.push_back(shape_[d]);
  }

  std::string emit() {
    bool lastKept = !shape_.empty() && shape_.back() > 1 &&
                    !llvm::is_contained(axes_, int64_t(shape_.size()) - 1);
    lastKept ? emitColumns() : emitRows();
    return target_.error();
  }

private:
  Value i64(int64_t value) { return intConstant(b_, b_.getI64Type(), value); }

  /// One loop per reduced axis, outermost first, carrying `accs`; `innermost` gets the
  /// accumulators and returns their next values (reduced_ holds the loop variables).
  SmallVector<Value> reducedLoops(ValueRange accs,
                                  const std::function<SmallVector<Value>(ValueRange)> &innermost,
                                  size_t level = 0) {
    if (level == axes_.size())
      return innermost(accs);
    auto loop = scf::ForOp::create(b_, i64(0), i64(shape_[axes_[level]]), i64(1), accs);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    reduced_.push_back(target_.wrap(loop.getInductionVar()));
    SmallVector<Value> next = reducedLoops(loop.getRegionIterArgs(), innermost, level + 1);
    reduced_.pop_back();
    if (!accs.empty()) // without iter_args the loop was built with its yield
      scf::YieldOp::create(b_, next);
    return SmallVector<Value>(loop.getResults());
  }

  /// Every root's operand at kept coordinates `kept` (and reduced_), combined into `accs`.
  SmallVector<Value> accumulate(ArrayRef<Val> kept, ValueRange accs) {
    walk_.newScope(); // what an outer iteration emitted is not visible here
    FusionWalk::IndexRef at = walk_.reduceOperandIndex(roots_.front(), kept, reduced_);
    SmallVector<Value> next;
    for (auto [root, acc] : llvm::zip(roots_, accs)) {
      DType dtype = elementDType(root.getX());
      Value x = convertElement(b_, target_.value(walk_.emit(root.getX(), at)), dtype,
                               accumulatorDType(root.getKind(), dtype));
      next.push_back(combine(b_, root.getKind(), acc, x));
    }
    return next;
  }

  /// Rounds root `r`'s accumulator once and stores it as result element `index`.
  void store(size_t r, Value index, Value acc) {
    DType dtype = elementDType(roots_[r].getResult());
    storeElement(b_, body_.results[r], index,
                 convertElement(b_, acc, accumulatorDType(roots_[r].getKind(), dtype), dtype),
                 dtype);
  }

  Value initial(size_t r) {
    return initialValue(b_, roots_[r].getKind(), elementDType(roots_[r].getResult()));
  }

  void emitRows() {
    auto units = scf::ForOp::create(b_, body_.begin, body_.end, i64(1));
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(units.getBody());
    Value unit = units.getInductionVar();
    SmallVector<Val> kept = delinearize(target_, target_.wrap(unit), keptShape_);
    SmallVector<Value> inits;
    for (size_t r = 0; r < roots_.size(); ++r)
      inits.push_back(initial(r));
    SmallVector<Value> accs =
        reducedLoops(inits, [&](ValueRange accs) { return accumulate(kept, accs); });
    for (size_t r = 0; r < roots_.size(); ++r)
      store(r, unit, accs[r]);
  }

  /// Calls `body(j)` for j in [0, count).
  void forEach(Value count, const std::function<void(Value)> &body) {
    auto loop = scf::ForOp::create(b_, i64(0), count, i64(1));
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  }

  void emitColumns() {
    // Units split as (row, k): k along the last kept dimension, row over the ones before it.
    int64_t size = keptShape_.back();
    ArrayRef<int64_t> rowShape = ArrayRef<int64_t>(keptShape_).drop_back();
    // One stack buffer of kTile accumulators per reduce, addressed like an f64/i64 tensor.
    SmallVector<Value> tiles;
    SmallVector<DType> accDTypes;
    for (ReduceOp root : roots_) {
      accDTypes.push_back(accumulatorDType(root.getKind(), elementDType(root.getResult())));
      tiles.push_back(LLVM::AllocaOp::create(b_, LLVM::LLVMPointerType::get(b_.getContext()),
                                             computeType(b_.getContext(), accDTypes.back()),
                                             i64(kTile), /*alignment=*/64));
    }
    OpBuilder::InsertionGuard guard(b_);
    RowLoop rows = emitRowLoop(body_, size, b_);
    SmallVector<Val> prefix = delinearize(target_, target_.wrap(rows.row), rowShape);
    Value rowStart = rows.rowStart, lo = rows.lo, hi = rows.hi;
    auto tileLoop = scf::ForOp::create(b_, lo, hi, i64(kTile));
    b_.setInsertionPointToStart(tileLoop.getBody());
    Value k0 = tileLoop.getInductionVar();
    Value count = arith::MinSIOp::create(b_, arith::SubIOp::create(b_, hi, k0), i64(kTile));
    forEach(count, [&](Value j) {
      for (size_t r = 0; r < roots_.size(); ++r)
        storeElement(b_, tiles[r], j, initial(r), accDTypes[r]);
    });
    reducedLoops({}, [&](ValueRange) {
      forEach(count, [&](Value j) {
        SmallVector<Val> kept = prefix;
        kept.push_back(target_.wrap(arith::AddIOp::create(b_, k0, j)));
        SmallVector<Value> accs;
        for (size_t r = 0; r < roots_.size(); ++r)
          accs.push_back(loadElement(b_, tiles[r], j, accDTypes[r]));
        SmallVector<Value> next = accumulate(kept, accs);
        for (size_t r = 0; r < roots_.size(); ++r)
          storeElement(b_, tiles[r], j, next[r], accDTypes[r]);
      });
      return SmallVector<Value>();
    });
    forEach(count, [&](Value j) {
      Value index = arith::AddIOp::create(b_, rowStart, arith::AddIOp::create(b_, k0, j));
      for (size_t r = 0; r < roots_.size(); ++r)
        store(r, index, loadElement(b_, tiles[r], j, accDTypes[r]));
    });
  }

  ImplicitLocOpBuilder &b_;
  const KernelBody &body_;
  CpuTarget target_;
  FusionWalk walk_;
  ArrayRef<int64_t> shape_, axes_;
  SmallVector<int64_t> keptShape_;
  SmallVector<ReduceOp> roots_;
  SmallVector<Val> reduced_;
};

} // namespace

std::string emitReductionBody(FusionOp fusion, const KernelBody &body, ImplicitLocOpBuilder &b) {
  return ReductionEmitter(fusion, body, b).emit();
}

} // namespace smelt::codegen::cpu
