// Mixed precision over a block of smelt ops, shared by the smelt-mixed-precision pass
// (passes/MixedPrecision.cpp) and the builder (Graph::applyPrecision), as Keras' mixed_bfloat16
// and mixed_float16 policies: matmuls and convolutions compute in bf16/f16, the elementwise
// and shape ops between them follow, everything numerically delicate stays f32.
#pragma once

#include "mlir/IR/Block.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace smelt {

enum class PrecisionPolicy { f32, mixed_bf16, mixed_f16 };

/// "f32", "mixed_bf16", "mixed_f16".
std::optional<PrecisionPolicy> parsePrecisionPolicy(llvm::StringRef name);
llvm::StringRef precisionPolicyName(PrecisionPolicy policy);

struct MixedPrecisionStats {
  unsigned lowPrecisionOps = 0; // ops now computing in bf16/f16
  unsigned casts = 0;           // converts left in the block
};

/// Rewrites the f32 ops of `block` (f64 and integer ops are left alone) under `policy`, each op
/// in the list its ODS facts name (Smelt_Precision, read through OpFacts):
///  1. allow list (matmul, conv2d and its gradients): f32 operands are converted to the low
///     type and the op computes in it;
///  2. infer list (elementwise arithmetic without exp/log/pow/sqrt/rsqrt/erf/sin/cos, compare, select,
///     shape ops, pooling): computes in the low type when an operand already is and every
///     other f32 operand is cheap to cast (a splat constant, a block argument such as an f32
///     master weight, or a broadcast or reshape of one);
///  3. deny list (everything else: exp, log, reductions, argmax, random numbers ...) and every
///     value the block's users see stay f32.
/// A rewritten op is cloned in the low type and its old results are replaced by a convert back
/// to f32, so every existing value keeps its type; a later low op reads the low value directly
/// (the cast pair folds). Replaced ops are erased when `eraseReplaced`, else left unused (the
/// builder's tensor handles may still name them; canonicalization removes them).
/// Gradients taken afterwards (ir/Autodiff.h) flow back through the converts, so master
/// weights get f32 gradients.
MixedPrecisionStats applyMixedPrecision(mlir::Block &block, PrecisionPolicy policy,
                                        bool eraseReplaced = true);

} // namespace smelt
