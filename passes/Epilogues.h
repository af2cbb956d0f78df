// Epilogue folding, smelt-fuse's first step: the bias add and the activation after a matmul or
// conv2d move into the op itself, and the library call computes them before it stores its
// result (oneDNN post-ops on the CPU, cuBLASLt epilogues on the GPU). Neither then needs a
// kernel of its own or a pass over the result in memory.
//
// For each matmul and conv2d C without an epilogue, in program order:
//  1. Which library runs C, from its device: oneDNN (cpu, or no device yet) takes a bias and
//     relu, tanh, logistic, relu6, hardswish or swish after a matmul, and after a conv2d
//     unless `convs` is false (the
//     convolution runs in the filter layout oneDNN chose, whose kernels apply post-ops as they
//     store; with Smelt's plain filter layout oneDNN 2.6 fell back to a gemm convolution that
//     ran 3x slower with them: bench/RESULTS.md); cuBLASLt (gpu) a bias and relu after a matmul
//     in f32, f16 or bf16; the cuDNN convolutions here take none.
//  2. Bias: C's result has one user, an add on C's device whose other operand is a vector V
//     [N] of C's element type broadcast along the result's last dimension (broadcast_in_dim V,
//     dims = [rank - 1]; N is that dimension). V becomes C's bias operand.
//  3. Activation: the value so far (C's result, or the add's) has one user, a relu, tanh or
//     logistic on C's device that the library applies; or, for oneDNN, the ops the importer
//     writes for relu6 (max with a splat 0, then min with a splat 6: ONNX's Clip(0, 6)),
//     hardswish (x * min(max(x * 1/6 + 0.5, 0), 1)) or swish (x * logistic(x)), each op of
//     the chain the only user of the one before (x feeds the last product as well).
//  4. C is rebuilt with the bias and activation where the last folded op was; the folded ops
//     are erased (the broadcast too, once nothing else reads it).
// Autodiff must run first (a contraction with an epilogue has no gradient rule); relu's rule
// reads its result, not its operand, so a training step's bias add feeds only the relu.
//
// Example (on the CPU):
//   %0 = smelt.matmul %x, %w : tensor<256x784xf32>, tensor<784x512xf32>
//   %1 = smelt.broadcast_in_dim %b, dims = [1] : tensor<512xf32> -> tensor<256x512xf32>
//   %2 = smelt.add %0, %1 : tensor<256x512xf32>
//   %3 = smelt.relu %2 : tensor<256x512xf32>
// becomes
//   %3 = smelt.matmul %x, %w bias %b activation relu
//       : tensor<256x784xf32>, tensor<784x512xf32>, tensor<512xf32>
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace smelt {

/// Folds the epilogues of `function`'s matmuls (and with `convs`, CPU conv2ds) as above.
/// Appends one line per matmul and conv2d to `log`: what was folded into which library call,
/// or why nothing (or not everything) was. Returns how many contractions got an epilogue.
unsigned foldEpilogues(mlir::func::FuncOp function, bool convs, std::vector<std::string> &log);

} // namespace smelt
