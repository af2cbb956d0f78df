// What smelt-fuse needs to know about ops (which can sit in a kernel, what an element costs)
// and how a chosen group of ops becomes a smelt.fusion. Kept apart from the pass so the
// decisions in Fuse.cpp read as the algorithm its header describes.
#pragma once

#include "ir/SmeltDialect.h"

#include "llvm/ADT/SetVector.h"

#include <string>

namespace smelt {

/// The most operands of a concat that a CPU kernel reads. A fused concat reads every operand
/// its element may come from and selects (except in a loop split at its boundaries), so a wide
/// one (a DenseNet block's, the pieces of a sequence's gradient) stays the runtime's copy on
/// the CPU, which moves each byte once. The GPU has no such copy: there it is a kernel.
constexpr size_t kMaxFusedConcatOperands = 8;

/// How an op takes part in fusion: its OpFacts role (ir/OpFacts.h), except that only a splat
/// constant is a source (a kernel cannot hold a tensor literal) and a concat of more than
/// kMaxFusedConcatOperands operands on the CPU is a library op.
FusionRole fusionRole(mlir::Operation *op);

/// Arithmetic per element, in "simple op" units, as the op states it (Smelt_ElementCost): 1 for
/// add or compare, 0 for a remap, about 20 for exp/log/tanh/erf, 40 for pow. The cost model
/// weighs recomputation with it.
int64_t elementCost(mlir::Operation *op);

/// How the fuse report names an op: "'add' at model.mlir:4 tensor<256x512xf32>".
std::string describe(mlir::Operation *op);

/// The device smelt-place-devices gave `op`, or "" before placement.
llvm::StringRef deviceOf(mlir::Operation *op);

/// Whether `op`'s device runs slice, pad and concat as runtime copy steps, not only as
/// kernels: the CPU does (and everything before placement runs there); the GPU has no such
/// steps.
bool hasCopySteps(mlir::Operation *op);

int64_t numElements(mlir::Value value);
int64_t numBytes(mlir::Value value);

/// Puts `block`'s ops (all but a terminator) in the order mlir::sortTopologically gives, in
/// time linear in the block: by the number of the sweep in which that function's repeated
/// scans over the unscheduled ops would take each one, then by position. Its rescans took time
/// growing with the square of an unrolled recurrence's steps once outlining left a long chain
/// of fusions in reverse order (78% of smelt-opt's time on the 512-step LSTM's training step,
/// once the reachability walks were fast). The ops read each other through their operands only
/// (a fusion is isolated from above).
void sortTopologicallyInLinearTime(mlir::Block &block);

/// Replaces `members` (in block order, all in one block) by one smelt.fusion of `kind`.
/// Members in `duplicated` are cloned into the body and stay outside for their other users;
/// the rest move in. The fusion's inputs are the values members read from outside, its results
/// the moved members' values used outside, in block order; the fusion is created where its
/// first member was (the caller sorts the block afterwards). The members it erased (moved in,
/// unused outside) are appended to `erased`: their addresses may be reused for new ops.
FusionOp outlineFusion(FusionKind kind, llvm::ArrayRef<mlir::Operation *> members,
                       const llvm::SmallPtrSetImpl<mlir::Operation *> &duplicated,
                       llvm::SmallVectorImpl<mlir::Operation *> &erased);

} // namespace smelt
