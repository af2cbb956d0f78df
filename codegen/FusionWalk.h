// The one walk over a fusion body that both back ends share (tinygrad's renderer pattern): it
// turns "the value of body tensor v at element i" into calls on an ElementTarget, which the
// CUDA renderer (codegen/cuda/) answers with C++ statements and the CPU lowering (codegen/cpu/)
// with arith/math ops. The targets own the loops (grid-stride loops and block reductions on
// the GPU, scf loops split over threads on the CPU); the walk owns what an element is.
//
// Indices are computed lazily: an elementwise chain passes one index through untouched, so a
// fusion of same-shape ops reads every input at the loop's linear index (contiguous, so it
// vectorizes); only broadcast_in_dim, transpose, slice, concat, pad, iota and gather ask for
// coordinates, and reshape keeps the linear index and changes the shape it counts in. A
// gather's table index is data: the walk emits the index element first, and the target clamps
// it into the table. A concat reads each operand its coordinate may fall in, at a clamped
// index, and selects; a pad reads its operand at a clamped index and selects the constant
// outside it. Where the target states the range of a coordinate (a CPU loop split at the
// pieces' boundaries), the walk reads only the operand the range lies in and selects nothing.
//
// Numbers: f16 and bf16 are loaded into f32 and computed in f32, converts round to them
// exactly (round to nearest even), and stores round once; f32, f64 and integers compute in
// their own type. docs/ops.md gives every op's semantics, which the targets follow exactly.
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/DType.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace smelt::codegen {

/// A target's handle for one scalar it emitted: an index into its own table of C++ variable
/// names or mlir::Values.
using Val = unsigned;

/// The element type of a smelt tensor type, or nullopt for one codegen cannot compile.
std::optional<rt::DType> dtypeOf(mlir::Type type);
/// dtypeOf for a ranked tensor value; the verifier guarantees it exists in a fusion body.
rt::DType elementDType(mlir::Value value);

/// What a back end supplies to the walk. Element values are in their compute type (f32 for
/// f16/bf16 tensors); index values are 64-bit signed integers.
class ElementTarget {
public:
  virtual ~ElementTarget() = default;

  virtual Val indexConstant(int64_t value) = 0;
  virtual Val indexAdd(Val a, Val b) = 0;
  virtual Val indexMul(Val a, int64_t factor) = 0;
  virtual Val indexDiv(Val a, int64_t divisor) = 0; // a >= 0, divisor > 0
  virtual Val indexRem(Val a, int64_t divisor) = 0; // a >= 0, divisor > 0
  /// a + offset where the sum is known not to be negative; the offset may be.
  virtual Val indexOffset(Val a, int64_t offset) = 0;
  /// a + offset clamped into [0, size): where a pad or a concat reads an operand for an element
  /// that lies outside it, so the read stays in bounds (a select then discards the value).
  virtual Val indexOffsetClamped(Val a, int64_t offset, int64_t size) = 0;
  /// An i1: whether a < bound.
  virtual Val indexBelow(Val a, int64_t bound) = 0;

  /// Element `index` (row-major) of fusion input `input`, widened to its compute type.
  virtual Val load(unsigned input, Val index) = 0;
  /// A constant of `dtype` (its compute type): floats exactly, integers exactly, i1 as 0/1.
  virtual Val floatConstant(double value, rt::DType dtype) = 0;
  virtual Val integerConstant(int64_t value, rt::DType dtype) = 0;
  /// The smelt op `op` ("neg", "exp", ..., "add", "max", "pow") on values of `dtype`.
  virtual Val unary(llvm::StringRef op, Val x, rt::DType dtype) = 0;
  virtual Val binary(llvm::StringRef op, Val a, Val b, rt::DType dtype) = 0;
  /// An i1 from comparing two values of `dtype`.
  virtual Val compare(CompareDirection direction, Val a, Val b, rt::DType dtype) = 0;
  virtual Val select(Val pred, Val onTrue, Val onFalse, rt::DType dtype) = 0;
  /// smelt.convert: rounds to f16/bf16 (staying in f32), float -> integer truncates and
  /// saturates with NaN -> 0, anything -> i1 is x != 0.
  virtual Val convert(Val x, rt::DType from, rt::DType to) = 0;
  /// An index as an element of `dtype` (iota).
  virtual Val indexToElement(Val index, rt::DType dtype) = 0;
  /// An i32 or i64 element (`dtype`) as an index clamped into [0, size): the row a gather
  /// reads, which is data, so it must be kept inside the table.
  virtual Val elementToIndex(Val element, rt::DType dtype, int64_t size) = 0;
  /// Element `index` (row-major) of smelt.rng_uniform (docs/ops.md): Philox4x32-10 of the
  /// counter (index, offset) under key `seed`, as low + range * u with the product and the sum
  /// each rounded: for f32, f16 and bf16 in f32 with u from the first word's top 24 bits (`low`
  /// and `range` are floats then), for f64 in f64 with u from 53 bits of the first two words.
  /// `offset` is an i64 element. Bit for bit the same on every target.
  virtual Val uniform(Val index, Val offset, uint64_t seed, double low, double range,
                      rt::DType dtype) = 0;
  /// Element `index` of smelt.rng_normal (docs/ops.md): Box-Muller on the first two Philox
  /// words of the same counter, z = sqrt(-2 ln u1) cos(2 pi u2) with u1, u2 from their top 24
  /// bits, as mean + stddev * z; in f32 for f32, f16 and bf16, in f64 for f64.
  virtual Val normal(Val index, Val offset, uint64_t seed, double mean, double stddev,
                     rt::DType dtype) = 0;
};

/// The row-major coordinates of position `linear` in `shape`, peeled from the last dimension
/// (coordinate = rest % size, rest /= size): a remainder and a division per dimension after
/// the first, none for a dimension of size 1.
llvm::SmallVector<Val> delinearize(ElementTarget &target, Val linear,
                                   llvm::ArrayRef<int64_t> shape);

/// Where each operand of `concat` starts along its dimension, and the result's size last.
llvm::SmallVector<int64_t> concatBounds(ConcatOp concat);

class FusionWalk {
public:
  /// Names an index the walk keeps: valid until the next newScope().
  using IndexRef = unsigned;

  FusionWalk(FusionOp fusion, ElementTarget &target);

  /// An index into a tensor of `shape` at row-major position `linear`.
  IndexRef linearIndex(llvm::ArrayRef<int64_t> shape, Val linear);
  /// An index into a tensor of `shape` at `coords` (one per dimension).
  IndexRef coordIndex(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<Val> coords);
  /// An index whose coordinates the caller knows, and its row-major position when given (a
  /// loop nest knows both): `linear` and `coords` must agree.
  IndexRef knownIndex(llvm::ArrayRef<int64_t> shape, std::optional<Val> linear,
                      llvm::ArrayRef<Val> coords);
  /// The index into `reduce`'s operand from the result's coordinates (`kept`, one per kept
  /// dimension) and the coordinates along its reduced axes (`reduced`, in axis order).
  IndexRef reduceOperandIndex(ReduceOp reduce, llvm::ArrayRef<Val> kept,
                              llvm::ArrayRef<Val> reduced);

  /// Emits body value `value` at `at` (an index into its shape). What was emitted since the
  /// last newScope() is reused, so a value feeding several ops is computed once.
  Val emit(mlir::Value value, IndexRef at);

  /// Forgets every index and emitted value: the target calls it on entering a scope (a loop
  /// body) where what it emitted before may not be visible.
  void newScope();

  /// States that index value `index` lies in [low, high) in this scope: a loop split at a
  /// concat's or a pad's boundaries lets the walk read only the piece a range lies in.
  void setRange(Val index, int64_t low, int64_t high);

  Val linear(IndexRef at);
  llvm::ArrayRef<Val> coords(IndexRef at);

  FusionOp fusion() const { return fusion_; }

private:
  struct Index {
    llvm::SmallVector<int64_t> shape;
    std::optional<Val> linear;
    llvm::SmallVector<Val> coords; // empty until asked for (or for rank 0)
    bool hasCoords = false;
  };
  /// The index into `op`'s operand #`operand` that element `at` of its result reads (a
  /// gather's table, once its index element is emitted; a concat's operand, clamped into it
  /// unless the coordinate's range lies inside it).
  IndexRef operandIndex(mlir::Operation *op, IndexRef at, unsigned operand = 0);
  /// The coordinates a slice's, pad's or concat's operand #`operand` is read at.
  llvm::SmallVector<Val> movedCoords(mlir::Operation *op, IndexRef at, unsigned operand);
  /// The operands [first, last] of `concat` that element `at` may read: all of them, or those
  /// its coordinate's stated range overlaps.
  std::pair<unsigned, unsigned> concatCandidates(ConcatOp concat, IndexRef at);
  /// index + offset, clamped into [0, size) unless its stated range shows no need; the range
  /// carries over to the result.
  Val offsetCoordinate(Val index, int64_t offset, int64_t size);
  /// The stated range of an index value, if any.
  std::optional<std::pair<int64_t, int64_t>> rangeOf(Val index) const;
  /// `value` as a constant of `dtype` (an integer truncated, i1 as value != 0).
  Val constantOf(double value, rt::DType dtype);
  /// Whether element `at` of `pad` lies in its padding for sure (the operand is empty, or a
  /// stated range lies outside it), so nothing is read.
  bool onlyPadding(PadOp pad, IndexRef at);
  /// A pad's element: its operand's value, or the constant where `at` lies outside it.
  Val emitPad(PadOp pad, IndexRef at);
  /// A concat's element: the value of the operand its coordinate falls in.
  Val emitConcat(ConcatOp concat, IndexRef at);
  /// The coordinates in `from` of a reshape's operand element that element `at` of its result
  /// is, computed group by group where the coordinates of `at` are known: the dimensions that
  /// a reshape splits or merges form groups holding the same elements on both sides, and only
  /// a group that splits a dimension divides (a channel shuffle's 232 -> 116 x 2 by 2), where
  /// going through the linear index would divide for every dimension. Nullopt where `at` has
  /// no coordinates yet, or a shape is empty or has no elements.
  std::optional<llvm::SmallVector<Val>> reshapedCoords(llvm::ArrayRef<int64_t> from, IndexRef at);
  /// The index into a gather's `indices` that element `at` of its result reads: the result's
  /// leading coordinates.
  IndexRef gatherIndicesIndex(GatherOp gather, IndexRef at);
  /// The first operand of `op` (with the index it is read at) not yet emitted at `at`.
  std::optional<std::pair<mlir::Value, IndexRef>> firstMissingOperand(mlir::Operation *op,
                                                                      IndexRef at);
  /// Emits `op` at `at` from its operands' emitted values.
  Val emitOp(mlir::Operation *op, IndexRef at);

  FusionOp fusion_;
  ElementTarget &target_;
  std::vector<Index> indices_;
  llvm::DenseMap<std::pair<mlir::Value, IndexRef>, Val> emitted_;
  llvm::DenseMap<std::pair<mlir::OpOperand *, IndexRef>, IndexRef> derived_;
  llvm::DenseMap<Val, std::pair<int64_t, int64_t>> ranges_;
  llvm::DenseMap<std::pair<mlir::Operation *, IndexRef>, IndexRef> indicesIndex_;
};

} // namespace smelt::codegen
