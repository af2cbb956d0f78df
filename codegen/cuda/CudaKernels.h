// Inside the CUDA renderer: one emitter per fusion kind (as XLA splits its emitters by fusion
// kind) and per op with a kernel of its own, the prelude, and the pieces every emitter shares.
// CudaRenderer.cpp picks the emitter.
#pragma once

#include "ir/SmeltDialect.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace smelt::codegen::cuda {

/// The launch the kernels are written for: an H100 has 132 SMs and runs 2048 threads on each.
constexpr int64_t kSmCount = 132;
constexpr int64_t kThreadsPerSm = 2048;

/// One kernel's text and the launch it was written for.
struct KernelSource {
  std::string text;
  int64_t block = 0;
  int64_t grid = 0;
};

/// What a rendered kernel is: an `extern "C" __global__` entry the runtime launches, or the body
/// that the entries of equivalent fusions share (SMELT_SHARED_BODY: a device function they
/// call, compiled once).
enum class KernelForm { Entry, SharedBody };

/// Grid-stride loops over the elements, 16 bytes per access where reads are contiguous.
KernelSource renderLoopKernel(FusionOp fusion, llvm::StringRef name,
                              KernelForm form = KernelForm::Entry);
/// Threads striding over the reduced elements, then warp shuffles and shared memory; few results
/// over long ranges also split them over blocks, combined through a `__device__` workspace the
/// kernel's text declares before it.
KernelSource renderReductionKernel(FusionOp fusion, llvm::StringRef name,
                                   KernelForm form = KernelForm::Entry);

/// The kernels of ops that no fusion holds, placed on a GPU (BuildExecutable.h's
/// hasOwnGpuKernel): one entry each, taking (const T *in0, ..., T *out0) as fusions do.
KernelSource renderArgmaxKernel(ArgmaxOp op, llvm::StringRef name);
KernelSource renderScatterAddKernel(ScatterAddOp op, llvm::StringRef name);

/// Includes, stdint names and the smelt_* helpers the kernels call.
llvm::StringRef cudaPrelude();

/// "int32_t" when every tensor the kernel touches has fewer than 2^30 elements (so an index
/// plus a grid's stride cannot overflow), else "int64_t".
std::string indexTypeFor(FusionOp fusion);
/// Per result, the input it is written in place of, or -1 (smelt.in_place, which
/// smelt-donate-in-place sets); empty when none is.
llvm::ArrayRef<int64_t> inPlaceResults(FusionOp fusion);
/// The comment naming what the kernel computes, its signature and the opening brace.
std::string kernelHeader(FusionOp fusion, llvm::StringRef name, int64_t block,
                         KernelForm form = KernelForm::Entry);
/// The same for the kernel of `op` alone (its operands, then its result), `how` saying what
/// it computes and how the threads share it.
std::string oneOpKernelHeader(mlir::Operation *op, llvm::StringRef name, int64_t block,
                              llvm::StringRef how);
/// The entry `name` of `fusion` whose whole work is a call of the shared body `body`.
std::string entryCallingBody(FusionOp fusion, llvm::StringRef name, int64_t block,
                             llvm::StringRef body);
int64_t elementCount(llvm::ArrayRef<int64_t> shape);

} // namespace smelt::codegen::cuda
